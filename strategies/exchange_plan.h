// How a step's gradient exchange is cut: the flat gradient buffer (laid out in the order backward
// finishes it) becomes a list of contiguous ranges, each exchanged as one unit as soon as
// backward has produced all of it. Buckets of --bucket_cap_mb (PyTorch DDP's scheme), N equal
// pieces (--gradient_repacking), or one range per tensor with small tensors batched
// (--agg_small_grads_max_bytes / --agg_small_grads_max_group, tf_cnn_benchmarks' scheme).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/training/parameter_set.h"

namespace dpbench {

struct ExchangePlanOptions {
  int gradient_repacking = 0;         // N > 0: N equal pieces, tensor boundaries ignored
  int64_t bucket_cap_bytes = 25 << 20;  // > 0: buckets closing once they reach this size
  // With buckets, > 0: the last bucket backward fills (the tensors it produces last) closes once
  // it reaches this size instead; 0: it holds whatever the other buckets left.
  int64_t tail_bucket_bytes = 0;
  int64_t agg_small_max_bytes = 0;    // per-tensor mode: batch tensors of at most this size
  int agg_small_max_group = 10;       // ... at most this many per batch
  size_t element_bytes = sizeof(float);
};

// Contiguous, ascending, non-empty ranges covering [0, layout.total_count()) exactly. Note [tail
// bucket]: what is still travelling when backward ends is the last bucket, and with buckets cut
// from the front it holds whatever the others left (up to a whole cap, most of it ready long
// before the step's last gradient). A tail bucket cut from the back holds only the tensors
// backward produces last; the rest is planned as before, ahead of it.
std::vector<GradientRange> plan_exchanges(const ParameterLayout& layout, const ExchangePlanOptions& options);

// `range` cut into at most `parts` contiguous pieces of nearly equal size (the first ones one
// element larger); fewer pieces when the range has fewer elements; none when it is empty.
std::vector<GradientRange> split_range(GradientRange range, int parts);

// Per replica and step: which planned ranges are complete, given the announced gradient ranges
// (any order, any granularity, never overlapping within a step).
class ReadinessTracker {
 public:
  explicit ReadinessTracker(std::vector<GradientRange> plan);
  void begin_step();
  // Indices of the planned ranges that `announced` completes, ascending.
  std::vector<size_t> mark_ready(GradientRange announced);
  bool all_ready() const { return completed_ == plan_.size(); }

 private:
  std::vector<GradientRange> plan_;
  std::vector<size_t> missing_;  // elements not yet announced, per planned range
  size_t completed_ = 0;
};

}  // namespace dpbench
