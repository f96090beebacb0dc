// The thin dpbench executable: everything lives in dpbench_core (cli/app.cpp). Started by mpirun
// (and built with MPI), it first joins the job: MPI is initialised, the process group installed
// for the run to find, and a rank that fails ends the whole job (MPI_Abort) rather than leaving
// the others waiting in a collective.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/interrupt_signals.h"

#ifdef DPBENCH_HAVE_MPI
#include "engine/mpi/mpi_context.h"
#include "engine/process_group.h"
#endif

int main(int argc, char* argv[]) {
  const std::vector<std::string> args(argv + 1, argv + argc);
#ifdef DPBENCH_HAVE_MPI
  const bool offline = !args.empty() && args.front() == "report";  // reads files only
  if (dpbench::MpiContext::launched_by_mpi() && !offline) {
    std::unique_ptr<dpbench::MpiContext> mpi;
    try {
      mpi = std::make_unique<dpbench::MpiContext>();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "dpbench: error: %s\n", error.what());
      return 1;
    }
    dpbench::set_process_group(mpi.get());
    const int code = dpbench::dpbench_main(args);
    // An interrupted run stopped on every rank after the same step (the ranks agreed on it), so
    // none waits for another: the job ends normally.
    const bool interrupted = dpbench::interrupt_signal() != 0 &&
                             code == dpbench::interrupted_exit_code(dpbench::interrupt_signal());
    if (code != 0 && !interrupted && mpi->size() > 1) mpi->abort(code);
    dpbench::set_process_group(nullptr);
    return code;
  }
#endif
  return dpbench::dpbench_main(args);
}
