// Launcher detection (see the header).
#include "engine/communication/launch_environment.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "engine/communication/keyed_hash.h"
#include "engine/errors.h"
#include "engine/machine/text_content.h"

namespace dpbench {
namespace {

constexpr const char* kTokenVariable = "DPBENCH_RENDEZVOUS_TOKEN";
constexpr size_t kMinTokenBytes = 16;

// Note [ports derived from the Slurm ids]: without MASTER_PORT the tasks of a step must agree on
// a port without talking. No formula maps every job/step pair to a port of its own, so each pair
// gets a short run of candidates from a hash of its ids: rank 0 listens on the first it can take,
// and a rank tries each in turn, learning from the hello's proof (engine/communication/tcp_rendezvous.h) whether
// the rank 0 answering is its own job's. Two steps whose runs overlap both still meet.
constexpr int kDerivedPortFirst = 20000, kDerivedPortLast = 59999, kDerivedPortCandidates = 8;

// A launcher's variables as one job's description: which are given, their values checked.
class Variables {
 public:
  Variables(const EnvironmentLookup& lookup, std::string launcher) : lookup_(lookup), launcher_(std::move(launcher)) {}

  const char* raw(const char* name) const { return lookup_(name); }
  bool given(const char* name) const { return raw(name) != nullptr && *raw(name) != '\0'; }
  // Text that is set and not empty (else one line naming it).
  std::string text(const char* name) const {
    const char* value = raw(name);
    if (value == nullptr || *value == '\0') refuse_missing(name);
    return value;
  }
  // A process count or index from `low` up (-1 when unset and `required` is false).
  int count(const char* name, int low, bool required = true) const {
    if (raw(name) == nullptr && !required) return -1;
    return number(name, low, kMaxLaunchProcesses, "a process count or index");
  }
  // A whole number in [low, high], else one line naming the variable, its value and `what` it is.
  int number(const char* name, int low, int high, const std::string& what) const {
    const std::string text = this->text(name);
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || !std::isdigit(static_cast<unsigned char>(text[0])) || value < low || value > high)
      throw ConfigError(std::string(name) + "=" + escaped_excerpt(text) + ": not " + what + " (" + std::to_string(low) +
                        " to " + std::to_string(high) + "); " + start_hint());
    return static_cast<int>(value);
  }
  [[noreturn]] void refuse_missing(const char* name) const {
    throw ConfigError(std::string(name) + (raw(name) == nullptr ? " is unset" : " is empty") + ", and " + launcher_ +
                      " sets it for every process of a job; " + start_hint());
  }
  [[noreturn]] void refuse(const std::string& what) const { throw ConfigError(what + "; " + start_hint()); }
  std::string start_hint() const {
    return "start dpbench through " + launcher_ + " unchanged (or unset the variables to run one process)";
  }

 private:
  const EnvironmentLookup& lookup_;
  std::string launcher_;
};

// A non-negative integer variable of an MPI launcher; -1 when unset.
int mpi_variable(const EnvironmentLookup& lookup, const char* name) {
  return Variables(lookup, "mpirun").count(name, 0, false);
}

// MASTER_ADDR: a host name or an address, nothing a message would have to escape.
std::string rendezvous_host_from(const Variables& variables, const char* name) {
  const std::string host = variables.text(name);
  const bool plain = host.size() <= 253 && host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                                    "0123456789.-_:%") == std::string::npos;
  if (!plain) variables.refuse(std::string(name) + "=\"" + escaped_excerpt(host) + "\": not a host name or address");
  return host;
}

int port_from(const Variables& variables, const char* name) { return variables.number(name, 1, 65535, "a port"); }

void check_places(const Variables& variables, const LaunchEnvironment& launch) {
  if (launch.rank >= launch.world_size)
    variables.refuse(launch.rank_variable + "=" + std::to_string(launch.rank) + " is not below " +
                     launch.world_size_variable + "=" + std::to_string(launch.world_size));
  const int locals = launch.local_size > 0 ? launch.local_size : launch.world_size;
  if (launch.local_rank >= locals)
    variables.refuse(launch.local_rank_variable + "=" + std::to_string(launch.local_rank) + " is not below " +
                     (launch.local_size > 0 ? "LOCAL_WORLD_SIZE=" : launch.world_size_variable + "=") +
                     std::to_string(locals));
  if (launch.local_size > launch.world_size)
    variables.refuse("LOCAL_WORLD_SIZE=" + std::to_string(launch.local_size) + " is above " +
                     launch.world_size_variable + "=" + std::to_string(launch.world_size));
}

// DPBENCH_RENDEZVOUS_TOKEN, where a job meets over TCP: set means a secret worth the name.
std::string rendezvous_token(const EnvironmentLookup& lookup) {
  const char* token = lookup(kTokenVariable);
  if (token == nullptr) return "";
  if (std::strlen(token) < kMinTokenBytes)
    throw ConfigError(std::string(kTokenVariable) + " holds " + std::to_string(std::strlen(token)) +
                      " bytes; give every rank the same secret of at least " + std::to_string(kMinTokenBytes) +
                      " (e.g. openssl rand -hex 16), or unset it");
  return token;
}

