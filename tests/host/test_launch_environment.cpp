// Which launcher started a process and where it stands in the job, from made-up environments:
// mpirun (Open MPI, MPICH/PMI, PMIx), srun with and without an MPI plugin, torchrun (with its
// agent's store on MASTER_PORT), none; Slurm host lists and the ports derived from Slurm's ids;
// malformed and incomplete variables (Note [variables that cannot describe a job]), the job's
// identity and token; and the GPU a launched process takes.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/launch_flags.h"
#include "engine/communication/launch_environment.h"
#include "engine/communication/process_group.h"
#include "engine/errors.h"

using namespace dpbench;

namespace {

LaunchEnvironment detect(const std::map<std::string, std::string>& variables) {
  return detect_launch_environment([&](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

}  // namespace

TEST_CASE("no launcher: one process", "[launchers]") {
  const LaunchEnvironment launch = detect({{"HOME", "/root"}, {"SLURM_JOB_ID", "7"}});  // inside an allocation, not a step
  CHECK(launch.launcher == Launcher::none);
  CHECK(!launch.multi_process());
  CHECK(launch.world_size == 1);
  CHECK(launcher_name(launch.launcher) == "none");
}

TEST_CASE("mpirun and srun with an MPI plugin go through MPI", "[launchers]") {
  const LaunchEnvironment open_mpi = detect({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  CHECK(open_mpi.launcher == Launcher::mpirun);
  CHECK(open_mpi.through_mpi);
  CHECK(open_mpi.rank == 2);
  CHECK(open_mpi.world_size == 4);
  CHECK(open_mpi.local_rank == 1);
  CHECK(detect({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}).launcher == Launcher::mpirun);  // MPICH's hydra
  const LaunchEnvironment srun_pmix = detect({{"PMIX_RANK", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}});
  CHECK(srun_pmix.launcher == Launcher::srun);
  CHECK(srun_pmix.through_mpi);
  CHECK(launcher_name(srun_pmix.launcher) == "srun");
}

TEST_CASE("torchrun: its variables, and the port after its agent's store", "[launchers]") {
  std::map<std::string, std::string> variables = {{"RANK", "3"},        {"WORLD_SIZE", "4"},
                                                  {"LOCAL_RANK", "1"},  {"LOCAL_WORLD_SIZE", "2"},
                                                  {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "29500"}};
  LaunchEnvironment launch = detect(variables);
  CHECK(launch.launcher == Launcher::torchrun);
  CHECK(!launch.through_mpi);
  CHECK(launch.rank == 3);
  CHECK(launch.world_size == 4);
  CHECK(launch.local_rank == 1);
  CHECK(launch.local_size == 2);
  CHECK(launch.rendezvous_host == "n1");
  CHECK(launch.rendezvous_ports == std::vector<int>{29500});
  variables["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  CHECK(detect(variables).rendezvous_ports == std::vector<int>{29501});
  variables.erase("MASTER_PORT");
  CHECK_THROWS_WITH(detect(variables), Catch::Matchers::StartsWith("MASTER_PORT is unset, and torchrun sets it"));
  variables["MASTER_PORT"] = "29500";
  variables["RANK"] = "4";
  CHECK_THROWS_WITH(detect(variables), Catch::Matchers::StartsWith("RANK=4 is not below WORLD_SIZE=4"));
  variables["RANK"] = "one";
  CHECK_THROWS_WITH(detect(variables), Catch::Matchers::Contains("RANK=one: not a process count or index"));
}

TEST_CASE("srun without MPI: Slurm's variables, rank 0's host from the step's list, a port both sides derive",
          "[launchers]") {
  std::map<std::string, std::string> variables = {{"SLURM_STEP_ID", "3"},        {"SLURM_PROCID", "5"},
                                                  {"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_NTASKS", "16"},
                                                  {"SLURM_LOCALID", "1"},        {"SLURM_JOB_ID", "4242"},
                                                  {"SLURM_STEP_NODELIST", "gpu[07-10],login2"}};
  const LaunchEnvironment launch = detect(variables);
  CHECK(launch.launcher == Launcher::srun);
  CHECK(!launch.through_mpi);
  CHECK(launch.rank == 5);
  CHECK(launch.world_size == 8);  // the step's tasks, not the allocation's
  CHECK(launch.local_rank == 1);
  CHECK(launch.rendezvous_host == "gpu07");
  CHECK(launch.rendezvous_ports == ports_from_slurm_ids("4242", "3"));
  CHECK(launch.job_identity == "srun job 4242 step 3");
  variables["MASTER_ADDR"] = "head";
  variables["MASTER_PORT"] = "12345";
  CHECK(detect(variables).rendezvous_host == "head");
  CHECK(detect(variables).rendezvous_ports == std::vector<int>{12345});
}

TEST_CASE("the first host of a Slurm host list", "[launchers]") {
  CHECK(first_slurm_host("node1") == "node1");
  CHECK(first_slurm_host("node1,node2") == "node1");
  CHECK(first_slurm_host("gpu[03-05,9],login1") == "gpu03");
  CHECK(first_slurm_host("rack[2,4]-gpu") == "rack2-gpu");
  CHECK(first_slurm_host("rack[7-8]-node[001-004]") == "rack7-node001");
  CHECK(first_slurm_host("n.example_1,gpu[1-2]") == "n.example_1");
}

TEST_CASE("a Slurm host list that does not parse is refused whole, quoted escaped", "[launchers]") {
  const std::vector<std::pair<std::string, std::string>> malformed = {
      {"", "an empty list"},
      {"node[", "a '[' without its ']'"},
      {"node[]", "an empty '[]'"},
      {"node[a-b]", "is not a list of numbers and ranges"},
      {"node[1-]", "is not a list of numbers and ranges"},
      {"node[5-3]", "the range 5-3 runs backwards"},
      {"a,,b", "an empty host"},
      {"a,", "an empty host"},
      {",a", "an empty host"},
      {"node1,bad]", "']' is no part of a host name"},
      {"node 1", "' ' is no part of a host name"},
  };
  for (const auto& [list, problem] : malformed) {
    INFO(list);
    CHECK_THROWS_AS(first_slurm_host(list), ConfigError);
    CHECK_THROWS_WITH(first_slurm_host(list), Catch::Matchers::StartsWith("SLURM_STEP_NODELIST=\"") &&
                                                  Catch::Matchers::Contains(problem) &&
                                                  Catch::Matchers::Contains("or name rank 0's host in MASTER_ADDR"));
  }
  // Not garbled into "nodenode[", and a terminal's escape bytes shown, not sent.
  CHECK_THROWS_WITH(first_slurm_host("node["), Catch::Matchers::Contains("\"node[\"") &&
                                                   !Catch::Matchers::Contains("nodenode"));
  CHECK_THROWS_WITH(first_slurm_host("gpu\x1b[2J", "SLURM_NODELIST"),
                    Catch::Matchers::StartsWith("SLURM_NODELIST=\"gpu\\x1B[2J\"") &&
                        !Catch::Matchers::Contains("\x1b"));
}

TEST_CASE("the ports derived from Slurm's ids: a run of candidates, apart for the pairs the old sum mixed up",
          "[launchers]") {
  const std::vector<int> ports = ports_from_slurm_ids("4242", "3");
  REQUIRE(ports.size() == 8);
  for (size_t i = 0; i < ports.size(); ++i) {
    CHECK(ports[i] == ports[0] + static_cast<int>(i));
    CHECK(ports[i] >= 20000);
    CHECK(ports[i] <= 59999);
  }
  CHECK(ports_from_slurm_ids("4242", "3") == ports);  // every task derives the same
  // 7 * job + step put (1, 7) and (2, 0) on one port.
  CHECK(ports_from_slurm_ids("1", "7").front() != ports_from_slurm_ids("2", "0").front());
  CHECK(ports_from_slurm_ids("4242", "4").front() != ports.front());
  CHECK(describe_ports(ports) == std::to_string(ports.front()) + "-" + std::to_string(ports.back()));
  CHECK(describe_ports({29500}) == "29500");
}

namespace {

const std::map<std::string, std::string> kTorchrunJob = {{"RANK", "1"},        {"WORLD_SIZE", "2"},
                                                         {"LOCAL_RANK", "1"},  {"LOCAL_WORLD_SIZE", "2"},
                                                         {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "29500"}};
const std::map<std::string, std::string> kSrunJob = {{"SLURM_JOB_ID", "77"},       {"SLURM_STEP_ID", "0"},
                                                     {"SLURM_PROCID", "1"},        {"SLURM_STEP_NUM_TASKS", "2"},
                                                     {"SLURM_LOCALID", "1"},       {"SLURM_STEP_NODELIST", "n[1-2]"}};

// `base` with `changes` applied; a value of "<unset>" removes the variable.
std::map<std::string, std::string> with(std::map<std::string, std::string> base,
                                        const std::map<std::string, std::string>& changes) {
  for (const auto& [name, value] : changes) {
    if (value == "<unset>") base.erase(name);
    else base[name] = value;
  }
  return base;
}

}  // namespace

TEST_CASE("torchrun's variables that cannot describe a job are refused, naming the variable",
          "[launchers]") {
  REQUIRE(detect(kTorchrunJob).launcher == Launcher::torchrun);
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> refused = {
      {{{"MASTER_ADDR", "<unset>"}}, "MASTER_ADDR is unset, and torchrun sets it for every process of a job"},
      {{{"MASTER_ADDR", ""}}, "MASTER_ADDR is empty"},
      {{{"RANK", ""}}, "RANK is empty"},
      {{{"RANK", "<unset>"}}, "RANK is unset"},
      {{{"WORLD_SIZE", "<unset>"}}, "WORLD_SIZE is unset"},
      {{{"WORLD_SIZE", "0"}, {"RANK", "0"}}, "WORLD_SIZE=0: not a process count or index (1 to"},
      {{{"WORLD_SIZE", "-2"}}, "WORLD_SIZE=-2: not a process count or index"},
      {{{"WORLD_SIZE", "2x"}}, "WORLD_SIZE=2x: not a process count or index"},
      {{{"WORLD_SIZE", "99999999999999999999"}}, "WORLD_SIZE=99999999999999999999: not a process count"},
      {{{"LOCAL_RANK", "<unset>"}}, "LOCAL_RANK is unset"},
      {{{"LOCAL_RANK", "2"}}, "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"},
      {{{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "<unset>"}}, "LOCAL_RANK=2 is not below WORLD_SIZE=2"},
      {{{"LOCAL_WORLD_SIZE", "4"}}, "LOCAL_WORLD_SIZE=4 is above WORLD_SIZE=2"},
      {{{"LOCAL_WORLD_SIZE", ""}}, "LOCAL_WORLD_SIZE is empty"},
      {{{"MASTER_PORT", "0"}}, "MASTER_PORT=0: not a port (1 to 65535)"},
      {{{"MASTER_PORT", "http"}}, "MASTER_PORT=http: not a port (1 to 65535)"},
      {{{"MASTER_PORT", "65536"}}, "MASTER_PORT=65536: not a port (1 to 65535)"},
      {{{"MASTER_PORT", "65535"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}},
       "MASTER_PORT=65535 leaves no port after torchrun's agent store"},
      {{{"MASTER_ADDR", "n1 n2"}}, "MASTER_ADDR=\"n1 n2\": not a host name or address"},
      {{{"DPBENCH_RENDEZVOUS_TOKEN", ""}}, "DPBENCH_RENDEZVOUS_TOKEN holds 0 bytes"},
      {{{"DPBENCH_RENDEZVOUS_TOKEN", "short"}}, "DPBENCH_RENDEZVOUS_TOKEN holds 5 bytes; give every rank the same secret"},
  };
  for (const auto& [changes, line] : refused) {
    const auto variables = with(kTorchrunJob, changes);
    INFO(line);
    CHECK_THROWS_AS(detect(variables), ConfigError);
    CHECK_THROWS_WITH(detect(variables), Catch::Matchers::Contains(line));
  }
  // A terminal's escape bytes in a value are quoted escaped, never echoed raw.
  CHECK_THROWS_WITH(detect(with(kTorchrunJob, {{"RANK", "\x1b]0;owned\x07"}})),
                    Catch::Matchers::StartsWith("RANK=\\x1B]0;owned\\x07: not a process count") &&
                        !Catch::Matchers::Contains("\x1b"));
  CHECK_THROWS_WITH(detect(with(kTorchrunJob, {{"MASTER_ADDR", "n1\x1b[2J"}})),
                    Catch::Matchers::Contains("MASTER_ADDR=\"n1\\x1B[2J\"") && !Catch::Matchers::Contains("\x1b"));
  // One process is no job to refuse: it runs alone.
  CHECK(detect({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).launcher == Launcher::none);
  CHECK(detect({{"RANK", "0"}}).launcher == Launcher::none);
  CHECK(detect({{"MASTER_ADDR", "n1"}, {"MASTER_PORT", "29500"}}).launcher == Launcher::none);
  CHECK(detect(with(kTorchrunJob, {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}}))
            .launcher == Launcher::torchrun);
}

TEST_CASE("srun's variables that cannot describe a job are refused, naming the variable", "[launchers]") {
  REQUIRE(detect(kSrunJob).launcher == Launcher::srun);
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> refused = {
      {{{"SLURM_STEP_ID", "<unset>"}}, "SLURM_STEP_ID is unset, and srun sets it for every process of a job"},
      {{{"SLURM_STEP_NUM_TASKS", "0"}}, "SLURM_STEP_NUM_TASKS=0: not a process count or index (1 to"},
      {{{"SLURM_STEP_NUM_TASKS", ""}}, "SLURM_STEP_NUM_TASKS is empty"},
      {{{"SLURM_STEP_NUM_TASKS", "<unset>"}}, "SLURM_STEP_NUM_TASKS is unset"},
      {{{"SLURM_PROCID", "2"}}, "SLURM_PROCID=2 is not below SLURM_STEP_NUM_TASKS=2"},
      {{{"SLURM_PROCID", "x"}}, "SLURM_PROCID=x: not a process count or index"},
      {{{"SLURM_JOB_ID", "<unset>"}}, "SLURM_JOB_ID is unset"},
      {{{"SLURM_LOCALID", "<unset>"}}, "SLURM_LOCALID is unset"},
      {{{"SLURM_LOCALID", "2"}}, "SLURM_LOCALID=2 is not below SLURM_STEP_NUM_TASKS=2"},
      {{{"SLURM_STEP_NODELIST", "<unset>"}}, "SLURM_STEP_NODELIST is unset"},
      {{{"SLURM_STEP_NODELIST", "n["}}, "SLURM_STEP_NODELIST=\"n[\": not a Slurm host list"},
      {{{"SLURM_STEP_NODELIST", "<unset>"}, {"SLURM_NODELIST", "n,,m"}}, "SLURM_NODELIST=\"n,,m\": not a Slurm host list"},
      {{{"MASTER_PORT", "70000"}}, "MASTER_PORT=70000: not a port"},
      {{{"MASTER_PORT", ""}}, "MASTER_PORT is empty"},
      {{{"DPBENCH_RENDEZVOUS_TOKEN", "0123456789"}}, "DPBENCH_RENDEZVOUS_TOKEN holds 10 bytes"},
  };
  for (const auto& [changes, line] : refused) {
    const auto variables = with(kSrunJob, changes);
    INFO(line);
    CHECK_THROWS_AS(detect(variables), ConfigError);
    CHECK_THROWS_WITH(detect(variables), Catch::Matchers::Contains(line));
  }
  // A step's task count wins over the allocation's; without either a task past 0 is refused.
  CHECK(detect(with(kSrunJob, {{"SLURM_STEP_NUM_TASKS", "<unset>"}, {"SLURM_NTASKS", "2"}})).world_size == 2);
  // Inside an allocation or a batch script (no step), and a step of one task: one process.
  CHECK(detect({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).launcher == Launcher::none);
  const LaunchEnvironment one = detect({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}});
  CHECK(one.launcher == Launcher::srun);
  CHECK(one.world_size == 1);
  // Large job ids (past 2^24, as Slurm's go) name the job; they are no counts.
  CHECK(detect(with(kSrunJob, {{"SLURM_JOB_ID", "4294967290"}})).job_identity == "srun job 4294967290 step 0");
}

TEST_CASE("the job's identity and token: what a rank proves to rank 0", "[launchers]") {
  const LaunchEnvironment plain = detect(kTorchrunJob);
  CHECK(plain.job_identity == "torchrun run ");
  CHECK(plain.rendezvous_token.empty());
  CHECK(plain.identity_variables == "TORCHELASTIC_RUN_ID");
  const LaunchEnvironment named =
      detect(with(kTorchrunJob, {{"TORCHELASTIC_RUN_ID", "job-a"}, {"DPBENCH_RENDEZVOUS_TOKEN", "0123456789abcdef"}}));
  CHECK(named.job_identity == "torchrun run job-a");
  CHECK(named.rendezvous_token == "0123456789abcdef");
  CHECK(detect(with(kTorchrunJob, {{"TORCHELASTIC_RUN_ID", "job-b"}})).job_identity != named.job_identity);
  // A job of one process meets nobody: its token is not asked for.
  CHECK_NOTHROW(detect(with(kTorchrunJob, {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"},
                                           {"LOCAL_WORLD_SIZE", "1"}, {"DPBENCH_RENDEZVOUS_TOKEN", "x"}})));
}

namespace {

// A process group of a launcher's job, as far as flag parsing asks: rank, local rank, launcher.
class LaunchedGroup final : public ProcessGroup {
 public:
  LaunchedGroup(int rank, int size, int local_rank) : rank_(rank), size_(size), local_rank_(local_rank), hosts_(size, "h") {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  const std::vector<std::string>& hostnames() const override { return hosts_; }
  std::string launcher() const override { return "torchrun"; }
  void broadcast(void*, size_t, int) const override {}
  void all_gather_bytes(const void*, size_t, void*) const override {}
  std::vector<std::string> all_gather_text(const std::string& text) const override { return {text}; }
  [[noreturn]] void abort(int code) const override { throw RuntimeError("abort " + std::to_string(code)); }
  std::unique_ptr<Vote> start_vote(bool) const override { return nullptr; }
  void set_stall_handler(double, std::function<void(const std::string&)>) override {}
  StallDiagnosis diagnose_stall() const override { return {}; }

 private:
  int rank_, size_, local_rank_;
  std::vector<std::string> hosts_;
};

std::vector<int> gpus_chosen(int visible_gpus, int local_rank, std::vector<std::string> extra = {}) {
  LaunchedGroup group(local_rank, 8, local_rank);
  set_process_group(&group);
  DeviceInventory inventory;
  inventory.cuda_gpus = visible_gpus;
  std::vector<std::string> args = {"--device=gpu", "--variable_update=distributed_all_reduce", "--result_file="};
  args.insert(args.end(), extra.begin(), extra.end());
  try {
    const ParsedRunFlags parsed = parse_run_flags(args, inventory);
    set_process_group(nullptr);
    return parsed.config.gpu_indices;
  } catch (...) {
    set_process_group(nullptr);
    throw;
  }
}

}  // namespace

TEST_CASE("a launched process takes the one GPU it sees, else its host-local rank's, else the one named",
          "[launchers]") {
  CHECK(gpus_chosen(1, 3) == std::vector<int>{0});  // srun --gpus-per-task=1: every task sees its GPU as 0
  CHECK(gpus_chosen(4, 3) == std::vector<int>{3});
  CHECK(gpus_chosen(4, 3, {"--gpu_indices=1"}) == std::vector<int>{1});
  CHECK_THROWS_WITH(gpus_chosen(2, 3), Catch::Matchers::Contains("local rank 3 (from torchrun's variables), 2 GPUs visible") &&
                                           Catch::Matchers::Contains("CUDA_VISIBLE_DEVICES"));
}

TEST_CASE("the hierarchical all-reduce refuses the other ways a range can travel", "[launchers]") {
  for (const std::string other : {"--compact_gradient_transfer=bf16", "--sharded_update"}) {
    INFO(other);
    CHECK_THROWS_WITH(gpus_chosen(4, 1, {"--hierarchical_all_reduce", other}),
                      Catch::Matchers::StartsWith("--hierarchical_all_reduce with " + other.substr(0, other.find('=')) ) &&
                          Catch::Matchers::Contains("drop one of the two flags"));
  }
  CHECK(gpus_chosen(4, 1, {"--hierarchical_all_reduce"}) == std::vector<int>{1});
}

TEST_CASE("fully_sharded runs under a launcher, one device per process, as the other strategies of that layout",
          "[launchers][fully_sharded]") {
  // The flags of rank 1 of a job of 4 on the reference backend: the config, or the line refusing it.
  auto launched = [](std::vector<std::string> args) {
    LaunchedGroup group(1, 4, 1);
    set_process_group(&group);
    args.insert(args.end(), {"--device=cpu", "--model=gpt", "--result_file="});
    try {
      const RunConfig config = parse_run_flags(args, DeviceInventory{}).config;
      set_process_group(nullptr);
      return config;
    } catch (...) {
      set_process_group(nullptr);
      throw;
    }
  };
  const RunConfig config = launched({"--variable_update=fully_sharded", "--shard_group_size=2"});
  CHECK(config.num_processes == 4);
  CHECK(config.shard_group_size == 2);  // groups of the job's 4 devices
  CHECK_THROWS_WITH(launched({"--variable_update=fully_sharded", "--shard_group_size=3"}),
                    Catch::Matchers::Contains("divisor of 4"));
  CHECK_THROWS_WITH(launched({"--variable_update=fully_sharded", "--num_gpus=2"}),
                    Catch::Matchers::StartsWith("--num_gpus=2: --variable_update=fully_sharded drives one GPU per "
                                                "process when a launcher starts it; start one process per GPU"));
  CHECK_THROWS_WITH(launched({"--variable_update=replicated"}),
                    Catch::Matchers::Contains("processes started by mpirun, which only distributed_all_reduce, "
                                              "distributed_replicated or fully_sharded use"));
  // An option no strategy of this layout takes names the one-process strategies that do.
  CHECK_THROWS_WITH(launched({"--variable_update=fully_sharded", "--all_reduce_spec=xring"}),
                    Catch::Matchers::Contains("use --variable_update=distributed_all_reduce"));
}

TEST_CASE("the launch flags are read before the job meets, by run's reader", "[launchers][flags]") {
  CHECK(launch_settings_from({"--rendezvous_port=29600"}).rendezvous_port == 29600);
  const LaunchSettings spelled = launch_settings_from({"run", "-rendezvous_port", "29601", "--collective_timeout", "7"});
  CHECK(spelled.rendezvous_port == 29601);
  CHECK(spelled.timeout_seconds == 7);
  CHECK(launch_settings_from({}).timeout_seconds == RunConfig().collective_timeout);
  CHECK(launch_settings_from({"comm_bench", "--iters=3"}).rendezvous_port == 0);
  CHECK(launch_settings_from({"--help", "--rendezvous_port=x"}).rendezvous_port == 0);
  CHECK_THROWS_WITH(launch_settings_from({"--rendezvous_port=1", "--rendezvous_port=2"}),
                    "--rendezvous_port is given twice, as 1 and as 2; give it once");
  CHECK_THROWS_WITH(launch_settings_from({"--rendezvous_port=abc"}),
                    Catch::StartsWith("--rendezvous_port=abc: not an integer"));
  CHECK_THROWS_WITH(launch_settings_from({"--bogus"}), Catch::StartsWith("--bogus: unknown flag"));
}
