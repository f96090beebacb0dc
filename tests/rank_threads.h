// One thread per rank, as the runner drives a communicator's ranks, for the communicator tests of
// both test binaries (host: InProcessCommunicator; gpu: NcclCommunicator).
#pragma once

#include <functional>
#include <future>
#include <vector>

namespace dpbench::testing {

// Runs body(rank) for rank 0..ranks-1, each on a thread of its own, waits for all of them, then
// rethrows the failure of the lowest rank that failed on the calling thread. Catch2's assertions
// are not thread-safe: the threads only compute and the test checks afterwards.
inline void on_rank_threads(int ranks, const std::function<void(int)>& body) {
  std::vector<std::future<void>> done;
  for (int rank = 0; rank < ranks; ++rank) done.push_back(std::async(std::launch::async, body, rank));
  for (std::future<void>& rank_done : done) rank_done.wait();
  for (std::future<void>& rank_done : done) rank_done.get();
}

}  // namespace dpbench::testing
