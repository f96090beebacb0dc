// ProcessSubgroup (see the header).
#include "engine/communication/process_subgroup.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "engine/errors.h"

namespace dpbench {

ProcessSubgroup::ProcessSubgroup(const ProcessGroup& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)) {
  const auto mine = std::find(members_.begin(), members_.end(), parent.rank());
  if (mine == members_.end()) throw RuntimeError("ProcessSubgroup: this rank is not among the members");
  rank_ = static_cast<int>(mine - members_.begin());
  for (int member : members_) hostnames_.push_back(parent.hostnames().at(static_cast<size_t>(member)));
}

std::vector<std::string> ProcessSubgroup::all_gather_text(const std::string& text) const {
  const std::vector<std::string> everyone = parent_.all_gather_text(text);
  std::vector<std::string> mine;
  for (int member : members_) mine.push_back(everyone.at(static_cast<size_t>(member)));
  return mine;
}

void ProcessSubgroup::all_gather_bytes(const void* send, size_t bytes, void* recv) const {
  std::vector<char> everyone(static_cast<size_t>(parent_.size()) * bytes);
  parent_.all_gather_bytes(send, bytes, everyone.data());
  for (size_t i = 0; i < members_.size(); ++i)
    std::memcpy(static_cast<char*>(recv) + i * bytes, everyone.data() + static_cast<size_t>(members_[i]) * bytes, bytes);
}

void ProcessSubgroup::broadcast(void* data, size_t bytes, int root) const {
  // Every subgroup's root speaks in the same job-wide exchange; each rank keeps its own root's.
  const std::vector<std::string> parts =
      all_gather_text(rank_ == root ? std::string(static_cast<const char*>(data), bytes) : std::string());
  const std::string& from_root = parts.at(static_cast<size_t>(root));
  if (from_root.size() != bytes) throw RuntimeError("ProcessSubgroup::broadcast: the root sent another size");
  std::memcpy(data, from_root.data(), bytes);
}

HostLayout host_layout(const ProcessGroup& group) {
  const std::vector<std::string>& hosts = group.hostnames();
  std::vector<std::string> order;  // hosts in order of their first rank
  std::map<std::string, std::vector<int>> ranks_of;
  for (int r = 0; r < group.size(); ++r) {
    const std::string& host = hosts.at(static_cast<size_t>(r));
    if (ranks_of.find(host) == ranks_of.end()) order.push_back(host);
    ranks_of[host].push_back(r);
  }
  HostLayout layout;
  layout.hosts = static_cast<int>(order.size());
  layout.ranks_per_host = static_cast<int>(ranks_of[order.front()].size());
  for (const std::string& host : order)
    if (static_cast<int>(ranks_of[host].size()) != layout.ranks_per_host)
      throw ConfigError("--hierarchical_all_reduce needs as many ranks on every host, and " + order.front() + " runs " +
                        std::to_string(layout.ranks_per_host) + " while " + host + " runs " +
                        std::to_string(ranks_of[host].size()) + "; start as many on each, or drop the flag");
  const std::string& mine = hosts.at(static_cast<size_t>(group.rank()));
  layout.same_host = ranks_of[mine];
  const int index = static_cast<int>(std::find(layout.same_host.begin(), layout.same_host.end(), group.rank()) -
                                     layout.same_host.begin());
  for (const std::string& host : order) layout.same_local_index.push_back(ranks_of[host][static_cast<size_t>(index)]);
  std::sort(layout.same_local_index.begin(), layout.same_local_index.end());
  return layout;
}

}  // namespace dpbench
