// --all_reduce_spec of --variable_update=replicated: which all-reduce exchanges the gradients, and
// into how many shards each exchange is split ("alg#k", as tf_cnn_benchmarks spelled it).
#pragma once

#include <string>
#include <vector>

namespace dpbench {

enum class AllReduceAlgorithm { nccl, xring, pscpu, psgpu };

struct AllReduceAlgorithmName {
  AllReduceAlgorithm algorithm;
  const char* name;         // as --all_reduce_spec spells it
  const char* description;  // one line, for --help
};
// The algorithms, in the order --help lists them: the one table of their names.
const std::vector<AllReduceAlgorithmName>& all_reduce_algorithms();
const char* all_reduce_algorithm_name(AllReduceAlgorithm algorithm);  // "xring"

struct AllReduceSpec {
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::nccl;
  int shards = 1;            // each exchange runs as this many independent all-reduces
  std::string text() const;  // "nccl", "xring#2"
};

// "" (the flag not given) is the default, nccl. Throws ConfigError naming the flag, the value and
// what is accepted.
AllReduceSpec parse_all_reduce_spec(const std::string& text);

}  // namespace dpbench
