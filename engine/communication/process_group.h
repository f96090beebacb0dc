// ProcessGroup: the processes of a multi-process run (mpirun: one process per GPU, on any number
// of hosts) as the engine sees them: who this process is, and the few host-side exchanges a run
// needs besides its communicator (NCCL's unique id, per-rank measurements, the host
// communicator of the reference backend). Implemented over MPI in engine/communication/mpi/ (MpiContext), which
// the dpbench executable installs with set_process_group() when mpirun launched it; the core
// never links MPI. A single-process run has none (process_group() == nullptr).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dpbench {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the processes on this host: picks the GPU
  virtual const std::vector<std::string>& hostnames() const = 0;  // by rank

  // root's `bytes` bytes at `data` into every rank's `data`.
  virtual void broadcast(void* data, size_t bytes, int root) const = 0;
  // recv (size() * bytes) = every rank's `bytes` bytes at `send`, rank after rank.
  virtual void all_gather_bytes(const void* send, size_t bytes, void* recv) const = 0;
  // Every rank's text, by rank (texts of any length).
  virtual std::vector<std::string> all_gather_text(const std::string& text) const = 0;
  // Collective: throws ConfigError on every rank if `text` (e.g. the resolved flags) is not the
  // same on all ranks; the message names `what`, the first rank that differs from rank 0 and the
  // first line where the two differ. Built on the two exchanges above.
  void require_same_on_every_rank(const std::string& what, const std::string& text) const;
  // Which launcher started the job ("mpirun", "srun", "torchrun"), for the result's environment.
  virtual std::string launcher() const = 0;
  // Ends every process of the job: for a rank that failed while others may wait in a collective.
  [[noreturn]] virtual void abort(int exit_code) const = 0;

  // A yes/no vote of every rank, started without waiting: every rank starts the same votes in the
  // same order (from one thread per rank), and each vote's outcome is the same on every rank. The
  // runner takes one per step to agree on stopping early (Note [stopping early] in
  // engine/training/runner.cpp), reading each a few steps later, by when it has long completed.
  class Vote {
   public:
    virtual ~Vote() = default;  // waits for the vote to complete when its outcome was never read
    // Whether any rank voted yes; waits for the vote to complete (watched as collectives are).
    virtual bool any_yes() = 0;
  };
  virtual std::unique_ptr<Vote> start_vote(bool yes) const = 0;

  // A host collective of this group that makes no progress for `timeout_seconds` calls
  // `on_stall(what)` (which is expected to end the job; see StallDiagnosis). Until this is set,
  // collectives wait without limit.
  virtual void set_stall_handler(double timeout_seconds, std::function<void(const std::string& what)> on_stall) = 0;

  // Asks every other rank whether it still answers (Note [naming the rank that stopped
  // answering]), waiting at most a few seconds, and words what was found.
  struct StallDiagnosis {
    std::string message;   // "rank 2 (host-b) stopped answering", or that every rank answers
    bool speaker = false;  // this rank is the lowest one that answers: it says the line for the job
  };
  virtual StallDiagnosis diagnose_stall() const = 0;
  // The diagnosis' words for the ranks that did not answer ("rank 2 (host-b), rank 3 (host-b)";
  // empty: every rank answered).
  static std::string describe_silent_ranks(const std::string& silent);
};

// The run's process group, or nullptr for a single-process run.
ProcessGroup* process_group();
void set_process_group(ProcessGroup* group);

// Under mpirun: {shift, uncertainty} with rank 0's steady clock = this rank's + shift, so that
// every rank's timeline lands on one clock. Ranks on rank 0's host share its clock (shift 0);
// others bound it by rounds of all-gathered clock readings (a reading of rank 0 precedes every
// rank's end of the same round, and the other way round). Every rank calls it.
std::pair<int64_t, int64_t> clock_shift_to_rank0(const ProcessGroup& group);

}  // namespace dpbench
