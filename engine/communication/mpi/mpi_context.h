// MpiContext: this process's place in an `mpirun` job (rank, size, rank and rank count on its own
// host, every rank's host name) and the few exchanges dpbench needs besides NCCL: a broadcast of
// bytes (NCCL's unique id), an all-gather of numbers (per-rank step times), and a start-up check
// that every rank resolved the same flags. Built only where MPI is found (DPBENCH_HAVE_MPI); MPI
// errors come back as codes (MPI_ERRORS_RETURN) and become RuntimeError lines naming the call,
// file:line and rank, so one failing rank can say why before the job is aborted.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "engine/communication/process_group.h"

namespace dpbench {

class MpiContext final : public ProcessGroup {
 public:
  // True when this process was started by an MPI launcher (mpirun / mpiexec of Open MPI or MPICH,
  // or srun with PMI), judged from the environment it sets; MPI is not initialised for this.
  static bool launched_by_mpi();

  // MPI_Init_thread asking for MPI_THREAD_MULTIPLE (the runner drives devices from threads);
  // throws RuntimeError if the library cannot give it, or if MPI is already initialised.
  MpiContext();
  ~MpiContext();  // MPI_Finalize
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }  // among the ranks on this host: picks the GPU
  int local_size() const { return local_size_; }
  std::string launcher() const override;  // srun (with PMI/PMIx) or mpirun
  const std::vector<std::string>& hostnames() const override { return hostnames_; }  // by rank

  // root's `bytes` bytes at `data` into every rank's `data`.
  void broadcast(void* data, size_t bytes, int root) const override;
  void all_gather_bytes(const void* send, size_t bytes, void* recv) const override;
  std::vector<std::string> all_gather_text(const std::string& text) const override;
  // Every rank's `value`, by rank.
  std::vector<double> all_gather(double value) const;
  // Ends the whole job (MPI_Abort): for a rank that failed while others may wait in a collective.
  [[noreturn]] void abort(int exit_code) const override;

  void set_stall_handler(double timeout_seconds, std::function<void(const std::string& what)> on_stall) override;
  StallDiagnosis diagnose_stall() const override;
  // A logical OR of every rank's vote (MPI_Iallreduce on a communicator of its own, so votes never
  // match the collectives of the main thread).
  std::unique_ptr<Vote> start_vote(bool yes) const override;

 private:
  // Waits for a non-blocking collective, calling the stall handler when it makes no progress.
  void wait(MPI_Request* request, const char* what) const;
  void answer_liveness_probes();

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::vector<std::string> hostnames_;
  double stall_timeout_seconds_ = 0;
  std::function<void(const std::string&)> on_stall_;
  // Its own communicator, so probes and replies never match a collective's messages.
  MPI_Comm liveness_comm_ = MPI_COMM_NULL;
  MPI_Comm vote_comm_ = MPI_COMM_NULL;
  std::atomic<bool> stop_responder_{false};
  std::thread responder_;
};

}  // namespace dpbench
