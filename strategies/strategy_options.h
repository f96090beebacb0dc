// What the strategies read of a run's configuration, and nothing else: the synchronisation options,
// each the flag of its name (--all_reduce_spec, ...), each initialiser that flag's default, each
// described by its record in strategies/synchronisation_options.cpp (flag, help, values, what a
// result records, label): a new option is a field here and a record there. The
// CLI's RunConfig is made of this and the models' ModelSettings; a strategy is built from this and
// the run's DevicePlacement (engine/backend/device_placement.h).
#pragma once

#include <cstdint>
#include <string>

namespace dpbench {

// --compact_gradient_transfer: the width gradients travel at (full: fp32). Its names ("none",
// "fp16", "bf16", in this order) are its option's choices (synchronisation_options.cpp).
enum class TransferWidth { full, fp16, bf16 };

// --reduce_precision (fully_sharded): the type a unit's gradients are reduce-scattered in. Its
// names ("fp32", "bf16", in this order) are its option's choices.
enum class ReducePrecision { fp32, bf16 };

struct StrategyOptions {
  // replicated: nccl | xring | pscpu | psgpu, optionally "#k" for k shards; resolved to "nccl"
  // for the all-reduce strategies when not given, empty for the others.
  std::string all_reduce_spec;
  std::string local_parameter_device = "gpu";  // parameter_server: gpu | cpu
  // How the flat gradient buffer is cut into exchanges (strategies/exchange_plan.h):
  int gradient_repacking = 0;  // N > 0: N equal pieces of the whole buffer
  double bucket_cap_mb = 25;   // buckets in gradient-readiness order; 0: one exchange per tensor
  double tail_bucket_mb = 0;   // buckets: the last one closes at this size (Note [tail bucket]); 0: off
  int64_t agg_small_grads_max_bytes = 0;  // per-tensor mode: batch tensors up to this size; 0: off
  int agg_small_grads_max_group = 10;     // ... at most this many per batch
  // Communication of a range starts as soon as backward produced it; false: after all of backward.
  bool overlap_comm = true;
  // How a range travels (strategies/exchange_methods/exchange_methods.cpp chooses by these):
  // embedding tables exchange only the rows a step touched (gathered), not the dense gradient;
  bool sparse_embedding_grads = false;
  // fp16 | bf16: gradients travel at half width and are summed in fp32; full: fp32;
  TransferWidth compact_gradient_transfer = TransferWidth::full;
  // replicated, nccl: each range is reduce-scattered, each replica updates only its 1/N shard of
  // it and the updated parameters are all-gathered (the optimizer's work split N ways) instead of
  // all-reducing the gradients and every replica updating all of them.
  bool sharded_update = false;
  // distributed_all_reduce: reduce-scatter inside each host, all-reduce across hosts, all-gather
  // inside each host (strategies/exchange_methods/hierarchical_all_reduce.h).
  bool hierarchical_all_reduce = false;
  // fully_sharded (strategies/fully_sharded.h): units gathered this many uses ahead; a unit's
  // forward copy freed after it (true) or kept until its backward (false); the type gradients
  // are reduce-scattered in; devices per shard group (0: every device; fewer: hybrid sharding).
  int prefetch_units = 1;
  bool reshard_after_forward = true;
  // Under fp16/bf16: each shard's 16-bit copy kept between steps and gathered (false: the fp32
  // shard rounded at each gather; Note [what travels]).
  bool shard_weight_copy = true;
  ReducePrecision reduce_precision = ReducePrecision::fp32;
  int shard_group_size = 0;
  // Not a flag, the run's precision's: the bytes per element fully_sharded gathers a unit in, 2
  // where the run keeps a 16-bit weight copy (--precision=fp16 or bf16, Note [what travels] in
  // strategies/fully_sharded.h), else 4. Its schedule and memory rule size the gathers by it.
  int gathered_element_bytes = 4;
};

}  // namespace dpbench
