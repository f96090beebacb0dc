// --all_reduce_spec of --variable_update=replicated: which all-reduce exchanges the gradients, and
// into how many shards each exchange is split ("alg#k", as tf_cnn_benchmarks spelled it).
#pragma once

#include <string>
#include <vector>

namespace dpbench {

struct AllReduceSpec {
  std::string algorithm = "nccl";  // nccl | xring | pscpu | psgpu
  int shards = 1;                  // each exchange runs as this many independent all-reduces
  std::string text() const;        // "nccl", "xring#2"
};

// The algorithms, each with a one-line description, in the order --help lists them.
const std::vector<std::pair<std::string, std::string>>& all_reduce_algorithms();

// Throws ConfigError naming the flag, the value and what is accepted.
AllReduceSpec parse_all_reduce_spec(const std::string& text);

}  // namespace dpbench
