// Which launcher started this process, and its place in the job, read from the variables each
// launcher sets (never from MPI or a network): Open MPI / MPICH / PMIx (mpirun, mpiexec, srun
// with an MPI plugin), Slurm's srun without one, and torchrun. The multi-process run is then
// joined through MPI where the launcher provides it, else through a rendezvous at rank 0
// (engine/communication/tcp_process_group.h).
//
// Note [variables that cannot describe a job]: a launcher's variables either describe a job
// whole, or the process refuses to start (ConfigError naming the variable). A process given part
// of a job (RANK=1 WORLD_SIZE=2 without MASTER_ADDR, SLURM_PROCID=1 without SLURM_STEP_ID) never
// runs alone as if no launcher had started it: its result would be one device's, recorded as
// launcher "none", while the job it belongs to waits for it. Variables that describe one process
// (RANK=0 WORLD_SIZE=1, a Slurm batch script's SLURM_PROCID=0) run it alone.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dpbench {

enum class Launcher { none, mpirun, srun, torchrun };
std::string launcher_name(Launcher launcher);  // "none", "mpirun", "srun", "torchrun"

// The most processes (and the largest index) a launcher's variable may name.
constexpr int kMaxLaunchProcesses = 1 << 24;

struct LaunchEnvironment {
  Launcher launcher = Launcher::none;
  bool through_mpi = false;  // MPI can be initialised (the launcher set up PMI / PMIx / ORTE)
  int rank = 0, world_size = 1;
  int local_rank = 0;        // among the processes on this host: picks the GPU
  int local_size = 0;        // 0: not given by the launcher (counted from the ranks' hosts)
  // Where rank 0 listens for the others (without MPI): torchrun's MASTER_ADDR:MASTER_PORT, or
  // under srun MASTER_ADDR (else the step's first host) and MASTER_PORT (else a few ports derived
  // from the job and step ids: Note [ports derived from the Slurm ids]). Rank 0 listens on the
  // first of `rendezvous_ports` it can take; the others try each in turn until rank 0 of their
  // own job answers.
  std::string rendezvous_host;
  std::vector<int> rendezvous_ports;
  // What the processes of one job share and a stranger should not know: the launcher's ids of the
  // job (torchrun's TORCHELASTIC_RUN_ID, Slurm's job and step ids), and the optional secret
  // DPBENCH_RENDEZVOUS_TOKEN. Every rank proves both to rank 0 (engine/communication/tcp_rendezvous.h).
  std::string job_identity;
  std::string rendezvous_token;
  // For messages: the variables that said so ("RANK, WORLD_SIZE, LOCAL_RANK ... (torchrun)"), the
  // ones naming the job, and the ones giving the rank, the world size and the local rank.
  std::string source;
  std::string identity_variables;
  std::string rank_variable, world_size_variable, local_rank_variable;
  bool multi_process() const { return world_size > 1 || launcher != Launcher::none; }
};

using EnvironmentLookup = std::function<const char*(const char* name)>;

// From the process environment by default; tests pass made-up ones. Throws ConfigError naming
// the variable when a launcher's variables are malformed (not a number, rank outside the world)
// or incomplete (Note [variables that cannot describe a job]).
LaunchEnvironment detect_launch_environment(const EnvironmentLookup& lookup = nullptr);

// The first host of a Slurm host list ("gpu[03-05,9],login1" -> "gpu03"). The whole list must
// parse (hosts of letters, digits, '.', '-' and '_', with bracketed ranges of numbers); else
// ConfigError naming `variable` and the list, escaped.
std::string first_slurm_host(const std::string& host_list, const std::string& variable = "SLURM_STEP_NODELIST");

// The ports tried under srun without MASTER_PORT (Note [ports derived from the Slurm ids]).
std::vector<int> ports_from_slurm_ids(const std::string& job_id, const std::string& step_id);

// `ports` for messages: "29500", or "21000-21007" for a run of them.
std::string describe_ports(const std::vector<int>& ports);

}  // namespace dpbench
