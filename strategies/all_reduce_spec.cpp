// Parsing --all_reduce_spec ("alg" or "alg#k").
#include "strategies/all_reduce_spec.h"

#include <cctype>

#include "engine/errors.h"

namespace dpbench {

// 64 shards of even a small model are already tiny messages; more is a typo.
constexpr int kMaxShards = 64;

const std::vector<std::pair<std::string, std::string>>& all_reduce_algorithms() {
  static const std::vector<std::pair<std::string, std::string>> algorithms = {
      {"nccl", "NCCL's all-reduce"},
      {"xring", "a ring of our own: peer copies and reduce kernels"},
      {"pscpu", "gradients summed on the host, then copied back to every device"},
      {"psgpu", "each device sums one shard of every replica's gradients, then all gather it"},
  };
  return algorithms;
}

std::string AllReduceSpec::text() const {
  return shards == 1 ? algorithm : algorithm + "#" + std::to_string(shards);
}

AllReduceSpec parse_all_reduce_spec(const std::string& text) {
  std::string accepted;
  for (const auto& [name, description] : all_reduce_algorithms())
    accepted += (accepted.empty() ? "" : ", ") + name;
  auto fail = [&](const std::string& why) -> AllReduceSpec {
    throw ConfigError("--all_reduce_spec=" + text + ": " + why + "; accepted: " + accepted +
                      ", each optionally followed by #k for k shards (e.g. nccl#2)");
  };
  AllReduceSpec spec;
  const size_t hash = text.find('#');
  spec.algorithm = text.substr(0, hash);
  bool known = false;
  for (const auto& entry : all_reduce_algorithms()) known = known || entry.first == spec.algorithm;
  if (!known) return fail("unknown all-reduce algorithm '" + spec.algorithm + "'");
  if (hash != std::string::npos) {
    const std::string count = text.substr(hash + 1);
    if (count.empty() || count.size() > 3) return fail("the shard count after # must be 1 to " + std::to_string(kMaxShards));
    for (char c : count)
      if (!std::isdigit(static_cast<unsigned char>(c))) return fail("the shard count after # must be a number");
    spec.shards = std::stoi(count);
    if (spec.shards < 1 || spec.shards > kMaxShards)
      return fail("the shard count after # must be 1 to " + std::to_string(kMaxShards));
  }
  return spec;
}

}  // namespace dpbench