// torchrun (or anything giving its variables): WORLD_SIZE, or a RANK past 0, claims a job.
bool detect_torchrun(const EnvironmentLookup& lookup, LaunchEnvironment* launch) {
  const Variables variables(lookup, "torchrun");
  const char* rank = lookup("RANK");
  if (!variables.given("WORLD_SIZE") && (rank == nullptr || *rank == '\0' || std::string(rank) == "0")) return false;
  launch->rank_variable = "RANK";
  launch->world_size_variable = "WORLD_SIZE";
  launch->local_rank_variable = "LOCAL_RANK";
  launch->world_size = variables.count("WORLD_SIZE", 1);
  launch->rank = variables.count("RANK", 0);
  // A job of one process needs no rendezvous: without MASTER_ADDR it runs as if alone.
  if (launch->world_size == 1 && launch->rank == 0 && !variables.given("MASTER_ADDR")) return false;
  launch->launcher = Launcher::torchrun;
  launch->source = "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun)";
  launch->local_rank = std::max(0, variables.count("LOCAL_RANK", 0, launch->world_size > 1));
  launch->local_size = std::max(0, variables.count("LOCAL_WORLD_SIZE", 1, false));
  check_places(variables, *launch);
  launch->rendezvous_host = rendezvous_host_from(variables, "MASTER_ADDR");
  int port = port_from(variables, "MASTER_PORT");
  // torchrun's agent may serve its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE), so
  // dpbench's rendezvous takes the next port.
  const char* agent_store = lookup("TORCHELASTIC_USE_AGENT_STORE");
  if (agent_store != nullptr && std::string(agent_store) == "True") {
    if (port == 65535)
      variables.refuse("MASTER_PORT=65535 leaves no port after torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True), "
                       "where dpbench's rendezvous listens; give a lower MASTER_PORT, or --rendezvous_port");
    port += 1;
  }
  launch->rendezvous_ports = {port};
  const char* run_id = lookup("TORCHELASTIC_RUN_ID");
  launch->job_identity = std::string("torchrun run ") + (run_id != nullptr ? run_id : "");
  launch->identity_variables = "TORCHELASTIC_RUN_ID";
  if (launch->world_size > 1) launch->rendezvous_token = rendezvous_token(lookup);
  return true;
}

