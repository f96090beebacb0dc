// `replicated`: every device holds a copy of the parameters; each planned range of gradients is
// exchanged (mean) as soon as backward has produced it, and every replica applies the same
// update. How a range travels is an exchange method (strategies/exchange_methods/): the dense one
// --all_reduce_spec and its options choose (NCCL all-reduce, half-width transfer, sharded update,
// or one of our peer algorithms), and with --sparse_embedding_grads the embedding tables inside a
// range travel as their touched rows while the rest of the range goes the dense way.
// Note [update by bucket]: where each range's exchange is complete once the replica's own
// communication stream has run it (the methods on the communicator) and the update needs no
// look at the whole gradient first (fp16's automatic loss scaling checks every gradient before
// any update), the compute stream updates each range as soon as its exchange is done, in the
// order the exchanges started, instead of waiting for the last one: the update of the ranges
// backward finished early runs while the last ones (the first layers' gradients) are still
// travelling. The update is elementwise, so the parameters are the same bits either way.
#pragma once

#include <memory>
#include <vector>

#include "strategies/all_reduce_spec.h"
#include "strategies/bucketed_exchange.h"
#include "strategies/exchange_methods/exchange_method.h"
#include "strategies/exchange_methods/sparse_rows.h"

namespace dpbench {

class ReplicatedStrategy final : public BucketedExchangeStrategy {
 public:
  ReplicatedStrategy(const StrategyOptions& options, const DevicePlacement& placement);
  std::string name() const override { return "replicated"; }
  // What it issues per step for `plan` on a job of `shape`, as data (engine/communication/collective_schedule.h),
  // without devices: the schedules of the dense method the chooser picks for `options`
  // (exchange_methods.h), each range's after backward with --overlap_comm=false, and where the
  // update runs (Note [update by bucket]; fp16's automatic loss scaling, a fact of the run's
  // optimizer, is not in it). The embedding tables travel densely here: the sparse rows' schedule
  // needs the run's tables.
  static StepSchedule schedule_for(const StrategyOptions& options, const ParameterLayout& layout,
                                   const std::vector<GradientRange>& plan, const ScheduleShape& shape);
  // Its memory rule (StrategyMemory): every device holds a whole replica (a sharded update
  // updates 1/N of the optimizer state, but every replica holds all of it), and the dense
  // method's buffers for the largest shard of `plan` on `shape`. The sparse rows' packs, sized by
  // the tokens a batch touches, are not in it.
  static StrategyMemory memory_for(const StrategyOptions& options, const ParameterLayout& layout,
                                   const std::vector<GradientRange>& plan, const ScheduleShape& shape);

 protected:
  void prepare(const ParameterLayout& layout) override;
  void exchange(int replica, size_t index, const Event& ready) override;
  void complete_step(int replica, int64_t step) override;
  TrafficModel traffic() const override;
  void abort_exchanges() override { dense_->abort(); }

 private:
  // Note [update by bucket]: wait for each range's exchange, then update it.
  void update_by_bucket(int replica, int64_t step);

  AllReduceSpec spec_;
  DataType transfer_type_ = DataType::f32;
  std::unique_ptr<SparseRows> embeddings_;  // --sparse_embedding_grads: the tables; else none
  std::unique_ptr<ExchangeMethod> dense_;   // the ranges (less the tables embeddings_ takes)
  std::vector<RangeParts> parts_;           // per planned range: its dense parts and tables
  bool updates_by_bucket_ = false;          // Note [update by bucket]
  // Per replica, with updates_by_bucket_: per planned range, an event on its communication stream
  // after the range's exchange; and the step's ranges in the order their exchanges started.
  std::vector<std::vector<std::unique_ptr<Event>>> exchanged_;
  std::vector<std::vector<size_t>> started_;
};

}  // namespace dpbench
