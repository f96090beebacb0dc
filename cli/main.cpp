// The thin dpbench executable: everything lives in dpbench_core (cli/app.cpp). Started by a
// launcher (engine/communication/launch_environment.h), it first joins the job: through MPI where mpirun (or
// srun with PMI) started it and dpbench was built with MPI, else through a rendezvous at rank 0
// (torchrun, srun --mpi=none: engine/communication/tcp_process_group.h). The process group is installed for the
// run to find, and a rank that fails ends the whole job rather than leaving the others waiting in
// a collective. A closed standard output never ends it (SIGPIPE is ignored): the result file is
// the product, and a reader like `head` that leaves early must not take it away.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/interrupt_signals.h"
#include "cli/launch_flags.h"
#include "cli/log.h"
#include "engine/communication/launch_environment.h"
#include "engine/communication/process_group.h"
#include "engine/communication/tcp_process_group.h"
#include "engine/errors.h"

#ifdef DPBENCH_HAVE_MPI
#include "engine/communication/mpi/mpi_context.h"
#endif

namespace {

// Joins the job this process belongs to; nullptr when no launcher started it (or it only reads
// files). Throws with the line to print when it cannot.
std::unique_ptr<dpbench::ProcessGroup> join_job(const std::vector<std::string>& args) {
  const bool offline = !args.empty() && (args.front() == "report" || args.front() == "compare" ||
                                          args.front() == "predict" || args.front() == "strategies" ||
                                          args.front() == "completion");
  if (offline) return nullptr;
  dpbench::LaunchEnvironment launch = dpbench::detect_launch_environment();
  if (launch.launcher == dpbench::Launcher::none) return nullptr;
  if (launch.through_mpi) {
#ifdef DPBENCH_HAVE_MPI
    return std::make_unique<dpbench::MpiContext>();
#else
    throw dpbench::ConfigError("started by " + launch.source +
                               ", and this dpbench was built without MPI; rebuild it where an MPI library is "
                               "installed (libopenmpi-dev), or start it with torchrun or srun --mpi=none");
#endif
  }
  const dpbench::LaunchSettings settings = dpbench::launch_settings_from(args);
  if (settings.rendezvous_port > 0) launch.rendezvous_ports = {settings.rendezvous_port};
  return std::make_unique<dpbench::TcpProcessGroup>(launch, settings.timeout_seconds);
}

// A standard stream the process was started without (`>&-`) is held by /dev/null opened
// read-only: no file dpbench opens takes its number (an output meant for stdout would land in it),
// and a write to it fails as a write to a closed stream does.
void hold_closed_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int held = ::open("/dev/null", O_RDONLY | O_NOCTTY);
    if (held >= 0 && held != fd) {
      ::dup2(held, fd);
      ::close(held);
    }
  }
}

// The output log's last lines (waiting a little for a slow reader), and a word on stderr where
// some were not printed and the command has not said so itself.
int finish(int code) {
  if (const std::string lost = dpbench::finish_output_log(); !lost.empty()) dpbench::error_log().warn(lost);
  return code;
}

}  // namespace

int main(int argc, char* argv[]) {
  hold_closed_standard_streams();
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::unique_ptr<dpbench::ProcessGroup> group;
  try {
    group = join_job(args);
  } catch (const dpbench::ConfigError& error) {  // launcher variables that cannot describe a job
    std::fprintf(stderr, "dpbench: error: %s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dpbench: error: %s\n", error.what());
    return 1;
  }
  if (!group) return finish(dpbench::dpbench_main(args));
  dpbench::set_process_group(group.get());
  const int code = dpbench::dpbench_main(args);
  // An interrupted run stopped on every rank after the same step (the ranks agreed on it), so
  // none waits for another: the job ends normally.
  const bool interrupted = dpbench::interrupt_signal() != 0 &&
                           code == dpbench::interrupted_exit_code(dpbench::interrupt_signal());
  if (code != 0 && !interrupted && group->size() > 1) group->abort(code);
  dpbench::set_process_group(nullptr);
  return finish(code);
}
