// The run's process group (see process_group.h): set once by the executable before flags are
// read; and the flag-agreement check every kind of group shares.
#include "engine/communication/process_group.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

#include "engine/errors.h"
#include "engine/machine/host_clock.h"

namespace dpbench {
namespace {

ProcessGroup* g_process_group = nullptr;

// FNV-1a: equal texts give equal digests; a rank compares digests before sending any text.
uint64_t digest(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

ProcessGroup* process_group() { return g_process_group; }
void set_process_group(ProcessGroup* group) { g_process_group = group; }

std::string ProcessGroup::describe_silent_ranks(const std::string& silent) {
  return silent.empty()
             ? "every rank still answers, so the wait is inside a rank (a hung GPU or driver call, or "
               "ranks in different collectives)"
             : silent + " stopped answering (frozen, stopped or cut off); look at " +
                   (silent.find(',') == std::string::npos ? "that process" : "those processes");
}

void ProcessGroup::require_same_on_every_rank(const std::string& what, const std::string& text) const {
  const int ranks = size();
  const uint64_t mine[2] = {digest(text), text.size()};
  std::vector<uint64_t> all(2 * static_cast<size_t>(ranks));
  all_gather_bytes(mine, sizeof mine, all.data());
  int differing = -1;
  for (int r = 1; r < ranks && differing < 0; ++r)
    if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) differing = r;
  if (differing < 0) return;

  // Every rank learns both texts, so every rank can say the same thing before it stops.
  auto text_of = [&](int root) {
    std::string copy = rank() == root ? text : std::string(all[2 * root + 1], '\0');
    if (!copy.empty()) broadcast(copy.data(), copy.size(), root);
    return copy;
  };
  const std::vector<std::string> first = lines_of(text_of(0)), other = lines_of(text_of(differing));
  size_t line = 0;
  while (line < first.size() && line < other.size() && first[line] == other[line]) ++line;
  auto quoted = [](const std::vector<std::string>& lines, size_t i) {
    return i < lines.size() ? "'" + lines[i] + "'" : std::string("nothing");
  };
  throw ConfigError("the ranks disagree on " + what + ": rank " + std::to_string(differing) + " has " +
                    quoted(other, line) + " where rank 0 has " + quoted(first, line) +
                    "; start every rank with the same flags (and the same dpbench)");
}


std::pair<int64_t, int64_t> clock_shift_to_rank0(const ProcessGroup& group) {
  constexpr int kRounds = 16;
  const int ranks = group.size();
  std::vector<int64_t> sent(kRounds), ended(kRounds), all(static_cast<size_t>(ranks));
  std::vector<std::vector<int64_t>> sent_by_rank(static_cast<size_t>(ranks), std::vector<int64_t>(kRounds));
  for (int round = 0; round < kRounds; ++round) {
    sent[round] = host_clock_ns();
    group.all_gather_bytes(&sent[round], sizeof(int64_t), all.data());
    ended[round] = host_clock_ns();
    for (int r = 0; r < ranks; ++r) sent_by_rank[static_cast<size_t>(r)][round] = all[static_cast<size_t>(r)];
  }
  std::vector<int64_t> ended_by_rank(static_cast<size_t>(ranks) * kRounds);
  group.all_gather_bytes(ended.data(), sizeof(int64_t) * kRounds, ended_by_rank.data());
  if (group.rank() == 0 || group.hostnames().at(static_cast<size_t>(group.rank())) == group.hostnames().at(0))
    return {0, 0};
  // theta = this clock - rank 0's: rank 0 sent before this rank's round ended, and this rank sent
  // before rank 0's round ended.
  int64_t upper = std::numeric_limits<int64_t>::max(), lower = std::numeric_limits<int64_t>::min();
  for (int round = 0; round < kRounds; ++round) {
    upper = std::min(upper, ended[round] - sent_by_rank[0][round]);
    lower = std::max(lower, sent[round] - ended_by_rank[static_cast<size_t>(round)]);
  }
  const int64_t theta = lower + (upper - lower) / 2;
  return {-theta, (upper - lower) / 2};
}

}  // namespace dpbench
