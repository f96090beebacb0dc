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
// (strategies/rendezvous.h), because each device waits on the others' events.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/strategy.h"
#include "strategies/exchange_meter.h"
#include "strategies/exchange_plan.h"
#include "strategies/host_thread_pool.h"
#include "strategies/rendezvous.h"

namespace dpbench {

class PeerAllReduce {
 public:
  // `meters` and `kernel_counters` are indexed by replica; max_count bounds any exchanged range.
  PeerAllReduce(const std::string& algorithm, int shards, DataType transfer_type,
                const std::vector<Replica>& replicas, size_t max_count,
                std::vector<ExchangeMeter*> meters, std::atomic<int64_t>* kernel_counters);
  ~PeerAllReduce();

  // Every replica's thread calls it for the same ranges in the same order; on return the mean of
  // the replicas' gradients over `range` is enqueued to land in every replica's gradient buffer.
  void exchange(int replica, GradientRange range, const Event& ready);
  // Makes `replica`'s compute stream wait until every device's part of the step's exchanges is
  // done (each device reads the others' buffers, so a replica may not overwrite its gradients
  // before the others are finished with them).
  void wait_until_done(int replica);
  void abort() { rendezvous_.abort(); }

  // Per device and exchange of `count` elements: bytes it sends (its outgoing copies) and the
  // number of copies.
  double bytes_sent(size_t count) const;
  int64_t transfers(size_t count) const;
  std::string description() const;

 private:
  struct RankState;
  void ring(std::vector<const Event*>& ready, GradientRange range, bool reverse);
  void sharded(std::vector<const Event*>& ready, GradientRange range);
  void through_host(std::vector<const Event*>& ready, GradientRange range);
  void kernels(int rank, int64_t count);

  std::string algorithm_;
  int shards_;
  DataType transfer_type_;
  std::vector<Replica> replicas_;
  std::vector<ExchangeMeter*> meters_;
  std::atomic<int64_t>* kernel_counters_;
  std::vector<std::unique_ptr<RankState>> ranks_;
  Rendezvous<const Event*> rendezvous_;
  std::unique_ptr<HostThreadPool> host_threads_;  // pscpu
  Buffer host_sum_;                               // pscpu: fp32, pinned
};

}  // namespace dpbench
