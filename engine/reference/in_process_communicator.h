// InProcessCommunicator: the reference backend's Communicator. Ranks are the runner's device
// threads and buffers are host memory, so every collective is a rendezvous in host memory: each
// rank publishes its pointers, the last rank to arrive combines everyone's data, and all ranks
// leave together once the results are written. Reductions add the ranks in the fixed order
// 0..N-1 in fp32 and round once to the buffer's type, so results never depend on thread timing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/communication/collective_traffic.h"
#include "engine/communication/communicator.h"

namespace dpbench {

class InProcessCommunicator final : public Communicator {
 public:
  // What one rank asked for. All ranks of one rendezvous must agree on everything but the
  // pointers; a mismatch is a programming error that would hang NCCL, so here it aborts.
  struct Call {
    Collective collective = Collective::all_reduce;
    size_t count = 0;  // the count argument as the interface defines it for `collective`
    DataType type = DataType::f32;
    ReduceOp op = ReduceOp::sum;
    int root = 0;
    const void* send = nullptr;
    void* recv = nullptr;
  };

  explicit InProcessCommunicator(int num_ranks);

  int size() const override { return num_ranks_; }
  std::string description() const override { return "in-process"; }
  // Nothing is enqueued: every call runs to completion on the calling thread.
  bool capturable() const override { return false; }

  void all_reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                  StreamKind stream) override;
  void reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
              int root, StreamKind stream) override;
  void broadcast(int rank, const void* send, void* recv, size_t count, DataType type, int root,
                 StreamKind stream) override;
  void reduce_scatter(int rank, const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op, StreamKind stream) override;
  void all_gather(int rank, const void* send, void* recv, size_t send_count, DataType type,
                  StreamKind stream) override;
  void all_to_all(int rank, const void* send, void* recv, size_t chunk_count, DataType type,
                  StreamKind stream) override;

  // group_start / group_end stay the base class's no-ops: calls run one by one, and every rank
  // issues the same sequence, so they meet in the same order without grouping.

  // Wakes every rank waiting in a rendezvous; they, and every later call, throw RuntimeError.
  void abort() override;

 private:
  // Publishes `call` for `rank` and waits for the others; the last to arrive checks that the
  // calls agree and runs the collective for all ranks. Throws RuntimeError when aborted.
  void rendezvous(int rank, const Call& call);
  // Rank, root and buffers, as far as one rank can check them alone; throws RuntimeError.
  void check_call(int rank, const Call& call) const;
  // Empty when every rank's call matches rank 0's, else a sentence naming the first that differs.
  std::string mismatch_between_calls() const;
  // Marks the communicator aborted and wakes every waiter; the caller holds the lock.
  void abort_locked(const std::string& reason);
  [[noreturn]] void throw_aborted() const;

  const int num_ranks_;
  std::mutex mutex_;
  std::condition_variable released_;
  // Guarded by mutex_:
  std::vector<Call> calls_;     // indexed by rank, for the rendezvous in progress
  std::vector<bool> arrived_;   // which ranks have published their call in this rendezvous
  int num_arrived_ = 0;
  uint64_t generation_ = 0;     // completed rendezvous; a waiter leaves when it changes
  bool aborted_ = false;
  std::string abort_reason_;
};

// What every in-process communicator of this process has run so far, by collective: the calls
// completed and their bytes as nccl-tests counts a call's size (engine/communication/collective_traffic.h). The
// tests compare the difference over some steps with what the exchanges' schedules say they issue.
struct CollectiveTally {
  std::map<Collective, int64_t> calls;
  std::map<Collective, double> bytes;
};
CollectiveTally in_process_collective_tally();

// The factory create_communicator uses for reference devices: one rank per device.
std::unique_ptr<Communicator> create_in_process_communicator(int num_ranks);

}  // namespace dpbench
