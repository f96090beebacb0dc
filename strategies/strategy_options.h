// What the strategies read of a run's configuration, and nothing else: the narrow view they are
// built from (strategy_options_of in strategy_registry.cpp fills it from the flags). Each field
// is the flag of its name (--all_reduce_spec, ...), documented with RunConfig and in the README;
// the defaults are the flags' own, so that a strategy built from StrategyOptions{} behaves as
// `dpbench` without synchronisation flags (a host test holds the two sets of defaults equal).
#pragma once

#include <cstdint>
#include <string>

namespace dpbench {

struct StrategyOptions {
  std::string all_reduce_spec;                 // replicated: empty means nccl
  std::string local_parameter_device = "gpu";  // parameter_server: gpu | cpu
  // How the gradient buffer is cut into exchanges (exchange_plan_options, exchange_plan.h).
  int gradient_repacking = 0;
  double bucket_cap_mb = 25;
  int64_t agg_small_grads_max_bytes = 0;
  int agg_small_grads_max_group = 10;
  bool overlap_comm = true;  // false: every exchange waits for the whole backward
  // How a range travels (strategies/exchange_methods/exchange_methods.cpp chooses by these).
  bool sparse_embedding_grads = false;
  std::string compact_gradient_transfer;  // fp16 | bf16; empty or none: fp32
  bool sharded_update = false;
  // mpirun runs: processes of the job and this one's rank (one device each); 1 and 0 otherwise.
  int num_processes = 1;
  int process_rank = 0;
};

}  // namespace dpbench
