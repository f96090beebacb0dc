// `replicated`: every device holds a copy of the parameters; each planned range of gradients is
// all-reduced (mean) as soon as backward has produced it, and every replica applies the same
// update. --all_reduce_spec picks the all-reduce: nccl (through the Communicator: NCCL on GPUs,
// the in-process one on the reference backend), or one of our own (peer_all_reduce.h).
// With --compact_gradient_transfer on nccl, a range travels at half width in two collectives:
// all-to-all of the chunks (each device receives its chunk from everyone), an fp32 sum, and an
// all-gather of the summed chunks — half the bytes of an fp32 all-reduce, summed in fp32.
// With --sparse_embedding_grads (nccl only), the embedding tables inside a range travel as the
// rows the step touched instead: each replica lists its touched rows, packs their ids and values
// at a fixed capacity, all-gathers the packs and scatter-adds them into a zeroed table gradient,
// rank by rank (the same order everywhere, so replicas stay bit-identical). The rest of the
// range is all-reduced as before.
// With --sharded_update (nccl only), a range is reduce-scattered instead: each replica then
// holds the mean gradient of its 1/N of the range, updates those parameters alone (on the
// communication stream, while backward goes on) and all-gathers them back into every replica.
// The same bytes travel as in an all-reduce, but each replica runs 1/N of the optimizer's work,
// and only the last range's share of it follows backward. Parameters change during backward, so
// a model must announce a range only once backward no longer reads those parameters (all of
// dpbench's models do: a layer announces after computing its input gradient).
#pragma once

#include <memory>

#include "engine/communicator.h"
#include "strategies/all_reduce_spec.h"
#include "strategies/bucketed_exchange.h"
#include "strategies/peer_all_reduce.h"

namespace dpbench {

class ReplicatedStrategy final : public BucketedExchangeStrategy {
 public:
  explicit ReplicatedStrategy(const RunConfig& config);
  ~ReplicatedStrategy() override;
  std::string name() const override { return "replicated"; }
  bool step_is_replayable() const override;
  void abort() override;

 protected:
  void prepare(const ParameterLayout& layout) override;
  void exchange(int replica, size_t index, const Event& ready) override;
  void complete_step(int replica, int64_t step) override;
  TrafficModel traffic() const override;

 private:
  struct CompactBuffers;
  struct SparseBuffers;
  // What exchanging plan()[i] means: the parts all-reduced, and the embedding tables (indices
  // into sparse_tables_) it exchanges sparsely. Without --sparse_embedding_grads: the whole
  // range, no tables. A table cut by the plan is exchanged with the first range holding part of
  // it (each of them completes only after the model announced the whole table).
  struct PlannedParts {
    std::vector<GradientRange> dense;
    std::vector<size_t> tables;
  };
  void plan_sparse_exchange();
  void compact_all_reduce(int replica, GradientRange range);
  void sparse_exchange(int replica, size_t table);
  void sharded_exchange(int replica, GradientRange range);
  // Elements of one replica's pack of table `table`: the row ids (as many as the capacity,
  // padded to a multiple of 4 so the values start 16-byte aligned), then capacity x dim values
  // (padded likewise, so that every rank's pack in the gathered buffer is aligned as well).
  size_t pack_ids(size_t table) const;
  size_t pack_floats(size_t table) const;
  void add_sparse_traffic(TrafficModel& model) const;

  AllReduceSpec spec_;
  DataType transfer_type_ = DataType::f32;
  std::unique_ptr<Communicator> communicator_;  // nccl spec
  std::unique_ptr<PeerAllReduce> peer_;         // our own algorithms
  std::vector<std::unique_ptr<CompactBuffers>> compact_;
  std::vector<SparseGradientSource> sparse_tables_;  // replica 0's; the same on every replica
  std::vector<size_t> sparse_capacity_;               // per table: min(ids, rows)
  std::vector<PlannedParts> parts_;                   // per planned range
  std::vector<std::unique_ptr<SparseBuffers>> sparse_;  // per replica
  std::vector<std::unique_ptr<Event>> exchanged_;  // per replica, on its communication stream
  bool sharded_ = false;                 // --sharded_update
  std::vector<int64_t> steps_completed_;  // per replica: the update's step number during exchanges
};

// fp16 | bf16 from --compact_gradient_transfer; f32 for none.
DataType compact_transfer_type(const RunConfig& config);

}  // namespace dpbench
