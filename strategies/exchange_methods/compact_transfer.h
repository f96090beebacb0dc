// --compact_gradient_transfer on the nccl spec: a shard travels at half width (fp16 | bf16) in two
// collectives: an all-to-all of its chunks (each device receives its chunk from everyone), an
// fp32 sum of the chunks in rank order, and an all-gather of the summed chunks. Half the bytes of
// an fp32 all-reduce, summed in fp32; values are scaled by 1/N before rounding, so that the sum
// of N of them cannot overflow fp16.
#pragma once

#include <memory>

#include "strategies/all_reduce_spec.h"
#include "strategies/exchange_methods/exchange_method.h"

namespace dpbench {

class CompactTransfer final : public CommunicatorExchange {
 public:
  CompactTransfer(AllReduceSpec spec, DataType transfer_type);
  ~CompactTransfer() override;
  std::string description() const override { return "all-reduce (" + spec_.text() + ")"; }
  RangeSchedule schedule(GradientRange range, const ScheduleShape& shape) const override;
  ExchangeBuffers buffer_bytes(size_t largest, const ScheduleShape& shape) const override;
  std::string busbw_formula() const override;

 protected:
  void allocate(size_t largest) override;
  void exchange_shard(int replica, GradientRange shard) override;

 private:
  struct Buffers;
  AllReduceSpec spec_;
  DataType transfer_type_;
  std::vector<std::unique_ptr<Buffers>> buffers_;  // per replica
};

}  // namespace dpbench
