// The all-reduces of our own, for --all_reduce_spec=xring|psgpu|pscpu: built from copies between
// devices (peer copies over NVLink, or to and from pinned host memory) and reduce kernels, on each
// device's communication stream, ordered across devices by events only.
//   xring: a ring; N-1 steps of reduce-scatter (copy the predecessor's chunk, add it) then N-1
//          steps of all-gather (copy the predecessor's finished chunk). Shard k of "xring#k"
//          runs the ring in alternating directions.
//   psgpu: device j sums chunk j of every replica (pulling the N-1 others, adding in a fixed
//          order), then every device pulls the finished chunks of the others.
//   pscpu: every device copies its gradients to pinned host memory, host threads sum them in
//          rank order, every device copies the sum back.
// With --compact_gradient_transfer (psgpu, pscpu) the copies carry fp16/bf16 values (scaled by
// 1/N before rounding) and every sum is taken in fp32.
// One exchange is enqueued for every device at once by the last replica thread to arrive
// (strategies/rendezvous.h), because each device waits on the others' events; the method orders
// every device after its gradients and runs their transfer clocks itself.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strategies/all_reduce_spec.h"
#include "strategies/exchange_methods/exchange_method.h"
#include "strategies/host_thread_pool.h"
#include "strategies/rendezvous.h"

namespace dpbench {

class PeerAllReduce final : public ExchangeMethod {
 public:
  // Throws ConfigError for an algorithm that is not ours, or one that cannot carry `transfer_type`.
  PeerAllReduce(AllReduceSpec spec, DataType transfer_type);
  ~PeerAllReduce() override;

  std::string description() const override { return "all-reduce (" + spec_.text() + ")"; }
  std::string communicator_description() const override;
  bool uses_communicator() const override { return false; }
  void prepare(const ExchangeContext& context, size_t largest) override;
  bool orders_devices_itself() const override { return true; }
  // On return the mean of the replicas' gradients over `range` is enqueued to land in every
  // replica's gradient buffer.
  void exchange(int replica, GradientRange range, const Event& ready) override;
  // Makes `replica`'s compute stream wait until every device's part of the step's exchanges is
  // done (each device reads the others' buffers, so a replica may not overwrite its gradients
  // before the others are finished with them).
  void wait_until_done(int replica) override;
  void abort() override;

  RangeSchedule schedule(GradientRange range, const ScheduleShape& shape) const override;
  ExchangeBuffers buffer_bytes(size_t largest, const ScheduleShape& shape) const override;
  ScheduleShape run_shape() const override;
  std::string busbw_formula() const override;

 private:
  struct RankState;
  void ring(std::vector<const Event*>& ready, GradientRange range, bool reverse);
  void sharded(std::vector<const Event*>& ready, GradientRange range);
  void through_host(std::vector<const Event*>& ready, GradientRange range);

  AllReduceSpec spec_;
  DataType transfer_type_;
  std::vector<Replica> replicas_;
  std::vector<ExchangeMeter*> meters_;
  std::vector<std::unique_ptr<RankState>> ranks_;
  std::unique_ptr<Rendezvous<const Event*>> rendezvous_;
  std::unique_ptr<HostThreadPool> host_threads_;  // pscpu
  Buffer host_sum_;                               // pscpu: fp32, pinned
};

}  // namespace dpbench
