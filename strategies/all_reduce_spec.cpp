// Parsing --all_reduce_spec ("alg" or "alg#k").
#include "strategies/all_reduce_spec.h"

#include <cctype>

#include "engine/errors.h"

namespace dpbench {

// 64 shards of even a small model are already tiny messages; more is a typo.
constexpr int kMaxShards = 64;

const std::vector<AllReduceAlgorithmName>& all_reduce_algorithms() {
  static const std::vector<AllReduceAlgorithmName> algorithms = {
      {AllReduceAlgorithm::nccl, "nccl", "NCCL's all-reduce"},
      {AllReduceAlgorithm::xring, "xring", "a ring of our own: peer copies and reduce kernels"},
      {AllReduceAlgorithm::pscpu, "pscpu", "gradients summed on the host, then copied back to every device"},
      {AllReduceAlgorithm::psgpu, "psgpu", "each device sums one shard of every replica's gradients, then all gather it"},
  };
  return algorithms;
}

const char* all_reduce_algorithm_name(AllReduceAlgorithm algorithm) {
  for (const AllReduceAlgorithmName& entry : all_reduce_algorithms())
    if (entry.algorithm == algorithm) return entry.name;
  return "?";
}

std::string AllReduceSpec::text() const {
  const std::string name = all_reduce_algorithm_name(algorithm);
  return shards == 1 ? name : name + "#" + std::to_string(shards);
}

AllReduceSpec parse_all_reduce_spec(const std::string& text) {
  std::string accepted;
  for (const AllReduceAlgorithmName& entry : all_reduce_algorithms())
    accepted += (accepted.empty() ? "" : ", ") + std::string(entry.name);
  auto fail = [&](const std::string& why) -> AllReduceSpec {
    throw ConfigError("--all_reduce_spec=" + text + ": " + why + "; accepted: " + accepted +
                      ", each optionally followed by #k for k shards (e.g. nccl#2)");
  };
  AllReduceSpec spec;
  if (text.empty()) return spec;
  const size_t hash = text.find('#');
  const std::string name = text.substr(0, hash);
  bool known = false;
  for (const AllReduceAlgorithmName& entry : all_reduce_algorithms()) {
    if (entry.name != name) continue;
    spec.algorithm = entry.algorithm;
    known = true;
  }
  if (!known) return fail("unknown all-reduce algorithm '" + name + "'");
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
