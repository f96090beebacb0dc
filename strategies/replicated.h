// `replicated`: every device holds a copy of the parameters; each planned range of gradients is
// all-reduced (mean) as soon as backward has produced it, and every replica applies the same
// update. --all_reduce_spec picks the all-reduce: nccl (through the Communicator: NCCL on GPUs,
// the in-process one on the reference backend), or one of our own (peer_all_reduce.h).
// With --compact_gradient_transfer on nccl, a range travels at half width in two collectives:
// all-to-all of the chunks (each device receives its chunk from everyone), an fp32 sum, and an
// all-gather of the summed chunks — half the bytes of an fp32 all-reduce, summed in fp32.
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
  void compact_all_reduce(int replica, GradientRange range);

  AllReduceSpec spec_;
  DataType transfer_type_ = DataType::f32;
  std::unique_ptr<Communicator> communicator_;  // nccl spec
  std::unique_ptr<PeerAllReduce> peer_;         // our own algorithms
  std::vector<std::unique_ptr<CompactBuffers>> compact_;
  std::vector<std::unique_ptr<Event>> exchanged_;  // per replica, on its communication stream
};

// fp16 | bf16 from --compact_gradient_transfer; f32 for none.
DataType compact_transfer_type(const RunConfig& config);

}  // namespace dpbench