// srun without an MPI plugin: a task of a step, or a process given part of one.
bool detect_srun(const EnvironmentLookup& lookup, LaunchEnvironment* launch) {
  const Variables variables(lookup, "srun");
  const char* procid = lookup("SLURM_PROCID");
  const bool claimed = (variables.given("SLURM_STEP_ID") && variables.given("SLURM_PROCID")) ||
                       variables.raw("SLURM_STEP_NUM_TASKS") != nullptr ||
                       (procid != nullptr && *procid != '\0' && std::string(procid) != "0");
  if (!claimed) return false;
  launch->launcher = Launcher::srun;
  launch->source = "SLURM_PROCID, SLURM_STEP_NUM_TASKS (or SLURM_NTASKS), SLURM_LOCALID (srun)";
  launch->rank_variable = "SLURM_PROCID";
  launch->local_rank_variable = "SLURM_LOCALID";
  launch->rank = variables.count("SLURM_PROCID", 0);
  const std::string step = variables.text("SLURM_STEP_ID");
  const bool step_count = variables.raw("SLURM_STEP_NUM_TASKS") != nullptr;
  launch->world_size_variable = step_count || !variables.given("SLURM_NTASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  if (step_count || variables.given("SLURM_NTASKS") || launch->rank > 0)
    launch->world_size = variables.count(launch->world_size_variable.c_str(), 1);
  const bool several = launch->world_size > 1;
  launch->local_rank = std::max(0, variables.count("SLURM_LOCALID", 0, several));
  check_places(variables, *launch);
  if (!several) return true;
  const std::string job = variables.text("SLURM_JOB_ID");
  if (variables.given("MASTER_ADDR")) {
    launch->rendezvous_host = rendezvous_host_from(variables, "MASTER_ADDR");
  } else {
    const char* list_variable = variables.raw("SLURM_STEP_NODELIST") == nullptr && variables.raw("SLURM_NODELIST") != nullptr
                                    ? "SLURM_NODELIST"
                                    : "SLURM_STEP_NODELIST";
    launch->rendezvous_host = first_slurm_host(variables.text(list_variable), list_variable);
  }
  launch->rendezvous_ports = variables.raw("MASTER_PORT") != nullptr ? std::vector<int>{port_from(variables, "MASTER_PORT")}
                                                                      : ports_from_slurm_ids(job, step);
  launch->job_identity = "srun job " + job + " step " + step;
  launch->identity_variables = "SLURM_JOB_ID, SLURM_STEP_ID";
  launch->rendezvous_token = rendezvous_token(lookup);
  return true;
}

// One entry of a Slurm host list from `at` (up to a comma outside brackets): its first host
// appended to `first`, or the problem.
std::string parse_host_entry(const std::string& list, size_t* at, std::string* first) {
  const size_t start = *at;
  while (*at < list.size() && list[*at] != ',') {
    const char c = list[*at];
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') {
      *first += c;
      ++*at;
      continue;
    }
    if (c != '[') return std::string("'") + escaped_excerpt(std::string(1, c)) + "' is no part of a host name";
    const size_t close = list.find(']', *at);
    if (close == std::string::npos) return "a '[' without its ']'";
    const std::string ranges = list.substr(*at + 1, close - *at - 1);
    if (ranges.empty()) return "an empty '[]'";
    bool first_range = true;
    for (size_t from = 0; from <= ranges.size();) {
      size_t end = ranges.find(',', from);
      if (end == std::string::npos) end = ranges.size();
      const std::string range = ranges.substr(from, end - from);
      const size_t dash = range.find('-');
      const std::string low = range.substr(0, dash), high = dash == std::string::npos ? low : range.substr(dash + 1);
      auto digits = [](const std::string& s) {
        return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
      };
      if (!digits(low) || !digits(high)) return "\"[" + escaped_excerpt(ranges) + "]\" is not a list of numbers and ranges";
      if (std::stol(high) < std::stol(low)) return "the range " + range + " runs backwards";
      if (first_range) *first += low;
      first_range = false;
      from = end + 1;
    }
    *at = close + 1;
  }
  if (*at == start) return "an empty host";
  return "";
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

std::string first_slurm_host(const std::string& host_list, const std::string& variable) {
  std::string first, problem;
  if (host_list.empty()) problem = "an empty list";
  for (size_t at = 0; problem.empty() && at <= host_list.size(); ++at) {
    std::string host;
    problem = parse_host_entry(host_list, &at, &host);
    if (first.empty()) first = host;
    if (problem.empty() && at == host_list.size()) break;
  }
  if (!problem.empty())
    throw ConfigError(variable + "=\"" + escaped_excerpt(host_list) + "\": not a Slurm host list (" + problem +
                      "); srun sets it, so start dpbench through srun unchanged, or name rank 0's host in MASTER_ADDR");
  return first;
}

std::vector<int> ports_from_slurm_ids(const std::string& job_id, const std::string& step_id) {
  const Digest digest = sha256("slurm job " + job_id + " step " + step_id);
  uint64_t hash = 0;
  for (int i = 0; i < 8; ++i) hash = hash << 8 | digest[static_cast<size_t>(i)];
  const int span = kDerivedPortLast - kDerivedPortFirst + 1 - (kDerivedPortCandidates - 1);
  const int base = kDerivedPortFirst + static_cast<int>(hash % static_cast<uint64_t>(span));
  std::vector<int> ports;
  for (int i = 0; i < kDerivedPortCandidates; ++i) ports.push_back(base + i);
  return ports;
}

std::string describe_ports(const std::vector<int>& ports) {
  if (ports.empty()) return "";
  std::string text = std::to_string(ports.front());
  return ports.size() == 1 ? text : text + "-" + std::to_string(ports.back());
}

LaunchEnvironment detect_launch_environment(const EnvironmentLookup& given) {
  const EnvironmentLookup lookup = given ? given : [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
  auto is_set = [&](const char* name) { return lookup(name) != nullptr && *lookup(name) != '\0'; };
  LaunchEnvironment launch;
  const bool in_srun_step = is_set("SLURM_STEP_ID") && is_set("SLURM_PROCID");
  if (is_set("OMPI_COMM_WORLD_SIZE") || is_set("PMIX_RANK") || is_set("PMI_RANK") || is_set("PMI_SIZE")) {
    // MPI's own start-up (MpiContext) finds the rank and the hosts; here only who launched.
    launch.launcher = in_srun_step && !is_set("OMPI_COMM_WORLD_SIZE") ? Launcher::srun : Launcher::mpirun;
    launch.through_mpi = true;
    launch.source = launch.launcher == Launcher::srun ? "srun with PMI/PMIx" : "mpirun (OMPI_COMM_WORLD_*, PMI_*, PMIX_RANK)";
    const int rank = mpi_variable(lookup, is_set("OMPI_COMM_WORLD_RANK") ? "OMPI_COMM_WORLD_RANK" : "PMIX_RANK");
    const int size = mpi_variable(lookup, "OMPI_COMM_WORLD_SIZE");
    launch.rank = std::max(0, rank);
    launch.world_size = size > 0 ? size : 1;
    launch.local_rank = std::max(0, mpi_variable(lookup, "OMPI_COMM_WORLD_LOCAL_RANK"));
    return launch;
  }
  if (detect_torchrun(lookup, &launch)) return launch;
  launch = LaunchEnvironment{};
  if (detect_srun(lookup, &launch)) return launch;
  return LaunchEnvironment{};
}

}  // namespace dpbench
