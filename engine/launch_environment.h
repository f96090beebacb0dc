// Which launcher started this process, and its place in the job, read from the variables each
// launcher sets (never from MPI or a network): Open MPI / MPICH / PMIx (mpirun, mpiexec, srun
// with an MPI plugin), Slurm's srun without one, and torchrun. The multi-process run is then
// joined through MPI where the launcher provides it, else through a rendezvous at rank 0
// (engine/tcp_process_group.h).
#pragma once

#include <functional>
#include <string>

namespace dpbench {

enum class Launcher { none, mpirun, srun, torchrun };
std::string launcher_name(Launcher launcher);  // "none", "mpirun", "srun", "torchrun"

struct LaunchEnvironment {
  Launcher launcher = Launcher::none;
  bool through_mpi = false;  // MPI can be initialised (the launcher set up PMI / PMIx / ORTE)
  int rank = 0, world_size = 1;
  int local_rank = 0;        // among the processes on this host: picks the GPU
  int local_size = 0;        // 0: not given by the launcher (counted from the ranks' hosts)
  // Where rank 0 listens for the others (without MPI): torchrun's MASTER_ADDR:MASTER_PORT, or
  // under srun MASTER_ADDR (else the step's first host) and MASTER_PORT (else one derived from
  // the job and step ids, the same on every task).
  std::string rendezvous_host;
  int rendezvous_port = 0;
  // The variables that said so, for messages: "RANK, WORLD_SIZE, LOCAL_RANK (torchrun)".
  std::string source;
  bool multi_process() const { return world_size > 1 || launcher != Launcher::none; }
};

using EnvironmentLookup = std::function<const char*(const char* name)>;

// From the process environment by default; tests pass made-up ones. Throws ConfigError naming
// the variable when a launcher's variable is malformed (not a number, rank outside the world).
LaunchEnvironment detect_launch_environment(const EnvironmentLookup& lookup = nullptr);

// The first host of a Slurm host list ("gpu[03-05,9],login1" -> "gpu03"); empty for an empty list.
std::string first_slurm_host(const std::string& host_list);

}  // namespace dpbench
