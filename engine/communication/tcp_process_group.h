// TcpProcessGroup: the processes of a job started without MPI (torchrun, srun --mpi=none) meet at
// rank 0 (LaunchEnvironment::rendezvous_host, one of its rendezvous_ports), each proving that it
// belongs to the job (Note [what the rendezvous trusts] in engine/communication/tcp_rendezvous.h), and keep two
// TCP connections to it each: one for the group's exchanges (NCCL's unique id, the flag check,
// per-rank results, the stop votes), one for control (a failing rank's abort, liveness probes,
// goodbye). Every exchange goes through rank 0 (a star): the messages are small and few, the
// GPUs' own traffic is NCCL's.
//
// Note [a rank that ends without finishing]: every process runs a watcher thread on its control
// connections. A peer that closes its connection without saying goodbye was killed or crashed; a
// peer that sends an abort failed and has said why. Rank 0 forwards either to every rank, names a
// killed rank in one line, and every process then ends at once with the failing rank's exit code:
// no rank is left waiting in a collective (NCCL's included) for a peer that is gone.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/communication/launch_environment.h"
#include "engine/communication/process_group.h"

namespace dpbench {

class TcpProcessGroup final : public ProcessGroup {
 public:
  // Joins the job: rank 0 listens on the rendezvous port, the others connect (retrying while rank
  // 0 is not up yet). Throws RuntimeError naming the address, the ranks missing and the timeout
  // when the job is not complete within `timeout_seconds`, ConfigError when a rank's variables
  // contradict the job's.
  TcpProcessGroup(const LaunchEnvironment& launch, double timeout_seconds);
  ~TcpProcessGroup() override;  // says goodbye: the end of a process that finished is no failure
  TcpProcessGroup(const TcpProcessGroup&) = delete;
  TcpProcessGroup& operator=(const TcpProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  const std::vector<std::string>& hostnames() const override { return hostnames_; }
  std::string launcher() const override { return launcher_name(launch_.launcher); }

  void broadcast(void* data, size_t bytes, int root) const override;
  void all_gather_bytes(const void* send, size_t bytes, void* recv) const override;
  std::vector<std::string> all_gather_text(const std::string& text) const override;
  [[noreturn]] void abort(int exit_code) const override;
  std::unique_ptr<Vote> start_vote(bool yes) const override;
  void set_stall_handler(double timeout_seconds, std::function<void(const std::string& what)> on_stall) override;
  StallDiagnosis diagnose_stall() const override;

 private:
  struct Connections;
  // Rank 0 gathers every rank's message and hands each rank what `answer` makes of them all.
  std::vector<std::string> exchange(const std::string& mine, const char* what,
                                    const std::function<std::string(const std::vector<std::string>&)>& answer) const;
  // The next message of `type` from `peer` (rank 0: any rank; the others: rank 0) on the data
  // connections, keeping messages of other types for their turn: a rank's stop votes travel
  // between its exchanges, and each kind stays in order.
  std::string receive_from(int peer, uint8_t type, const char* what) const;
  void watch_control();  // the watcher thread (Note [a rank that ends without finishing])
  [[noreturn]] void end_job(int exit_code, const std::string& line) const;

  LaunchEnvironment launch_;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::vector<std::string> hostnames_;
  std::unique_ptr<Connections> connections_;
  mutable std::mutex exchange_mutex_;  // one exchange at a time on the data connections
  mutable std::map<std::pair<int, uint8_t>, std::deque<std::string>> early_;  // by (peer, type), under it
  double stall_timeout_seconds_ = 0;
  std::function<void(const std::string&)> on_stall_;
  std::atomic<bool> stopping_{false};
  std::thread watcher_;
};

}  // namespace dpbench
