// Checking the synchronisation flags: --variable_update (and the seeds' --independent_replica
// spelling), --all_reduce_spec, --local_parameter_device and the gradient-exchange options, each
// accepted only with the strategies that use it and only in combinations that say one thing.
#include <algorithm>

#include "cli/flag_limits.h"
#include "cli/flag_parsing.h"
#include "cli/flags_validation.h"
#include "engine/errors.h"
#include "models/model_registry.h"
#include "strategies/all_reduce_spec.h"
#include "strategies/strategy_registry.h"

namespace dpbench {
namespace {

// The strategy as the command line asked for it, naming the seeds' spelling where that was used.
std::string asked_strategy(const RunConfig& config) {
  if (config.variable_update == "independent" && config.independent_replica)
    return "--variable_update=replicated --independent_replica=true (independent)";
  return "--variable_update=" + config.variable_update;
}

// The models with embedding tables are those that take --embedding_dim (nmt, rnnlm).
std::vector<std::string> models_with_embeddings() {
  std::vector<std::string> names;
  for (const ModelEntry& entry : model_registry())
    for (const auto& flag : entry.sequence_flags)
      if (flag.first == "embedding_dim") names.push_back(entry.name);
  return names;
}

// Megabytes beyond this are a typo, and their byte count would not fit the exchange planner.
constexpr double kMaxBucketCapMb = 1 << 20;  // 1 TiB

// The flags that shape how gradients are exchanged, each parsed and range-checked.
void parse_exchange_flags(const GivenFlags& flags, RunConfig* config) {
  config->gradient_repacking = parse_int_at_least("gradient_repacking", flags.text("gradient_repacking"), 0,
                                                  "must be at least 0 (0: off)", kMaxGradientPieces);
  const std::string cap_text = flags.text("bucket_cap_mb");
  config->bucket_cap_mb = parse_finite_number("bucket_cap_mb", cap_text, "a number of MB >= 0, e.g. 25");
  if (config->bucket_cap_mb < 0)
    reject("bucket_cap_mb", cap_text, "must be at least 0 (0: one exchange per tensor)");
  if (config->bucket_cap_mb > kMaxBucketCapMb)
    reject("bucket_cap_mb", cap_text, "too large; accepted: up to 1048576 (1 TiB)");
  const std::string bytes_text = flags.text("agg_small_grads_max_bytes");
  long long bytes = 0;
  if (!parse_integer_text(bytes_text, &bytes))
    reject("agg_small_grads_max_bytes", bytes_text,
           "not an integer; accepted: a number of bytes >= 0 (0: off)");
  if (bytes < 0) reject("agg_small_grads_max_bytes", bytes_text, "must be at least 0 (0: off)");
  if (bytes > kMaxAggregatedBytes)
    reject("agg_small_grads_max_bytes", bytes_text, "too large; accepted: up to " + std::to_string(kMaxAggregatedBytes));
  config->agg_small_grads_max_bytes = bytes;
  config->agg_small_grads_max_group = parse_int_at_least(
      "agg_small_grads_max_group", flags.text("agg_small_grads_max_group"), 1, "must be at least 1", kMaxGradientPieces);
  config->overlap_comm = parse_bool("overlap_comm", flags.text("overlap_comm"));
  config->sparse_embedding_grads =
      parse_bool("sparse_embedding_grads", flags.text("sparse_embedding_grads"));
  const std::string compact = flags.text("compact_gradient_transfer");
  require_one_of("compact_gradient_transfer", compact, {"none", "fp16", "bf16"}, "transfer type");
  config->compact_gradient_transfer = compact == "none" ? "" : compact;
  config->sharded_update = parse_bool("sharded_update", flags.text("sharded_update"));
}

}  // namespace

void resolve_strategy(const GivenFlags& flags, RunConfig* config) {
  config->independent_replica = parse_bool("independent_replica", flags.text("independent_replica"));
  config->cuda_graph = parse_bool("cuda_graph", flags.text("cuda_graph"));
  std::string strategy = flags.text("variable_update");
  const StrategyEntry* entry = find_strategy(strategy);
  if (entry == nullptr) {
    reject("variable_update", strategy,
           "unknown strategy; accepted: " + describe_choices(strategy_registry(), false));
  }
  // The seeds spell the no-exchange baseline this way (tf_cnn_benchmarks had no "independent").
  if (config->independent_replica && strategy == "replicated") strategy = "independent";
  if (config->independent_replica && strategy != "independent") {
    reject("independent_replica", flags.text("independent_replica"),
           "only meaningful with --variable_update=replicated (which it turns into independent); "
           "got --variable_update=" + strategy);
  }
  entry = find_strategy(strategy);
  if (entry == nullptr || !entry->implemented) {
    reject("variable_update", strategy,
           "not implemented yet; accepted now: " + describe_choices(strategy_registry(), true) +
               " (or the seeds' spelling --variable_update=replicated --independent_replica=true)");
  }
  if (strategy == "horovod") strategy = "distributed_all_reduce";  // tf_cnn_benchmarks' spelling
  config->variable_update = strategy;

  // One process per GPU: mpirun starts the processes, each drives the GPU of its host-local rank.
  const bool distributed = strategy == "distributed_all_reduce" || strategy == "distributed_replicated";
  if (distributed && config->num_devices() != 1)
    reject("num_gpus", std::to_string(config->num_devices()),
           "--variable_update=" + strategy + " drives one GPU per process; start one process per GPU, "
           "e.g. mpirun -np " + std::to_string(config->num_devices()) + " dpbench --variable_update=" + strategy);
  if (!distributed && config->num_processes > 1)
    reject("variable_update", strategy,
           "this is one of " + std::to_string(config->num_processes) + " processes started by mpirun, which only "
           "distributed_all_reduce (horovod) and distributed_replicated use; run --variable_update=" + strategy +
           " as one process, or pick a distributed strategy");
}

bool is_all_reduce_strategy(const std::string& strategy) {
  return strategy == "replicated" || strategy == "distributed_all_reduce";
}

bool is_parameter_server_strategy(const std::string& strategy) {
  return strategy == "parameter_server" || strategy == "distributed_replicated";
}

// --all_reduce_spec, --local_parameter_device and the exchange flags: each only with the strategies
// that use it, and only in combinations that say one thing.
void resolve_exchange(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  const std::string& strategy = config->variable_update;
  const bool replicated = is_all_reduce_strategy(strategy);
  const bool distributed = strategy.rfind("distributed_", 0) == 0;
  auto only_with = [&](const std::string& flag, const std::string& needed, const std::string& what) {
    reject(flag, flags.text(flag),
           "only --variable_update=" + needed + " " + what + ", and this run is " + asked_strategy(*config) +
               "; drop --" + flag + " or use --variable_update=" + needed);
  };

  // An empty --all_reduce_spec= means the default, as tf_cnn_benchmarks' unset spec did.
  const std::string spec_text = flags.text("all_reduce_spec");
  const AllReduceSpec spec = spec_text.empty() ? AllReduceSpec{} : parse_all_reduce_spec(spec_text);
  if (!spec_text.empty() && !replicated) only_with("all_reduce_spec", "replicated", "takes an all-reduce spec");
  if (distributed && spec.algorithm != "nccl")
    reject("all_reduce_spec", spec_text,
           "--variable_update=" + strategy + " moves every gradient byte with NCCL across the processes; "
           "use nccl or nccl#k (peer copies and host sums need the GPUs in one process: --variable_update=replicated)");
  config->all_reduce_spec = replicated ? spec.text() : "";

  config->local_parameter_device = flags.text("local_parameter_device");
  require_one_of("local_parameter_device", config->local_parameter_device, {"gpu", "cpu"}, "device");
  if (flags.was_given("local_parameter_device") && !is_parameter_server_strategy(strategy))
    only_with("local_parameter_device", "parameter_server", "keeps a master copy");
  if (distributed && config->local_parameter_device != "gpu")
    reject("local_parameter_device", config->local_parameter_device,
           "--variable_update=distributed_replicated keeps the master copy sharded over the ranks' GPUs; "
           "use gpu, or --variable_update=parameter_server in one process");

  parse_exchange_flags(flags, config);
  if (strategy == "independent") {
    for (const char* flag : {"gradient_repacking", "bucket_cap_mb", "agg_small_grads_max_bytes",
                             "agg_small_grads_max_group", "overlap_comm", "sparse_embedding_grads",
                             "compact_gradient_transfer", "sharded_update"})
      if (flags.was_given(flag))
        reject(flag, flags.text(flag),
               asked_strategy(*config) + " exchanges no gradients; drop --" + flag +
                   ", or use --variable_update=replicated or parameter_server");
  }

  auto given = [&](const char* flag) { return "--" + std::string(flag) + "=" + flags.text(flag); };
  if (config->gradient_repacking > 0 && flags.was_given("bucket_cap_mb"))
    throw ConfigError(given("gradient_repacking") + " with " + given("bucket_cap_mb") +
                      ": choose one way to cut the gradients, N equal pieces or buckets in backward "
                      "order; drop one of the two flags");
  if (config->gradient_repacking > 0 && config->agg_small_grads_max_bytes > 0)
    throw ConfigError(given("gradient_repacking") + " with " + given("agg_small_grads_max_bytes") +
                      ": choose one way to cut the gradients, N equal pieces or one exchange per tensor "
                      "(small ones batched); drop one of the two flags");
  if (config->agg_small_grads_max_bytes > 0) {
    if (flags.was_given("bucket_cap_mb") && config->bucket_cap_mb > 0)
      throw ConfigError(given("agg_small_grads_max_bytes") + " with " + given("bucket_cap_mb") +
                        ": small tensors are batched only when every tensor is exchanged on its own; "
                        "use --bucket_cap_mb=0 (or leave it out)");
    config->bucket_cap_mb = 0;  // batching small tensors means the per-tensor mode
  }
  if (flags.was_given("agg_small_grads_max_group") && config->agg_small_grads_max_bytes == 0)
    reject("agg_small_grads_max_group", flags.text("agg_small_grads_max_group"),
           "only matters with --agg_small_grads_max_bytes greater than 0; give that too, or drop this");

  if (!config->compact_gradient_transfer.empty()) {
    if (!replicated) only_with("compact_gradient_transfer", "replicated", "sends gradients at half width");
    if (spec.algorithm == "xring")
      throw ConfigError(given("compact_gradient_transfer") + " with " + given("all_reduce_spec") +
                        ": a ring forwards partial sums, which would be rounded to half width at every "
                        "hop; use --all_reduce_spec=nccl, psgpu or pscpu");
  }
  if (config->sparse_embedding_grads) {
    const std::vector<std::string> takers = models_with_embeddings();
    if (std::find(takers.begin(), takers.end(), model.name) == takers.end())
      reject("sparse_embedding_grads", flags.text("sparse_embedding_grads"),
             "--model=" + model.name + " has no embedding tables (only " + join(takers, " and ") +
                 " have); drop --sparse_embedding_grads");
    if (!replicated) only_with("sparse_embedding_grads", "replicated", "gathers sparse embedding gradients");
  }

  if (config->sharded_update) {
    if (!replicated) only_with("sharded_update", "replicated", "shards the update of its replicas");
    if (spec.algorithm != "nccl")
      throw ConfigError(given("sharded_update") + " with " + given("all_reduce_spec") +
                        ": the shards travel by NCCL's reduce-scatter and all-gather, which only the nccl "
                        "spec uses; use --all_reduce_spec=nccl (or nccl#k), or drop --sharded_update");
    if (!config->compact_gradient_transfer.empty())
      throw ConfigError(given("sharded_update") + " with " + given("compact_gradient_transfer") +
                        ": a sharded update all-gathers fp32 parameters, not gradients, so there is nothing "
                        "to send at half width; drop one of the two flags");
    if (config->sparse_embedding_grads)
      throw ConfigError(given("sharded_update") + " with " + given("sparse_embedding_grads") +
                        ": every replica needs the whole table gradient to gather touched rows, while a "
                        "sharded update leaves each with 1/N of it; drop one of the two flags");
    if (config->precision == "fp16" && config->fp16_enable_auto_loss_scale)
      throw ConfigError(given("sharded_update") + " with " + given("fp16_enable_auto_loss_scale") +
                        ": each shard's owner would decide alone whether to skip a step, so the replicas "
                        "would diverge; use a fixed --fp16_loss_scale, or drop --sharded_update");
  }

  if (is_parameter_server_strategy(strategy) && config->precision == "fp16" && config->fp16_enable_auto_loss_scale)
    throw ConfigError(given("fp16_enable_auto_loss_scale") + " with --variable_update=parameter_server: each "
                      "owner would decide alone whether to skip a step, so the replicas would diverge; "
                      "use a fixed --fp16_loss_scale, or --variable_update=replicated");
}

}  // namespace dpbench
