// summary.timeline: a run's backward timeline in a few numbers, the input of `dpbench predict`.
// From device 0's traced measured steps (--trace_file; the same device timestamps as the trace):
// the mean step, forward, backward and after-backward times, and for every gradient range the
// model announced, when backward had produced it (ms from backward's start). With the model's
// tensor sizes, any bucket plan (--bucket_cap_mb) can be rebuilt and each bucket's ready time read
// off, so a 1-GPU run of any strategy (independent included, which exchanges nothing) predicts
// the bucketed ones. This file is the one place that writes and reads the field.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/device_timeline.h"
#include "engine/training/parameter_units.h"

namespace dpbench {

struct ProducedRange {
  int64_t offset = 0, count = 0;  // elements of the flat gradient buffer
  double ready_ms = 0;            // mean over the traced steps, from backward's start
};

// The gradients of one replica, at most: a million times the memory of any device there is. A
// timeline of more (or whose sizes would overflow their sum) comes from an edited file.
constexpr int64_t kMaxGradientBytes = int64_t{1} << 50;  // 1 PiB

struct BackwardTimeline {
  int64_t traced_steps = 0;  // measured steps averaged
  double step_ms = 0, forward_ms = 0, backward_ms = 0;
  double after_backward_ms = 0;  // backward's end to the step's end: the update (and exchange waits)
  int64_t gradient_element_bytes = 4;  // the gradients are fp32 whatever the precision
  std::vector<int64_t> tensor_elements;  // every tensor's size, in the order backward produces them
  std::vector<ProducedRange> produced;   // in the order backward announced them
  // The model's parameter units and their uses in one step (Note [parameter units]), whatever
  // strategy the run had: what `dpbench predict` gathers and reduces for fully_sharded. Empty in
  // a result of an older dpbench or of a model that publishes none.
  ParameterUnits units;
  int64_t total_elements() const;        // of every tensor, the gaps that align them left out
};

// The timeline of `timeline`'s measured traced steps; none where no measured step was traced.
// `tensor_elements`: the model's tensors in gradient-buffer order.
// `units`: the model's parameter units, recorded beside the times.
std::optional<BackwardTimeline> summarize_backward_timeline(const DeviceTimeline& timeline,
                                                            std::vector<int64_t> tensor_elements,
                                                            ParameterUnits units = {});

nlohmann::json backward_timeline_to_json(const BackwardTimeline& timeline);
// Throws RuntimeError naming the field (summary.timeline.<key>) that is missing, malformed or
// impossible for a run: a count that is no whole number in range (traced steps, element bytes,
// tensor sizes, a range's offset and count), a time that is negative, not
// finite or beyond kMaxStepMs, a step of 0 ms, parts longer than the step, a range ready after it
// (Note [timeline consistency] in backward_timeline.cpp), no tensors, sizes past kMaxGradientBytes.
BackwardTimeline backward_timeline_from_json(const nlohmann::json& object);

// When backward had produced all of [offset, offset + count): the latest announced range that
// overlaps it (0 where none does).
double ready_ms_of(const BackwardTimeline& timeline, int64_t offset, int64_t count);

}  // namespace dpbench
