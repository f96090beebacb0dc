// Entry point of the MPI tests: every rank of an `mpirun` job runs the same Catch2 test cases in
// the same order (their collectives must match), inside one MpiContext for the whole run.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "engine/communication/mpi/mpi_context.h"
#include "tests/mpi/mpi_test_support.h"

namespace dpbench::testing {
MpiContext* g_mpi = nullptr;
}  // namespace dpbench::testing

int main(int argc, char** argv) {
  dpbench::MpiContext mpi;
  dpbench::testing::g_mpi = &mpi;
  Catch::Session session;
  const int status = session.run(argc, argv);
  // A rank whose tests failed must fail the job even if the others passed.
  const std::vector<double> statuses = mpi.all_gather(static_cast<double>(status));
  for (double s : statuses)
    if (s != 0) return status != 0 ? status : 1;
  return 0;
}
