// ProcessSubgroup: some of the ranks of a job as a ProcessGroup of their own (the ranks of one
// host, or the ranks of one host-local index across the hosts), for the communicators of a
// hierarchical all-reduce. Its exchanges are the whole job's, every rank taking its subgroup's
// part: so every rank of the job must make the same calls in the same order, which the
// hierarchical exchange does (each phase on every rank at once).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/communication/process_group.h"

namespace dpbench {

class ProcessSubgroup final : public ProcessGroup {
 public:
  // `members`: ranks of `parent`, ascending, this process's among them.
  ProcessSubgroup(const ProcessGroup& parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  int local_rank() const override { return parent_.local_rank(); }
  const std::vector<std::string>& hostnames() const override { return hostnames_; }
  std::string launcher() const override { return parent_.launcher(); }

  void broadcast(void* data, size_t bytes, int root) const override;
  void all_gather_bytes(const void* send, size_t bytes, void* recv) const override;
  std::vector<std::string> all_gather_text(const std::string& text) const override;
  [[noreturn]] void abort(int exit_code) const override {
    parent_.abort(exit_code);
    std::abort();  // never reached: the parent's abort does not return, but a virtual call says nothing
  }
  std::unique_ptr<Vote> start_vote(bool yes) const override { return parent_.start_vote(yes); }
  void set_stall_handler(double, std::function<void(const std::string&)>) override {}  // the parent's holds
  StallDiagnosis diagnose_stall() const override { return parent_.diagnose_stall(); }

 private:
  const ProcessGroup& parent_;
  std::vector<int> members_;
  int rank_ = 0;
  std::vector<std::string> hostnames_;
};

// The ranks of `group` on the same host as this process, and those with the same host-local index
// on every host (both ascending): the two subgroups of a hierarchical all-reduce. Hosts must run
// equal numbers of ranks; ConfigError otherwise, naming them.
struct HostLayout {
  std::vector<int> same_host, same_local_index;
  int hosts = 0, ranks_per_host = 0;
};
HostLayout host_layout(const ProcessGroup& group);

}  // namespace dpbench
