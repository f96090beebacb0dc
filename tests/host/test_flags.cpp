// The `run` command line: defaults and their resolution, and one test per validation error, each
// checking that the one-line message names the flag and the value the user typed.
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli/flags.h"
#include "cli/tf_cnn_benchmarks_flags.h"
#include "engine/errors.h"
#include "models/model_registry.h"

using namespace dpbench;
using Catch::Contains;

namespace {

DeviceInventory gpus(int count) {
  DeviceInventory inventory;
  inventory.cuda_gpus = count;
  if (count == 0) inventory.why_no_gpu = "no CUDA-capable device is detected";
  return inventory;
}

// Result-file checks would otherwise look at (and be fooled by) the current directory.
RunConfig parse(std::vector<std::string> args, const DeviceInventory& inventory = gpus(4)) {
  args.push_back("--result_file=");
  return parse_run_flags(args, inventory).config;
}

std::string error_of(std::vector<std::string> args, const DeviceInventory& inventory = gpus(4)) {
  try {
    parse(std::move(args), inventory);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "(no error)";
}

// A fresh directory per test, removed afterwards; result-file validation must never create files.
struct TemporaryDirectory {
  std::filesystem::path path;
  TemporaryDirectory() {
    path = std::filesystem::temp_directory_path() /
           ("dpbench_flags_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(path);
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, ignored);
    std::filesystem::remove_all(path, ignored);
  }
  static int& counter() {
    static int next = 0;
    return next;
  }
};

const ModelDefaults& trivial_defaults() { return find_model("trivial")->defaults; }

}  // namespace

TEST_CASE("defaults resolve from the model and the machine", "[flags]") {
  ParsedRunFlags parsed = parse_run_flags({}, gpus(4));
  const RunConfig& config = parsed.config;
  CHECK_FALSE(parsed.help);
  CHECK_FALSE(parsed.fell_back_to_reference);
  CHECK(config.model == "trivial");
  CHECK(config.backend == BackendKind::cuda);
  CHECK(config.device == "auto");
  CHECK(config.num_gpus == 1);
  CHECK(config.gpu_indices == std::vector<int>{0});
  CHECK(config.batch_size == trivial_defaults().batch_size);
  CHECK(config.total_batch_size == 0);
  CHECK(config.optimizer == trivial_defaults().optimizer);
  CHECK(config.learning_rate == trivial_defaults().learning_rate);
  CHECK(config.momentum == 0.9);
  CHECK(config.seed == 1234);
  CHECK(config.variable_update == "independent");
  CHECK_FALSE(config.independent_replica);
  CHECK(config.local_parameter_device == "gpu");
  CHECK(config.data_format == "NCHW");
  CHECK(config.precision == Precision::fp32);
  CHECK_FALSE(config.use_fp16);
  CHECK(config.num_batches == 100);
  CHECK(config.num_warmup_batches == 10);
  CHECK(config.display_every == 10);
  CHECK(config.result_file == "dpbench_result.json");
}

TEST_CASE("flag --device=auto falls back to the reference backend without a GPU", "[flags]") {
  ParsedRunFlags parsed = parse_run_flags({"--num_gpus=4", "--result_file="}, gpus(0));
  CHECK(parsed.fell_back_to_reference);
  CHECK(parsed.config.backend == BackendKind::reference);
  CHECK(parsed.config.gpu_indices == std::vector<int>{0, 1, 2, 3});

  ParsedRunFlags on_cpu = parse_run_flags({"--device=cpu", "--num_gpus=64", "--result_file="}, gpus(4));
  CHECK_FALSE(on_cpu.fell_back_to_reference);
  CHECK(on_cpu.config.backend == BackendKind::reference);
  CHECK(on_cpu.config.num_devices() == 64);
  CHECK(parse({"--device=gpu", "--num_gpus=4"}).backend == BackendKind::cuda);
}

TEST_CASE("explicit values are taken as given", "[flags]") {
  RunConfig config = parse({"--batch_size=8", "--optimizer=adam", "--learning_rate=0.5", "--momentum=0",
                            "--seed=7", "--num_batches=5", "--num_warmup_batches=0", "--display_every=2",
                            "--variable_update=parameter_server", "--local_parameter_device=cpu",
                            "--num_gpus", "2"});
  CHECK(config.batch_size == 8);
  CHECK(config.optimizer == "adam");
  CHECK(config.learning_rate == 0.5);
  CHECK(config.momentum == 0.0);
  CHECK(config.seed == 7);
  CHECK(config.num_batches == 5);
  CHECK(config.num_warmup_batches == 0);
  CHECK(config.display_every == 2);
  CHECK(config.variable_update == "parameter_server");
  CHECK(config.local_parameter_device == "cpu");
  CHECK(config.num_gpus == 2);
}

TEST_CASE("single-dash flags are accepted as tf_cnn_benchmarks' absl flags were", "[flags]") {
  CHECK(parse({"-num_gpus=3"}).num_gpus == 3);
  CHECK_THAT(error_of({"--batch_size", "-3"}), Contains("--batch_size=-3: must be a positive integer"));
}

TEST_CASE("strong scaling: --total_batch_size splits over the devices", "[flags]") {
  RunConfig config = parse({"--total_batch_size=64", "--num_gpus=4"});
  CHECK(config.batch_size == 16);
  CHECK(config.total_batch_size == 64);
  CHECK(config.global_batch_size() == 64);
  CHECK(parse({"--total_batch_size=64", "--batch_size=16", "--num_gpus=4"}).batch_size == 16);

  CHECK(error_of({"--total_batch_size=10", "--num_gpus=4"}) ==
        "--total_batch_size=10: does not divide evenly over 4 devices; use a multiple of 4");
  std::string disagree = error_of({"--total_batch_size=64", "--batch_size=8", "--num_gpus=4"});
  CHECK_THAT(disagree, Contains("--batch_size=8") && Contains("--total_batch_size=64") &&
                           Contains("16 per device"));
  CHECK_THAT(error_of({"--total_batch_size=0"}), Contains("--total_batch_size=0: must be a positive integer"));
}

TEST_CASE("flag --gpu_indices picks devices and may set their count", "[flags]") {
  RunConfig config = parse({"--gpu_indices=0,2"});
  CHECK(config.gpu_indices == std::vector<int>{0, 2});
  CHECK(config.num_gpus == 2);
  CHECK(parse({"--gpu_indices=3,1", "--num_gpus=2"}).gpu_indices == std::vector<int>{3, 1});

  CHECK_THAT(error_of({"--gpu_indices=0,2", "--num_gpus=4"}),
             Contains("--gpu_indices=0,2") && Contains("--num_gpus=4"));
  CHECK_THAT(error_of({"--gpu_indices=0,0"}), Contains("--gpu_indices=0,0: index 0 appears twice"));
  CHECK_THAT(error_of({"--gpu_indices=0,5"}),
             Contains("--gpu_indices=0,5: index 5 is out of range; 4 CUDA GPUs are present"));
  CHECK_THAT(error_of({"--gpu_indices=0,x"}), Contains("--gpu_indices=0,x: 'x' is not a device index"));
  CHECK_THAT(error_of({"--gpu_indices=0,"}), Contains("--gpu_indices=0,: '' is not a device index"));
  CHECK_THAT(error_of({"--gpu_indices=-1"}), Contains("--gpu_indices=-1: '-1' is not a device index"));
  CHECK_THAT(error_of({"--gpu_indices="}), Contains("--gpu_indices=: names no device"));
}

TEST_CASE("the seeds' spelling of independent resolves to independent", "[flags]") {
  RunConfig config = parse({"--variable_update=replicated", "--independent_replica=true"});
  CHECK(config.variable_update == "independent");
  CHECK(config.independent_replica);
  CHECK(parse({"--variable_update=replicated", "--independent_replica"}).variable_update == "independent");
  CHECK(parse({"--independent_replica=false"}).variable_update == "independent");
  CHECK(parse({"--variable_update=replicated", "--independent_replica=false"}).variable_update == "replicated");
  CHECK_THAT(error_of({"--independent_replica=maybe"}),
             Contains("--independent_replica=maybe: not a boolean; accepted: true, false"));
  CHECK_THAT(error_of({"--variable_update=parameter_server", "--independent_replica"}),
             Contains("--independent_replica=true: only meaningful with --variable_update=replicated"));
  CHECK_THAT(error_of({"--independent_replica", "true"}),
             Contains("unexpected argument 'true' (write --independent_replica=true)"));
}

TEST_CASE("the exchange flags default to RunConfig's values", "[flags]") {
  const RunConfig independent = parse({});
  CHECK(independent.all_reduce_spec.empty());
  const RunConfig config = parse({"--variable_update=replicated"});
  CHECK(config.variable_update == "replicated");
  CHECK(config.all_reduce_spec == "nccl");
  CHECK(config.gradient_repacking == 0);
  CHECK(config.bucket_cap_mb == 25.0);
  CHECK(config.agg_small_grads_max_bytes == 0);
  CHECK(config.agg_small_grads_max_group == 10);
  CHECK(config.overlap_comm);
  CHECK_FALSE(config.sparse_embedding_grads);
  CHECK(config.compact_gradient_transfer == TransferWidth::full);
  const RunConfig server = parse({"--variable_update=parameter_server"});
  CHECK(server.local_parameter_device == "gpu");
  CHECK(server.all_reduce_spec.empty());
  CHECK(server.bucket_cap_mb == 25.0);
}

TEST_CASE("flag --all_reduce_spec: replicated only, stored in canonical form", "[flags]") {
  auto spec = [](const std::string& text) {
    return parse({"--variable_update=replicated", "--all_reduce_spec=" + text}).all_reduce_spec;
  };
  CHECK(spec("nccl") == "nccl");
  CHECK(spec("nccl#1") == "nccl");
  CHECK(spec("xring#2") == "xring#2");
  CHECK(spec("pscpu") == "pscpu");
  CHECK(spec("psgpu#04") == "psgpu#4");
  CHECK(spec("") == "nccl");  // empty: the default, as tf_cnn_benchmarks' unset spec
  CHECK_THAT(error_of({"--variable_update=replicated", "--all_reduce_spec=mpi"}),
             Contains("--all_reduce_spec=mpi: unknown all-reduce algorithm 'mpi'; accepted: nccl, xring, pscpu, psgpu"));
  CHECK_THAT(error_of({"--variable_update=replicated", "--all_reduce_spec=nccl#0"}),
             Contains("--all_reduce_spec=nccl#0: the shard count after # must be 1 to 64"));

  CHECK(error_of({"--variable_update=parameter_server", "--all_reduce_spec=nccl"}) ==
        "--all_reduce_spec=nccl: only --variable_update=replicated takes an all-reduce spec, and this run is "
        "--variable_update=parameter_server; drop --all_reduce_spec or use --variable_update=replicated");
  CHECK(error_of({"--all_reduce_spec=xring"}) ==
        "--all_reduce_spec=xring: --variable_update=independent exchanges no gradients; drop --all_reduce_spec, or "
        "use --variable_update=replicated");
  CHECK_THAT(error_of({"--variable_update=replicated", "--independent_replica", "--all_reduce_spec=nccl"}),
             Contains("--all_reduce_spec=nccl: --variable_update=replicated --independent_replica=true "
                      "(independent) exchanges no gradients") &&
                 Contains("drop --all_reduce_spec"));
  CHECK_THAT(error_of({"--variable_update=distributed_replicated", "--all_reduce_spec=nccl"}),
             Contains("only --variable_update=distributed_all_reduce takes an all-reduce spec"));
}

TEST_CASE("flag --local_parameter_device: parameter_server only, when given", "[flags]") {
  CHECK(parse({"--variable_update=parameter_server", "--local_parameter_device=cpu"}).local_parameter_device ==
        "cpu");
  CHECK(parse({"--variable_update=parameter_server", "--local_parameter_device=gpu"}).local_parameter_device ==
        "gpu");
  CHECK(error_of({"--variable_update=replicated", "--local_parameter_device=cpu"}) ==
        "--local_parameter_device=cpu: only --variable_update=parameter_server keeps a master copy, and this "
        "run is --variable_update=replicated; drop --local_parameter_device or use "
        "--variable_update=parameter_server");
  // Given explicitly, even with the default value.
  CHECK(error_of({"--local_parameter_device=gpu"}) ==
        "--local_parameter_device=gpu: --variable_update=independent exchanges no gradients; drop "
        "--local_parameter_device, or use --variable_update=parameter_server");
}

TEST_CASE("the exchange flags are rejected with independent, which exchanges nothing", "[flags]") {
  for (const std::string flag :
       {"--gradient_repacking=2", "--bucket_cap_mb=10", "--agg_small_grads_max_bytes=1024",
        "--agg_small_grads_max_group=4", "--overlap_comm=false", "--overlap_comm", "--sparse_embedding_grads=false",
        "--compact_gradient_transfer=none"}) {
    const std::string value = flag.find('=') == std::string::npos ? flag + "=true" : flag;
    const std::string name = flag.substr(0, flag.find('='));
    const bool parameter_server_takes = name != "--sparse_embedding_grads" && name != "--compact_gradient_transfer";
    CHECK(error_of({flag}) == value + ": --variable_update=independent exchanges no gradients; drop " + name +
                                  ", or use --variable_update=" +
                                  (parameter_server_takes ? "parameter_server or replicated" : "replicated"));
    CHECK_THAT(error_of({"--variable_update=replicated", "--independent_replica", flag}),
               Contains(value + ": --variable_update=replicated --independent_replica=true (independent) "
                                "exchanges no gradients"));
    // The group size alone is rejected for another reason (it needs --agg_small_grads_max_bytes).
    const std::string with = name == "--agg_small_grads_max_group" ? "--agg_small_grads_max_bytes=64" : "--seed=1";
    CHECK(error_of({"--variable_update=replicated", with, flag}) == "(no error)");
    if (parameter_server_takes) CHECK(error_of({"--variable_update=parameter_server", with, flag}) == "(no error)");
    else CHECK_THAT(error_of({"--variable_update=parameter_server", with, flag}), Contains("only --variable_update=replicated"));
  }
}

TEST_CASE("the exchange flags must be in range", "[flags]") {
  auto replicated = [](const std::string& flag) { return error_of({"--variable_update=replicated", flag}); };
  CHECK(replicated("--gradient_repacking=-1") == "--gradient_repacking=-1: must be at least 0 (0: off)");
  CHECK_THAT(replicated("--gradient_repacking=two"), Contains("--gradient_repacking=two: not an integer"));
  CHECK(parse({"--variable_update=replicated", "--gradient_repacking=4"}).gradient_repacking == 4);

  CHECK(replicated("--bucket_cap_mb=-1") == "--bucket_cap_mb=-1: must be at least 0 (0: one exchange per tensor)");
  CHECK_THAT(replicated("--bucket_cap_mb=inf"), Contains("--bucket_cap_mb=inf: not a finite number"));
  CHECK_THAT(replicated("--bucket_cap_mb=nan"), Contains("--bucket_cap_mb=nan: not a number"));
  CHECK_THAT(replicated("--bucket_cap_mb=big"), Contains("--bucket_cap_mb=big: not a number"));
  CHECK_THAT(replicated("--bucket_cap_mb=1e300"), Contains("--bucket_cap_mb=1e300: too large"));
  CHECK(parse({"--variable_update=replicated", "--bucket_cap_mb=0"}).bucket_cap_mb == 0.0);
  CHECK(parse({"--variable_update=replicated", "--bucket_cap_mb=2.5"}).bucket_cap_mb == 2.5);

  CHECK(replicated("--agg_small_grads_max_bytes=-1") == "--agg_small_grads_max_bytes=-1: must be at least 0 (0: off)");
  CHECK_THAT(replicated("--agg_small_grads_max_bytes=1k"), Contains("--agg_small_grads_max_bytes=1k: not an integer"));
  CHECK(parse({"--variable_update=replicated", "--agg_small_grads_max_bytes=10000000000"})
            .agg_small_grads_max_bytes == 10000000000LL);
  CHECK(error_of({"--variable_update=replicated", "--agg_small_grads_max_bytes=1024",
                  "--agg_small_grads_max_group=0"}) == "--agg_small_grads_max_group=0: must be at least 1");

  CHECK_THAT(replicated("--overlap_comm=sometimes"), Contains("--overlap_comm=sometimes: not a boolean"));
  CHECK_FALSE(parse({"--variable_update=replicated", "--overlap_comm=false"}).overlap_comm);
  CHECK_THAT(replicated("--sparse_embedding_grads=maybe"), Contains("--sparse_embedding_grads=maybe: not a boolean"));
  CHECK_THAT(replicated("--compact_gradient_transfer=fp8"),
             Contains("--compact_gradient_transfer=fp8: unknown transfer type; accepted: none, fp16, bf16"));
}

TEST_CASE("gradients are cut one way: repacking, buckets or per tensor", "[flags]") {
  CHECK(error_of({"--variable_update=replicated", "--gradient_repacking=4", "--bucket_cap_mb=25"}) ==
        "--gradient_repacking=4 with --bucket_cap_mb=25: choose one way to cut the gradients, N equal pieces "
        "or buckets in backward order; drop one of the two flags");
  CHECK_THAT(error_of({"--variable_update=parameter_server", "--gradient_repacking=2", "--bucket_cap_mb=0"}),
             Contains("choose one way to cut the gradients"));
  CHECK_THAT(error_of({"--variable_update=replicated", "--gradient_repacking=2",
                       "--agg_small_grads_max_bytes=1024"}),
             Contains("--gradient_repacking=2 with --agg_small_grads_max_bytes=1024: choose one way to cut the "
                      "gradients") && Contains("drop one of the two flags"));
  // Repacking off: any cut of the other kinds is fine.
  CHECK(parse({"--variable_update=replicated", "--gradient_repacking=0", "--bucket_cap_mb=5"}).bucket_cap_mb == 5.0);
  // Repacking leaves the bucket size at its default, which it does not use.
  const RunConfig repacked = parse({"--variable_update=replicated", "--gradient_repacking=8"});
  CHECK(repacked.gradient_repacking == 8);
  CHECK(repacked.bucket_cap_mb == 25.0);
}

TEST_CASE("flag --agg_small_grads_max_bytes batches small tensors in per-tensor mode", "[flags]") {
  const RunConfig config = parse({"--variable_update=replicated", "--agg_small_grads_max_bytes=65536"});
  CHECK(config.agg_small_grads_max_bytes == 65536);
  CHECK(config.agg_small_grads_max_group == 10);
  CHECK(config.bucket_cap_mb == 0.0);  // resolved: batching applies only when every tensor travels alone
  const RunConfig explicit_zero = parse({"--variable_update=parameter_server", "--agg_small_grads_max_bytes=1024",
                                         "--bucket_cap_mb=0", "--agg_small_grads_max_group=3"});
  CHECK(explicit_zero.bucket_cap_mb == 0.0);
  CHECK(explicit_zero.agg_small_grads_max_group == 3);
  // Zero bytes is off: the bucket size stays.
  CHECK(parse({"--variable_update=replicated", "--agg_small_grads_max_bytes=0"}).bucket_cap_mb == 25.0);

  CHECK(error_of({"--variable_update=replicated", "--agg_small_grads_max_bytes=1024", "--bucket_cap_mb=25"}) ==
        "--agg_small_grads_max_bytes=1024 with --bucket_cap_mb=25: small tensors are batched only when every "
        "tensor is exchanged on its own; use --bucket_cap_mb=0 (or leave it out)");
  CHECK_THAT(error_of({"--variable_update=replicated", "--agg_small_grads_max_group=4"}),
             Contains("--agg_small_grads_max_group=4: only matters with --agg_small_grads_max_bytes greater than 0"));
}

TEST_CASE("flag --tail_bucket_mb cuts the last bucket smaller, with buckets only", "[flags]") {
  const RunConfig config = parse({"--variable_update=replicated", "--tail_bucket_mb=2"});
  CHECK(config.tail_bucket_mb == 2.0);
  CHECK(config_to_json(config)["tail_bucket_mb"] == 2.0);
  CHECK(parse({"--variable_update=parameter_server", "--tail_bucket_mb=25"}).tail_bucket_mb == 25.0);
  CHECK(parse({"--variable_update=replicated"}).tail_bucket_mb == 0.0);
  CHECK_THAT(error_of({"--variable_update=replicated", "--tail_bucket_mb=-1"}),
             Contains("--tail_bucket_mb=-1: must be at least 0 (0: off)"));
  CHECK_THAT(error_of({"--variable_update=replicated", "--tail_bucket_mb=30"}),
             Contains("--tail_bucket_mb=30: larger than --bucket_cap_mb=25"));
  CHECK_THAT(error_of({"--variable_update=replicated", "--tail_bucket_mb=2", "--gradient_repacking=4"}),
             Contains("--tail_bucket_mb=2: only matters with buckets"));
  CHECK_THAT(error_of({"--variable_update=replicated", "--tail_bucket_mb=2", "--agg_small_grads_max_bytes=1024"}),
             Contains("--tail_bucket_mb=2: only matters with buckets"));
  CHECK_THAT(error_of({"--variable_update=independent", "--tail_bucket_mb=2"}), Contains("--tail_bucket_mb=2: --variable_update=independent exchanges no gradients"));
}

TEST_CASE("flag --compact_gradient_transfer: replicated only, not over a ring", "[flags]") {
  CHECK(parse({"--variable_update=replicated", "--compact_gradient_transfer=fp16"}).compact_gradient_transfer ==
        TransferWidth::fp16);
  CHECK(parse({"--variable_update=replicated", "--compact_gradient_transfer=bf16", "--all_reduce_spec=psgpu#2"})
            .compact_gradient_transfer == TransferWidth::bf16);
  CHECK(parse({"--variable_update=replicated", "--compact_gradient_transfer=none"}).compact_gradient_transfer ==
        TransferWidth::full);
  // Refused even at its default: parameter_server's description does not take it.
  CHECK_THAT(error_of({"--variable_update=parameter_server", "--compact_gradient_transfer=none"}),
             Contains("only --variable_update=replicated sends gradients at half width"));
  CHECK(parse({"--variable_update=replicated", "--compact_gradient_transfer=fp16", "--all_reduce_spec=pscpu"})
            .all_reduce_spec == "pscpu");

  CHECK(error_of({"--variable_update=parameter_server", "--compact_gradient_transfer=fp16"}) ==
        "--compact_gradient_transfer=fp16: only --variable_update=replicated sends gradients at half width, and "
        "this run is --variable_update=parameter_server; drop --compact_gradient_transfer or use "
        "--variable_update=replicated");
  CHECK(error_of({"--variable_update=replicated", "--compact_gradient_transfer=bf16", "--all_reduce_spec=xring#2"}) ==
        "--compact_gradient_transfer=bf16 with --all_reduce_spec=xring#2: a ring forwards partial sums, which "
        "would be rounded to half width at every hop; use --all_reduce_spec=nccl, psgpu or pscpu");
}

TEST_CASE("flag --sparse_embedding_grads: replicated models with embedding tables", "[flags]") {
  for (const char* model : {"--model=nmt", "--model=rnnlm"}) {
    CHECK(parse({model, "--variable_update=replicated", "--sparse_embedding_grads"}).sparse_embedding_grads);
  }
  CHECK_FALSE(parse({"--variable_update=replicated", "--sparse_embedding_grads=false"}).sparse_embedding_grads);
  CHECK(error_of({"--variable_update=replicated", "--sparse_embedding_grads"}) ==
        "--sparse_embedding_grads=true: --model=trivial has no embedding tables (only nmt and rnnlm have); drop "
        "--sparse_embedding_grads");
  CHECK(error_of({"--variable_update=replicated", "--hierarchical_all_reduce"}) ==
        "--hierarchical_all_reduce=true: only --variable_update=distributed_all_reduce (one process per GPU, under "
        "mpirun, srun or torchrun) all-reduces inside each host, then across hosts, and this run is "
        "--variable_update=replicated; drop --hierarchical_all_reduce or use --variable_update=distributed_all_reduce "
        "(one process per GPU, under mpirun, srun or torchrun)");
  CHECK_THAT(error_of({"--model=resnet50", "--variable_update=replicated", "--sparse_embedding_grads=1"}),
             Contains("--sparse_embedding_grads=1: --model=resnet50 has no embedding tables"));
  CHECK(error_of({"--model=nmt", "--variable_update=parameter_server", "--sparse_embedding_grads"}) ==
        "--sparse_embedding_grads=true: only --variable_update=replicated gathers sparse embedding gradients, and "
        "this run is --variable_update=parameter_server; drop --sparse_embedding_grads or use "
        "--variable_update=replicated");
}

TEST_CASE("flag --sharded_update: replicated over nccl, full-width dense exchanges", "[flags]") {
  CHECK(parse({"--variable_update=replicated", "--sharded_update"}).sharded_update);
  CHECK(parse({"--variable_update=replicated", "--sharded_update", "--all_reduce_spec=nccl#2"}).sharded_update);
  CHECK_FALSE(parse({"--variable_update=replicated"}).sharded_update);
  CHECK(error_of({"--variable_update=parameter_server", "--sharded_update"}) ==
        "--sharded_update=true: only --variable_update=replicated shards the update of its replicas, and this "
        "run is --variable_update=parameter_server; drop --sharded_update or use --variable_update=replicated");
  CHECK_THAT(error_of({"--variable_update=independent", "--sharded_update=false"}),
             Contains("--sharded_update=false: --variable_update=independent exchanges no gradients"));
  CHECK(error_of({"--variable_update=replicated", "--sharded_update", "--all_reduce_spec=xring"}) ==
        "--sharded_update=true with --all_reduce_spec=xring: the shards travel by NCCL's reduce-scatter and "
        "all-gather, which only the nccl spec uses; use --all_reduce_spec=nccl (or nccl#k), or drop --sharded_update");
  CHECK_THAT(error_of({"--variable_update=replicated", "--sharded_update", "--compact_gradient_transfer=bf16"}),
             Contains("--sharded_update=true with --compact_gradient_transfer=bf16: "));
  CHECK_THAT(error_of({"--model=nmt", "--variable_update=replicated", "--sharded_update", "--sparse_embedding_grads"}),
             Contains("--sharded_update=true with --sparse_embedding_grads=true: "));
  CHECK(error_of({"--model=resnet50", "--use_fp16", "--fp16_enable_auto_loss_scale", "--variable_update=replicated",
                  "--sharded_update"}) ==
        "--sharded_update=true with --fp16_enable_auto_loss_scale=true: each shard's owner would decide alone "
        "whether to skip a step, so the replicas would diverge; use a fixed --fp16_loss_scale, or drop "
        "--sharded_update");
  CHECK(error_of({"--variable_update=replicated", "--sharded_update=often"}) ==
        "--sharded_update=often: not a boolean; accepted: true, false");
}

TEST_CASE("parameter_server takes a fixed fp16 loss scale only", "[flags]") {
  CHECK(error_of({"--model=resnet50", "--precision=fp16", "--fp16_enable_auto_loss_scale",
                  "--variable_update=parameter_server"}) ==
        "--fp16_enable_auto_loss_scale=true with --variable_update=parameter_server: each owner would decide "
        "alone whether to skip a step, so the replicas would diverge; use a fixed --fp16_loss_scale, or "
        "--variable_update=replicated");
  CHECK(parse({"--model=resnet50", "--precision=fp16", "--fp16_loss_scale=1024",
               "--variable_update=parameter_server"}).fp16_loss_scale == 1024.0);
  CHECK(parse({"--model=resnet50", "--use_fp16", "--fp16_enable_auto_loss_scale", "--variable_update=replicated"})
            .fp16_enable_auto_loss_scale);
}

TEST_CASE("every synchronisation error is one line", "[flags]") {
  for (const std::string& message :
       {error_of({"--all_reduce_spec=nccl"}), error_of({"--bucket_cap_mb=1"}),
        error_of({"--variable_update=replicated", "--gradient_repacking=2", "--bucket_cap_mb=1"}),
        error_of({"--variable_update=replicated", "--compact_gradient_transfer=fp16", "--all_reduce_spec=xring"})}) {
    CHECK(message != "(no error)");
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("model errors name the model and what is accepted", "[flags]") {
  std::string unknown = error_of({"--model=foo"});
  // Every model of the zoo is built, so the list names them all and plans none.
  CHECK_THAT(unknown, Contains("--model=foo: unknown model; accepted: trivial") &&
                          Contains("nmt, rnnlm") && !Contains("planned"));
  CHECK(error_of({"--model=nmt"}) == "(no error)");
}

TEST_CASE("device count errors", "[flags]") {
  CHECK(error_of({"--num_gpus=0"}) == "--num_gpus=0: must be at least 1");
  CHECK(error_of({"--num_gpus=8"}) ==
        "--num_gpus=8: only 4 CUDA GPUs are present; use --num_gpus<=4, or --device=cpu for the "
        "reference backend");
  CHECK_THAT(error_of({"--num_gpus=2"}, gpus(1)), Contains("only 1 CUDA GPU is present"));
  CHECK(error_of({"--num_gpus=abc"}) == "--num_gpus=abc: not an integer; accepted: an integer >= 1");
  CHECK_THAT(error_of({"--num_gpus=2.5"}), Contains("--num_gpus=2.5: not an integer"));
  CHECK_THAT(error_of({"--num_gpus=99999999999"}), Contains("--num_gpus=99999999999: too large"));
  CHECK_THAT(error_of({"--device=cpu", "--num_gpus=65"}),
             Contains("--num_gpus=65: the reference backend runs at most 64 host devices"));
  CHECK(error_of({"--device=gpu"}, gpus(0)) ==
        "--device=gpu: no CUDA GPU is present (no CUDA-capable device is detected); use --device=cpu "
        "for the reference backend");
  CHECK(error_of({"--device=gpu"}, DeviceInventory{}) ==
        "--device=gpu: no CUDA GPU is present; use --device=cpu for the reference backend");
  CHECK_THAT(error_of({"--device=tpu"}), Contains("--device=tpu: unknown device; accepted: auto, gpu, cpu"));
}

TEST_CASE("batch and measurement counts must be in range", "[flags]") {
  CHECK(error_of({"--batch_size=-3"}) == "--batch_size=-3: must be a positive integer");
  CHECK(error_of({"--batch_size=0"}) == "--batch_size=0: must be a positive integer");
  CHECK_THAT(error_of({"--batch_size=abc"}), Contains("--batch_size=abc: not an integer"));
  CHECK_THAT(error_of({"--batch_size="}), Contains("--batch_size=: not an integer"));
  CHECK_THAT(error_of({"--batch_size=2000000000", "--num_gpus=4"}), Contains("too large"));
  CHECK(error_of({"--num_batches=0"}) == "--num_batches=0: must be at least 1");
  CHECK(error_of({"--num_warmup_batches=-1"}) == "--num_warmup_batches=-1: must be at least 0");
  CHECK(error_of({"--display_every=0"}) == "--display_every=0: must be at least 1");
  CHECK(error_of({"--profile_step=-1"}) == "--profile_step=-1: must be at least 0 (0: no profiled step)");
  CHECK(error_of({"--num_batches=5", "--profile_step=6"}) ==
        "--profile_step=6: is past the last measured step; give 1..5 or 0");
  CHECK_THAT(error_of({"--seed=-1"}), Contains("--seed=-1: not a non-negative integer"));
}

TEST_CASE("optimizer errors", "[flags]") {
  CHECK_THAT(error_of({"--optimizer=rmsprop"}),
             Contains("--optimizer=rmsprop: unknown optimizer; accepted: sgd, momentum, adam, adamw"));
  CHECK(error_of({"--learning_rate=0"}) == "--learning_rate=0: must be greater than 0");
  CHECK(error_of({"--learning_rate=-0.1"}) == "--learning_rate=-0.1: must be greater than 0");
  CHECK_THAT(error_of({"--learning_rate=fast"}), Contains("--learning_rate=fast: not a number"));
  CHECK_THAT(error_of({"--learning_rate=nan"}), Contains("--learning_rate=nan: not a number"));
  CHECK_THAT(error_of({"--momentum=1"}), Contains("--momentum=1: must be in [0, 1)"));
  CHECK_THAT(error_of({"--momentum=-0.5"}), Contains("--momentum=-0.5: must be in [0, 1)"));
}

TEST_CASE("adamw takes --weight_decay, records it, and no other optimizer accepts the flag", "[flags]") {
  const RunConfig adamw = parse({"--optimizer=adamw", "--weight_decay=0.1"});
  CHECK(adamw.optimizer == "adamw");
  CHECK(adamw.weight_decay == 0.1);
  const nlohmann::json json = config_to_json(adamw);
  CHECK(json["optimizer"] == "adamw");
  CHECK(json["weight_decay"] == 0.1);
  CHECK(parse({"--optimizer=adamw"}).weight_decay == 0.01);  // torch.optim.AdamW's default
  CHECK(parse({"--optimizer=adamw", "--weight_decay=0"}).weight_decay == 0.0);

  CHECK(error_of({"--optimizer=sgd", "--weight_decay=0.1"}) ==
        "--weight_decay=0.1: is AdamW's decoupled weight decay and this run's optimizer is --optimizer=sgd; "
        "give --optimizer=adamw or drop --weight_decay");
  CHECK_THAT(error_of({"--optimizer=adam", "--weight_decay=0"}),
             Contains("--weight_decay=0: is AdamW's decoupled weight decay") && Contains("--optimizer=adam;"));
  // The model's optimizer (trivial: sgd) counts as much as a given one.
  CHECK_THAT(error_of({"--weight_decay=0.01"}), Contains("this run's optimizer is --optimizer=sgd"));

  CHECK(error_of({"--optimizer=adamw", "--weight_decay=-0.1"}) == "--weight_decay=-0.1: must be at least 0, e.g. 0.1");
  CHECK_THAT(error_of({"--optimizer=adamw", "--weight_decay=nan"}), Contains("--weight_decay=nan: not a number"));
  CHECK_THAT(error_of({"--optimizer=adamw", "--weight_decay=inf"}),
             Contains("--weight_decay=inf: not a finite number"));
  CHECK_THAT(error_of({"--optimizer=adamw", "--weight_decay=1e39"}),
             Contains("--weight_decay=1e39: too large for the optimizers' float32 arithmetic"));
  CHECK_THAT(error_of({"--optimizer=adamw", "--weight_decay="}), Contains("--weight_decay=: not a number"));
}

TEST_CASE("distributed strategies: one GPU per process, horovod's spelling, NCCL and GPU owners only", "[flags]") {
  CHECK(parse({"--variable_update=distributed_all_reduce"}).variable_update == "distributed_all_reduce");
  CHECK(parse({"--variable_update=horovod"}).variable_update == "distributed_all_reduce");
  CHECK(parse({"--variable_update=horovod"}).all_reduce_spec == "nccl");
  CHECK(parse({"--variable_update=distributed_replicated"}).local_parameter_device == "gpu");
  CHECK(parse({"--variable_update=distributed_all_reduce", "--all_reduce_spec=nccl#2"}).all_reduce_spec == "nccl#2");
  CHECK(parse({"--variable_update=distributed_all_reduce", "--compact_gradient_transfer=bf16"})
            .compact_gradient_transfer == TransferWidth::bf16);
  CHECK_THAT(error_of({"--variable_update=distributed_all_reduce", "--num_gpus=2"}),
             Contains("drives one GPU per process") && Contains("mpirun -np 2"));
  CHECK_THAT(error_of({"--variable_update=distributed_all_reduce", "--all_reduce_spec=xring"}),
             Contains("--all_reduce_spec=xring") && Contains("NCCL"));
  CHECK_THAT(error_of({"--variable_update=distributed_replicated", "--local_parameter_device=cpu"}),
             Contains("--local_parameter_device=cpu") && Contains("sharded over the ranks' GPUs"));
  CHECK_THAT(error_of({"--variable_update=foo"}),
             Contains("--variable_update=foo: unknown strategy; accepted: independent, parameter_server, "
                      "replicated, distributed_all_reduce, distributed_replicated, fully_sharded, horovod"));
  CHECK_THAT(error_of({"--local_parameter_device=tpu"}),
             Contains("--local_parameter_device=tpu: unknown device; accepted: gpu, cpu"));
  CHECK(parse({"--data_format=NHWC"}).data_format == "NHWC");
  CHECK_THAT(error_of({"--cudnn_benchmark=sometimes"}), Contains("--cudnn_benchmark=sometimes"));
  CHECK_FALSE(parse({"--cudnn_benchmark=false"}).cudnn_benchmark);
  CHECK_FALSE(parse({}).deterministic);
  CHECK(parse({"--deterministic"}).deterministic);
  CHECK_THAT(error_of({"--deterministic=mostly"}), Contains("--deterministic=mostly"));
  CHECK_THAT(error_of({"--data_format=CHWN"}), Contains("--data_format=CHWN: unknown data format"));
  CHECK(parse({"--precision=tf32"}).precision == Precision::tf32);
  CHECK_THAT(error_of({"--precision=fp8"}), Contains("--precision=fp8: unknown precision"));
  CHECK_FALSE(parse({"--use_fp16=false"}).use_fp16);
}

TEST_CASE("flag --precision: 16-bit precisions for the CNN models, --use_fp16 and loss scaling", "[flags]") {
  for (const char* precision : {"fp16", "bf16"}) {
    const RunConfig config = parse({"--model=resnet50", std::string("--precision=") + precision});
    CHECK(precision_name(config.precision) == std::string(precision));
    CHECK(config.activation_type() == (std::string(precision) == "fp16" ? DataType::f16 : DataType::bf16));
    // The trivial model has no 16-bit path; saying so beats silently running fp32.
    CHECK_THAT(error_of({std::string("--precision=") + precision}),
               Contains(std::string("--precision=") + precision + ": --model=trivial computes in fp32 only"));
  }
  CHECK(parse({"--model=vgg16", "--precision=tf32"}).activation_type() == DataType::f32);

  const RunConfig alias = parse({"--model=resnet50", "--use_fp16"});
  CHECK(alias.precision == Precision::fp16);
  CHECK(alias.use_fp16);
  CHECK(parse({"--model=resnet50", "--use_fp16", "--precision=fp16"}).precision == Precision::fp16);
  CHECK_THAT(error_of({"--model=resnet50", "--use_fp16", "--precision=bf16"}),
             Contains("--use_fp16=true: contradicts --precision=bf16"));

  const RunConfig fixed = parse({"--model=resnet50", "--precision=fp16", "--fp16_loss_scale=1024"});
  CHECK(fixed.fp16_loss_scale == 1024.0);
  CHECK_FALSE(fixed.fp16_enable_auto_loss_scale);
  const RunConfig automatic = parse({"--model=resnet50", "--use_fp16", "--fp16_enable_auto_loss_scale",
                                     "--fp16_inc_loss_scale_every_n=50"});
  CHECK(automatic.fp16_enable_auto_loss_scale);
  CHECK(automatic.fp16_inc_loss_scale_every_n == 50);
  CHECK(automatic.fp16_loss_scale == 0.0);  // not given: the run picks the default start

  CHECK_THAT(error_of({"--model=resnet50", "--precision=fp16", "--fp16_loss_scale=0.5"}),
             Contains("--fp16_loss_scale=0.5: must be between 1 and 2^24"));
  CHECK_THAT(error_of({"--model=resnet50", "--precision=fp16", "--fp16_loss_scale=big"}),
             Contains("--fp16_loss_scale=big"));
  CHECK_THAT(error_of({"--model=resnet50", "--precision=bf16", "--fp16_loss_scale=128"}),
             Contains("--fp16_loss_scale=128: loss scaling is for --precision=fp16 only (this run is bf16)"));
  CHECK_THAT(error_of({"--model=resnet50", "--fp16_enable_auto_loss_scale"}),
             Contains("--fp16_enable_auto_loss_scale=true: loss scaling is for --precision=fp16 only"));
  CHECK_THAT(error_of({"--model=resnet50", "--precision=fp16", "--fp16_inc_loss_scale_every_n=10"}),
             Contains("only matters with --fp16_enable_auto_loss_scale=true"));
  CHECK_THAT(error_of({"--model=resnet50", "--precision=fp16", "--fp16_enable_auto_loss_scale",
                       "--fp16_inc_loss_scale_every_n=0"}),
             Contains("--fp16_inc_loss_scale_every_n=0: must be at least 1"));
}

TEST_CASE("malformed command lines give one line each", "[flags]") {
  CHECK_THAT(error_of({"--num_gpu=4"}),
             Contains("--num_gpu=4: unknown flag; did you mean --num_gpus?"));
  CHECK_THAT(error_of({"--frobnicate"}), Contains("--frobnicate: unknown flag"));
  CHECK_THAT(error_of({"-x"}), Contains("-x: unknown flag"));
  CHECK_THAT(error_of({"xyz"}), Contains("unexpected argument 'xyz'"));
  CHECK_THAT(error_of({"--", "xyz"}), Contains("unexpected argument 'xyz'"));
  CHECK_THAT(error_of({"--num_gpus"}), Contains("--num_gpus: missing a value"));
  CHECK_THAT(error_of({"--model", "--num_gpus=2"}), Contains("--model: missing a value"));
  CHECK(error_of({"--help=maybe"}) == "--help=maybe: takes no value; write --help");
  for (const std::string& message : {error_of({"--num_gpu=4"}), error_of({"xyz"}), error_of({"--num_gpus"})}) {
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("flag --help and --version skip validation", "[flags]") {
  ParsedRunFlags help = parse_run_flags({"--model=foo", "--help"}, gpus(0));
  CHECK(help.help);
  CHECK(parse_run_flags({"-h"}, gpus(0)).help);
  CHECK(parse_run_flags({"--num_gpus=0", "--version"}, gpus(0)).version);
}

// `text` with every run of whitespace (line breaks and the indentation after them) as one space.
static std::string one_line(const std::string& text) {
  std::string flat;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space) flat += c;
    else if (!flat.empty() && flat.back() != ' ') flat += ' ';
  }
  return flat;
}

TEST_CASE("flag --help groups the flags by concern and shows the defaults", "[flags]") {
  const std::string help = run_help_text();
  CHECK_THAT(help, Contains("dpbench [run] [flags]"));
  CHECK_THAT(help, Contains("dpbench report"));
  for (const char* group : {"Model", "Devices", "Synchronisation", "Optimizer", "Measurement", "Output"}) {
    CHECK_THAT(help, Contains(std::string(" ") + group + " options:"));
  }
  for (const char* flag :
       {"--model", "--batch_size", "--total_batch_size", "--num_gpus", "--gpu_indices", "--device",
        "--variable_update", "--independent_replica", "--all_reduce_spec", "--local_parameter_device",
        "--gradient_repacking", "--bucket_cap_mb", "--agg_small_grads_max_bytes", "--agg_small_grads_max_group",
        "--overlap_comm", "--sparse_embedding_grads", "--compact_gradient_transfer",
        "--data_format", "--precision", "--use_fp16", "--fp16_loss_scale",
        "--fp16_enable_auto_loss_scale", "--fp16_inc_loss_scale_every_n", "--optimizer", "--learning_rate", "--momentum",
        "--weight_decay", "--seed", "--num_batches", "--num_warmup_batches", "--display_every", "--result_file",
        "--collective_timeout", "--help", "--version"}) {
    CHECK_THAT(help, Contains(flag));
  }
  for (const char* shown_default :
       {"(default: trivial)", "(default: auto)", "(default: 1)", "(default: independent)",
        "(default: gpu)", "(default: NCHW)", "(default: fp32)", "(default: 0.9)", "(default: 0.01)", "(default: 1234)",
        "(default: 100)", "(default: 10)", "(default: dpbench_result.json)", "(default: false)",
        "(default: 25)", "(default: 0)", "(default: true)", "(default: none)"}) {
    CHECK_THAT(one_line(help), Contains(shown_default));  // as read, wherever --help wraps a line
  }
  for (const FlagDeclaration& flag : run_flag_table().flags) CHECK_THAT(help, Contains("--" + flag.name));  // no group lost
  CHECK_THAT(help, !Contains("planned: none"));
  CHECK_THAT(help, Contains("for trivial: " + std::to_string(trivial_defaults().batch_size)));
  // The all-reduce algorithms come from the spec parser's table, with the #k form.
  for (const char* algorithm : {"nccl", "xring", "pscpu", "psgpu", "#k", "(default: nccl)"}) {
    CHECK_THAT(help, Contains(algorithm));
  }
}

TEST_CASE("config_to_json has every resolved flag", "[flags]") {
  RunConfig config = parse({"--gpu_indices=0,2", "--variable_update=replicated", "--independent_replica"});
  nlohmann::json json = config_to_json(config);
  for (const char* key :
       {"model", "batch_size", "total_batch_size", "num_gpus", "gpu_indices", "device", "backend",
        "variable_update", "independent_replica", "data_format", "precision", "use_fp16", "fp16_loss_scale", "fp16_enable_auto_loss_scale",
        "fp16_inc_loss_scale_every_n", "optimizer", "learning_rate", "momentum", "weight_decay", "seed",
        "num_batches", "num_warmup_batches", "display_every", "result_file", "cuda_graph",
        "cudnn_benchmark", "deterministic", "collective_timeout", "device_memory"}) {
    CHECK(json.contains(key));
  }
  CHECK(json["gpu_indices"] == nlohmann::json::array({0, 2}));
  CHECK(json["num_gpus"] == 2);
  CHECK(json["backend"] == "cuda");
  CHECK(json["device"] == "auto");
  CHECK(json["variable_update"] == "independent");
  CHECK(json["independent_replica"] == true);
  CHECK(json["seed"] == 1234);
  // independent exchanges nothing: no strategy settings to record.
  for (const char* key : {"all_reduce_spec", "local_parameter_device", "gradient_repacking", "bucket_cap_mb",
                          "tail_bucket_mb", "agg_small_grads_max_bytes", "agg_small_grads_max_group", "overlap_comm",
                          "sparse_embedding_grads", "compact_gradient_transfer"}) {
    CHECK_FALSE(json.contains(key));
  }
}

TEST_CASE("config_to_json records the exchange settings of replicated and parameter_server", "[flags]") {
  const nlohmann::json replicated = config_to_json(
      parse({"--variable_update=replicated", "--all_reduce_spec=psgpu#4", "--agg_small_grads_max_bytes=4096",
             "--agg_small_grads_max_group=5", "--overlap_comm=false", "--compact_gradient_transfer=bf16"}));
  CHECK(replicated["all_reduce_spec"] == "psgpu#4");
  CHECK_FALSE(replicated.contains("local_parameter_device"));
  CHECK(replicated["gradient_repacking"] == 0);
  CHECK(replicated["bucket_cap_mb"] == 0.0);
  CHECK(replicated["agg_small_grads_max_bytes"] == 4096);
  CHECK(replicated["agg_small_grads_max_group"] == 5);
  CHECK(replicated["overlap_comm"] == false);
  CHECK(replicated["sparse_embedding_grads"] == false);
  CHECK(replicated["compact_gradient_transfer"] == "bf16");

  const nlohmann::json defaults = config_to_json(parse({"--variable_update=replicated"}));
  CHECK(defaults["all_reduce_spec"] == "nccl");
  CHECK(defaults["bucket_cap_mb"] == 25.0);
  CHECK(defaults["overlap_comm"] == true);
  CHECK(defaults["compact_gradient_transfer"] == "none");

  const nlohmann::json server = config_to_json(
      parse({"--variable_update=parameter_server", "--local_parameter_device=cpu", "--gradient_repacking=3"}));
  CHECK(server["local_parameter_device"] == "cpu");
  CHECK_FALSE(server.contains("all_reduce_spec"));
  CHECK(server["gradient_repacking"] == 3);
  CHECK(server["bucket_cap_mb"] == 25.0);
  CHECK(server["agg_small_grads_max_group"] == 10);
  CHECK_FALSE(server.contains("compact_gradient_transfer"));  // all-reduce options only
  CHECK_FALSE(server.contains("sparse_embedding_grads"));
}

namespace {

std::string result_file_error(const std::string& path) {
  try {
    parse_run_flags({"--result_file=" + path}, gpus(4));
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("flag --result_file must land in an existing writable directory", "[flags]") {
  TemporaryDirectory temporary;
  const std::string inside = (temporary.path / "out.json").string();
  CHECK(parse_run_flags({"--result_file=" + inside}, gpus(4)).config.result_file == inside);
  CHECK_FALSE(std::filesystem::exists(inside));  // validation creates nothing
  CHECK(parse_run_flags({"--result_file="}, gpus(4)).config.result_file.empty());

  const std::string missing_directory = (temporary.path / "no" / "such").string();
  const std::string missing = missing_directory + "/out.json";
  CHECK(result_file_error(missing) ==
        "--result_file=" + missing + ": it cannot be created: its folder '" + missing_directory +
            "' does not exist; give a path in an existing writable folder (or --result_file= to write none)");
  CHECK_FALSE(std::filesystem::exists(temporary.path / "no"));

  CHECK_THAT(result_file_error(temporary.path.string()),
             Contains("--result_file=" + temporary.path.string() + ": it is a directory"));

  const std::string plain_file = (temporary.path / "plain").string();
  std::ofstream(plain_file) << "x";
  CHECK_THAT(result_file_error(plain_file + "/out.json"),
             Contains("--result_file=" + plain_file + "/out.json: it cannot be created: its folder '" + plain_file +
                      "' is a regular file, not a folder"));

  const std::filesystem::path locked = temporary.path / "locked";
  std::filesystem::create_directory(locked);
  std::filesystem::permissions(locked, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const std::string locked_file = (locked / "out.json").string();
  if (::access(locked.c_str(), W_OK) == 0) {
    WARN("running as root: a read-only directory is still writable, skipping that check");
  } else {
    CHECK_THAT(result_file_error(locked_file),
               Contains("--result_file=" + locked_file + ": it cannot be written: creating its temporary file") &&
                   Contains("Permission denied"));
  }
}

TEST_CASE("every count and size flag has an upper bound, named in its error", "[flags]") {
  const std::vector<std::vector<std::string>> too_large = {
      {"--num_batches=1000001"},
      {"--num_warmup_batches=1000000000"},
      {"--batch_size=1048577"},
      {"--total_batch_size=8388616", "--num_gpus=4"},
      {"--data_feed=host", "--prefetch_depth=1000000000"},
      {"--data_feed=host", "--datasets_num_private_threads=100000"},
      {"--variable_update=replicated", "--gradient_repacking=65537"},
      {"--variable_update=replicated", "--agg_small_grads_max_group=65537"},
      {"--variable_update=replicated", "--agg_small_grads_max_bytes=2199023255553"},
      {"--model=cifar10_cnn", "--precision=fp16", "--fp16_enable_auto_loss_scale",
       "--fp16_inc_loss_scale_every_n=2000000000"},
      {"--model=rnnlm", "--vocab_size=10000001"},
      {"--model=rnnlm", "--num_layers=1025"},
      {"--model=rnnlm", "--seq_len=100000"},
      {"--model=nmt", "--src_max_len=65537"},
      {"--model=nmt", "--num_units=65537"},
      {"--collective_timeout=86401"},
  };
  for (const auto& args : too_large) {
    const std::string error = error_of(args);
    INFO(args.back() << " -> " << error);
    CHECK_THAT(error, Contains("too large") || Contains("accepted: 1 to 86400"));
    CHECK(error.find('\n') == std::string::npos);
  }
  for (const char* bad : {"0", "-5", "nan", "inf", "soon"}) {
    INFO(bad);
    CHECK_THAT(error_of({std::string("--collective_timeout=") + bad}), Contains("--collective_timeout="));
  }
  CHECK(parse({"--collective_timeout=2.5"}).collective_timeout == 2.5);
  CHECK(parse({}).collective_timeout == 300);
}

TEST_CASE("tf_cnn_benchmarks flags dpbench lacks are named as such, with what to use instead", "[flags]") {
  CHECK_THAT(error_of({"--xla"}), Catch::Matchers::StartsWith("--xla is a tf_cnn_benchmarks flag dpbench does not have: "));
  CHECK_THAT(error_of({"--eval=true"}), Contains("--eval is a tf_cnn_benchmarks flag") && Contains("training"));
  CHECK_THAT(error_of({"--train_dir=/tmp/x"}), Contains("--result_file"));
  CHECK_THAT(error_of({"--job_name=worker"}), Contains("mpirun"));
  CHECK_THAT(error_of({"--num_intra_threads", "4"}), Contains("one host thread drives each device"));
  CHECK_THAT(error_of({"-distortions=false"}), Contains("--distortions is a tf_cnn_benchmarks flag"));
  CHECK_THAT(error_of({"--tf_random_seed=3"}), Contains("--seed"));
  // A plain typo is still an unknown flag with a suggestion.
  CHECK_THAT(error_of({"--num_batchs=3"}), Contains("unknown flag; did you mean --num_batches?"));

  // The notes name only flags dpbench has, and no tf_cnn_benchmarks-only name shadows one of ours.
  const std::string help = run_help_text();
  for (const char* name : {"xla", "eval", "train_dir", "distortions", "job_name", "num_intra_threads",
                           "batch_group_size", "hierarchical_copy", "init_learning_rate", "tf_random_seed",
                           "num_workers"}) {
    const std::string note = tf_cnn_benchmarks_flag_note(name);
    INFO(name << ": " << note);
    REQUIRE_FALSE(note.empty());
    CHECK(help.find("--" + std::string(name) + " ") == std::string::npos);
    for (size_t at = note.find("--"); at != std::string::npos; at = note.find("--", at + 2)) {
      const size_t end = note.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_", at + 2);
      CHECK_THAT(help, Contains(note.substr(at, end - at)));
    }
  }
  CHECK(tf_cnn_benchmarks_flag_note("num_gpus").empty());  // ours
}

TEST_CASE("a flag given twice must say the same both times", "[flags]") {
  CHECK(error_of({"--num_batches=5", "--num_batches=6"}) ==
        "--num_batches is given twice, as 5 and as 6; give it once");
  CHECK(error_of({"--num_batches=5", "--num_batches", "7"}) ==
        "--num_batches is given twice, as 5 and as 7; give it once");
  CHECK(error_of({"--overlap_comm", "--variable_update=replicated", "--overlap_comm=false"}) ==
        "--overlap_comm is given twice, as true and as false; give it once");
  CHECK(parse({"--num_batches=5", "-num_batches=5"}).num_batches == 5);  // the same twice is harmless
  CHECK(parse({"--variable_update=replicated", "--overlap_comm", "--overlap_comm=true"}).overlap_comm);
}

TEST_CASE("errors name the flag as typed, and a long warm-up is noted", "[flags]") {
  CHECK(error_of({"--use_fp16=true"}) ==
        "--use_fp16=true: --model=trivial computes in fp32 only; use fp32 or tf32, or a CNN model");
  CHECK_THAT(error_of({"--precision=bf16"}), Catch::Matchers::StartsWith("--precision=bf16: --model=trivial"));
  DeviceInventory inventory;
  inventory.cuda_gpus = 1;
  const ParsedRunFlags long_warmup =
      parse_run_flags({"--num_batches=5", "--num_warmup_batches=10", "--result_file="}, inventory);
  REQUIRE(long_warmup.notes.size() == 1);
  CHECK(long_warmup.notes[0] ==
        "--num_warmup_batches=10 is more than --num_batches=5: the warm-up runs longer than the measurement");
  CHECK(parse_run_flags({"--result_file="}, inventory).notes.empty());
}

TEST_CASE("no argument's length or bytes break the parser: one line naming it, cut and escaped", "[flags]") {
  const std::string long_model(30000, 'm');
  const std::string error = error_of({"--model=" + long_model});
  CHECK_THAT(error, Contains("--model=" + std::string(300, 'm') + "... (30000 bytes): unknown model"));
  CHECK(error.size() < 1000);
  const std::string long_path = "--result_file=/nowhere/" + std::string(100000, 'r') + ".json";
  CHECK_THROWS_WITH(parse_run_flags({long_path}, gpus(4)), Contains("--result_file="));
  const std::string unknown = error_of({"--" + std::string(100000, 'z') + "=1"});
  CHECK_THAT(unknown, Contains("unknown flag") && !Contains("did you mean"));
  CHECK(unknown.size() < 1000);
  CHECK_THAT(error_of({"--model=res\nnet"}), Contains("--model=res\\x0Anet: unknown model"));
  CHECK_THAT(error_of({"--model=\x1b[2Jx"}), Contains("--model=\\x1B[2Jx"));
  CHECK_THAT(error_of({"\x1b[31mred"}), Contains("unexpected argument '\\x1B[31mred'"));
  CHECK_THAT(error_of({"--model=trivial", "--model=tri\nvial"}), Contains("as trivial and as tri\\x0Avial"));
  for (const std::string& text : {error_of({"--model=res\nnet"}), error_of({"--bo\ngus=1"})})
    CHECK(text.find('\n') == std::string::npos);
  // The value as the next argument, and the same flag thousands of times, read in one pass.
  CHECK_THAT(error_of({"--model", long_model}), Contains("(30000 bytes)"));
  std::vector<std::string> many(20000, "--display_every=3");
  CHECK(parse(many).display_every == 3);
}

TEST_CASE("numbers too small or too large for a flag are named as such, not as 'not a number'", "[flags]") {
  CHECK_THAT(error_of({"--learning_rate=1e-320"}), Contains("--learning_rate=1e-320: too small"));
  CHECK_THAT(error_of({"--learning_rate=1e-39"}), Contains("too small"));
  CHECK(parse({"--learning_rate=1.2e-38"}).learning_rate == Approx(1.2e-38));
  CHECK_THAT(error_of({"--learning_rate=1e400"}), Contains("not a finite number"));
  CHECK_THAT(error_of({"--learning_rate=inf"}), Contains("not a finite number"));
  CHECK_THAT(error_of({"--learning_rate=fast"}), Contains("not a number"));
  CHECK(parse({"--optimizer=momentum", "--momentum=1e-320"}).momentum < 1e-300);
  CHECK_THAT(error_of({"--peak_tflops=1e-300"}), Contains("from 0.001 to 1000000 TFLOP/s"));
  CHECK_THAT(error_of({"--peak_tflops=0.0009"}), Contains("from 0.001 to"));
  CHECK(parse({"--peak_tflops=0.001"}).peak_tflops == Approx(0.001));
  CHECK(parse({"--peak_tflops=0"}).peak_tflops == 0);
}

TEST_CASE("the device_memory flag takes a size with its unit and is recorded in bytes", "[flags][what_fits]") {
  CHECK(parse({}).device_memory == 0);
  const RunConfig config = parse({"--device_memory=80GiB"});
  CHECK(config.device_memory == 80ull << 30);
  CHECK(config_to_json(config)["device_memory"] == 80ull << 30);
  CHECK_THAT(error_of({"--device_memory=lots"}), Contains("--device_memory=lots: accepted: a size such as 141GiB"));
  CHECK_THAT(error_of({"--device_memory=0"}), Contains("1KiB to 1PiB"));
}

TEST_CASE("a traced step past the run is out of range however many digits it has", "[flags]") {
  TemporaryDirectory dir;
  const std::string trace = "--trace_file=" + (dir.path / "t.json").string();
  for (const char* window : {"1:1000000000", "1:99999999999999999999999", "000000000000000001:1000000000000"})
    CHECK_THAT(error_of({trace, "--num_batches=5", std::string("--trace_steps=") + window}),
               Contains("measured steps are 1..5"));
  CHECK_THAT(error_of({trace, "--num_batches=5", "--num_warmup_batches=2", "--trace_steps=w1:w10000000000"}),
             Contains("warm-up steps are w1..w2"));
  CHECK_THAT(error_of({trace, "--trace_steps=1:x"}), Contains("not A:B"));
  CHECK(parse({trace, "--num_batches=5", "--trace_steps=0002:0005"}).trace_steps == "0002:0005");
}
