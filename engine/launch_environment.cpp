// Launcher detection (see the header).
#include "engine/launch_environment.h"

#include <cstdlib>

#include "engine/errors.h"

namespace dpbench {
namespace {

// A non-negative integer variable; -1 when unset; ConfigError when set to something else.
int integer_variable(const EnvironmentLookup& lookup, const char* name) {
  const char* text = lookup(name);
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1 << 24)
    throw ConfigError(std::string(name) + "=" + text + ": not a process count or index; the launcher sets it, " +
                      "so start dpbench through the launcher unchanged (or unset it)");
  return static_cast<int>(value);
}

bool is_set(const EnvironmentLookup& lookup, const char* name) {
  const char* text = lookup(name);
  return text != nullptr && *text != '\0';
}

// Under srun without MASTER_PORT: a port the job's tasks agree on without talking, in
// 20000-59999 from the job and step ids.
int port_from_slurm_ids(const EnvironmentLookup& lookup) {
  const int job = std::max(0, integer_variable(lookup, "SLURM_JOB_ID"));
  const int step = std::max(0, integer_variable(lookup, "SLURM_STEP_ID"));
  return 20000 + static_cast<int>((static_cast<long long>(job) * 7 + step) % 40000);
}

void check_rank(const LaunchEnvironment& launch) {
  if (launch.world_size < 1 || launch.rank >= launch.world_size || launch.local_rank < 0)
    throw ConfigError("the launcher's variables disagree (" + launch.source + "): rank " + std::to_string(launch.rank) +
                      " of " + std::to_string(launch.world_size) + ", local rank " + std::to_string(launch.local_rank) +
                      "; start dpbench through the launcher unchanged");
}

}  // namespace

std::string launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::mpirun: return "mpirun";
    case Launcher::srun: return "srun";
    case Launcher::torchrun: return "torchrun";
    case Launcher::none: break;
  }
  return "none";
}

std::string first_slurm_host(const std::string& host_list) {
  // The first entry ends at a comma outside brackets; a bracket holds ranges, of which the first
  // number is the first host's (with its zero padding).
  std::string first;
  int depth = 0;
  for (char c : host_list) {
    if (c == ',' && depth == 0) break;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    first += c;
  }
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  const size_t stop = first.find_first_of(",-]", open + 1);
  return first.substr(0, open) + first.substr(open + 1, stop - open - 1) +
         (first.find(']') + 1 < first.size() ? first.substr(first.find(']') + 1) : "");
}

LaunchEnvironment detect_launch_environment(const EnvironmentLookup& given) {
  const EnvironmentLookup lookup = given ? given : [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
  LaunchEnvironment launch;
  const bool in_srun_step = is_set(lookup, "SLURM_STEP_ID") && is_set(lookup, "SLURM_PROCID");
  if (is_set(lookup, "OMPI_COMM_WORLD_SIZE") || is_set(lookup, "PMIX_RANK") || is_set(lookup, "PMI_RANK") ||
      is_set(lookup, "PMI_SIZE")) {
    // MPI's own start-up (MpiContext) finds the rank and the hosts; here only who launched.
    launch.launcher = in_srun_step && !is_set(lookup, "OMPI_COMM_WORLD_SIZE") ? Launcher::srun : Launcher::mpirun;
    launch.through_mpi = true;
    launch.source = launch.launcher == Launcher::srun ? "srun with PMI/PMIx" : "mpirun (OMPI_COMM_WORLD_*, PMI_*, PMIX_RANK)";
    const int rank = integer_variable(lookup, is_set(lookup, "OMPI_COMM_WORLD_RANK") ? "OMPI_COMM_WORLD_RANK" : "PMIX_RANK");
    const int size = integer_variable(lookup, "OMPI_COMM_WORLD_SIZE");
    launch.rank = std::max(0, rank);
    launch.world_size = size > 0 ? size : 1;
    launch.local_rank = std::max(0, integer_variable(lookup, "OMPI_COMM_WORLD_LOCAL_RANK"));
    return launch;
  }
  if (is_set(lookup, "RANK") && is_set(lookup, "WORLD_SIZE") && is_set(lookup, "MASTER_ADDR")) {
    launch.launcher = Launcher::torchrun;
    launch.source = "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun)";
    launch.rank = integer_variable(lookup, "RANK");
    launch.world_size = integer_variable(lookup, "WORLD_SIZE");
    launch.local_rank = std::max(0, integer_variable(lookup, "LOCAL_RANK"));
    launch.local_size = std::max(0, integer_variable(lookup, "LOCAL_WORLD_SIZE"));
    launch.rendezvous_host = lookup("MASTER_ADDR");
    launch.rendezvous_port = integer_variable(lookup, "MASTER_PORT");
    if (launch.rendezvous_port <= 0 || launch.rendezvous_port > 65535)
      throw ConfigError("MASTER_PORT is unset or not a port (1-65535), and torchrun sets it; start dpbench through torchrun");
    // torchrun's agent may serve its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE), so
    // dpbench's rendezvous takes the next port.
    const char* agent_store = lookup("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store != nullptr && std::string(agent_store) == "True") launch.rendezvous_port += 1;
    check_rank(launch);
    return launch;
  }
  if (in_srun_step) {
    launch.launcher = Launcher::srun;
    launch.source = "SLURM_PROCID, SLURM_STEP_NUM_TASKS (or SLURM_NTASKS), SLURM_LOCALID (srun)";
    launch.rank = integer_variable(lookup, "SLURM_PROCID");
    const int step_tasks = integer_variable(lookup, "SLURM_STEP_NUM_TASKS");
    launch.world_size = step_tasks > 0 ? step_tasks : std::max(1, integer_variable(lookup, "SLURM_NTASKS"));
    launch.local_rank = std::max(0, integer_variable(lookup, "SLURM_LOCALID"));
    const char* master = lookup("MASTER_ADDR");
    const char* nodes = lookup("SLURM_STEP_NODELIST") ? lookup("SLURM_STEP_NODELIST") : lookup("SLURM_NODELIST");
    launch.rendezvous_host = master && *master ? std::string(master) : first_slurm_host(nodes ? nodes : "");
    const int port = integer_variable(lookup, "MASTER_PORT");
    launch.rendezvous_port = port > 0 ? port : port_from_slurm_ids(lookup);
    check_rank(launch);
    return launch;
  }
  return launch;
}

}  // namespace dpbench
