// MpiContext under `mpirun -np N` on one host: ranks and host-local ranks, host names, broadcast
// from any root, all-gather by rank, and the flag check that names the rank and line that differ.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "tests/mpi/mpi_test_support.h"

namespace dpbench {
namespace {

using testing::g_mpi;

TEST_CASE("the job's ranks: one host, local ranks equal ranks, every host name the same", "[mpi]") {
  REQUIRE(MpiContext::launched_by_mpi());
  const char* expected = std::getenv("DPBENCH_TEST_RANKS");  // set by the ctest entry
  REQUIRE(expected != nullptr);
  CHECK(g_mpi->size() == std::atoi(expected));
  CHECK(g_mpi->rank() >= 0);
  CHECK(g_mpi->rank() < g_mpi->size());
  CHECK(g_mpi->local_size() == g_mpi->size());
  CHECK(g_mpi->local_rank() == g_mpi->rank());
  REQUIRE(g_mpi->hostnames().size() == static_cast<size_t>(g_mpi->size()));
  for (const std::string& name : g_mpi->hostnames()) {
    CHECK_FALSE(name.empty());
    CHECK(name == g_mpi->hostnames()[g_mpi->rank()]);
  }
}

TEST_CASE("broadcast delivers the root's bytes to every rank, from any root", "[mpi]") {
  for (int root = 0; root < g_mpi->size(); ++root) {
    std::vector<unsigned char> bytes(128);  // the size of an ncclUniqueId
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<unsigned char>(g_mpi->rank() == root ? (i * 7 + root) & 0xff : 0);
    g_mpi->broadcast(bytes.data(), bytes.size(), root);
    for (size_t i = 0; i < bytes.size(); ++i) CHECK(bytes[i] == static_cast<unsigned char>((i * 7 + root) & 0xff));
  }
}

TEST_CASE("all_gather returns every rank's value by rank", "[mpi]") {
  const std::vector<double> values = g_mpi->all_gather(1.5 * g_mpi->rank() + 0.25);
  REQUIRE(values.size() == static_cast<size_t>(g_mpi->size()));
  for (int r = 0; r < g_mpi->size(); ++r) CHECK(values[r] == 1.5 * r + 0.25);
}

TEST_CASE("votes started without waiting agree on every rank: yes when any rank said yes", "[mpi]") {
  // Several in flight at once, read later, as the runner reads its stop votes.
  std::vector<std::unique_ptr<ProcessGroup::Vote>> votes;
  for (int v = 0; v < 6; ++v) votes.push_back(g_mpi->start_vote(v == 2 ? g_mpi->rank() == g_mpi->size() - 1 : v == 4));
  std::vector<bool> outcomes;
  for (auto& vote : votes) outcomes.push_back(vote->any_yes());
  CHECK(outcomes == std::vector<bool>{false, false, true, false, true, false});
  CHECK(votes[2]->any_yes());  // read again: the same outcome
  g_mpi->start_vote(false);    // dropped unread: it completes before it goes
}

TEST_CASE("the flag check passes equal texts and names the rank and line that differ", "[mpi]") {
  const std::string flags = "--model=resnet50\n--batch_size=64\n--variable_update=distributed_all_reduce\n";
  CHECK_NOTHROW(g_mpi->require_same_on_every_rank("the resolved flags", flags));
  if (g_mpi->size() < 2) return;
  const int last = g_mpi->size() - 1;
  const std::string mine = g_mpi->rank() == last
                               ? "--model=resnet50\n--batch_size=32\n--variable_update=distributed_all_reduce\n"
                               : flags;
  CHECK_THROWS_WITH(g_mpi->require_same_on_every_rank("the resolved flags", mine),
                    "the ranks disagree on the resolved flags: rank " + std::to_string(last) +
                        " has '--batch_size=32' where rank 0 has '--batch_size=64'; start every rank "
                        "with the same flags (and the same dpbench)");
  CHECK_THROWS_AS(g_mpi->require_same_on_every_rank("x", g_mpi->rank() == last ? flags + "--seed=2\n" : flags),
                  ConfigError);
}

TEST_CASE("a collective that waits past the stall timeout calls the handler, and every rank still answers", "[mpi]") {
  if (g_mpi->size() < 2) return;
  // Rank 0 enters the all-gather at once, the others 1.5 s later: rank 0's wait passes the 0.3 s
  // timeout, and its probe finds every rank answering (their responder threads run while their
  // main threads sleep).
  std::vector<std::string> stalled_in;
  ProcessGroup::StallDiagnosis diagnosis;
  g_mpi->set_stall_handler(0.3, [&](const std::string& what) {
    if (stalled_in.empty()) diagnosis = g_mpi->diagnose_stall();
    stalled_in.push_back(what);
  });
  if (g_mpi->rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::vector<double> values = g_mpi->all_gather(g_mpi->rank());
  g_mpi->set_stall_handler(0, nullptr);
  for (int r = 0; r < g_mpi->size(); ++r) CHECK(values[r] == r);
  if (g_mpi->rank() != 0) return;
  REQUIRE_FALSE(stalled_in.empty());
  CHECK(stalled_in.front() == "an all-gather between ranks");
  CHECK(diagnosis.speaker);
  CHECK_THAT(diagnosis.message, Catch::Contains("every rank still answers"));
}

}  // namespace
}  // namespace dpbench
