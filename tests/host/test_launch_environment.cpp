// Which launcher started a process and where it stands in the job, from made-up environments:
// mpirun (Open MPI, MPICH/PMI, PMIx), srun with and without an MPI plugin, torchrun (with its
// agent's store on MASTER_PORT), none; Slurm host lists; malformed variables; and the GPU a
// launched process takes.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "engine/errors.h"
#include "engine/process_group.h"
#include "engine/launch_environment.h"

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
  CHECK(launch.rendezvous_port == 29500);
  variables["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  CHECK(detect(variables).rendezvous_port == 29501);
  variables.erase("MASTER_PORT");
  CHECK_THROWS_WITH(detect(variables), Catch::Matchers::Contains("MASTER_PORT is unset"));
  variables["MASTER_PORT"] = "29500";
  variables["RANK"] = "4";
  CHECK_THROWS_WITH(detect(variables), Catch::Matchers::Contains("rank 4 of 4"));
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
  CHECK(launch.rendezvous_port == 20000 + (4242 * 7 + 3) % 40000);
  variables["MASTER_ADDR"] = "head";
  variables["MASTER_PORT"] = "12345";
  CHECK(detect(variables).rendezvous_host == "head");
  CHECK(detect(variables).rendezvous_port == 12345);
}

TEST_CASE("the first host of a Slurm host list", "[launchers]") {
  CHECK(first_slurm_host("node1") == "node1");
  CHECK(first_slurm_host("node1,node2") == "node1");
  CHECK(first_slurm_host("gpu[03-05,9],login1") == "gpu03");
  CHECK(first_slurm_host("rack[2,4]-gpu") == "rack2-gpu");
  CHECK(first_slurm_host("") == "");
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
