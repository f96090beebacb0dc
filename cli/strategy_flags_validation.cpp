// Checking the synchronisation flags: --variable_update (and the seeds' --independent_replica
// spelling), --all_reduce_spec, --local_parameter_device and the gradient-exchange options. Which
// strategy takes which option, and the rules between them, come from the strategy's description
// (strategies/strategy_registry.h); here the texts are parsed and range-checked.
#include <algorithm>

#include "cli/flag_limits.h"
#include "cli/flag_parsing.h"
#include "cli/flags_validation.h"
#include "engine/errors.h"
#include "models/model_registry.h"
#include "strategies/all_reduce_spec.h"
#include "strategies/strategy_registry.h"
#include "strategies/synchronisation_options.h"

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

// The flags that shape how gradients are exchanged, each parsed and range-checked.
void parse_exchange_flags(const GivenFlags& flags, RunConfig* config) {
  config->gradient_repacking = parse_int_at_least("gradient_repacking", flags.text("gradient_repacking"), 0,
                                                  "must be at least 0 (0: off)", kMaxGradientPieces);
  const std::string cap_text = flags.text("bucket_cap_mb");
  config->bucket_cap_mb = parse_finite_number("bucket_cap_mb", cap_text, "a number of MB >= 0, e.g. 25");
  if (const std::string why_not = why_not_bucket_cap_mb(config->bucket_cap_mb); !why_not.empty())
    reject("bucket_cap_mb", cap_text, why_not);
  const std::string tail_text = flags.text("tail_bucket_mb");
  config->tail_bucket_mb = parse_finite_number("tail_bucket_mb", tail_text, "a number of MB >= 0, e.g. 2");
  if (config->tail_bucket_mb < 0) reject("tail_bucket_mb", tail_text, "must be at least 0 (0: off)");
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
  config->hierarchical_all_reduce = parse_bool("hierarchical_all_reduce", flags.text("hierarchical_all_reduce"));
}


// "replicated or distributed_all_reduce": the strategies of one process layout, as the
// command line spells them (aliases left out), joined by `last`.
std::string strategies_with(ProcessLayout layout, const std::string& option = "") {
  std::vector<std::string> names;
  for (const StrategyEntry& entry : strategy_registry())
    if (!entry.is_alias() && entry.processes == layout && (option.empty() || entry.accepts(option)))
      names.push_back(entry.name);
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

// An option the run's strategy does not take: say which strategies of the same layout do (or,
// where none does, of the other: one process per GPU under a launcher).
[[noreturn]] void refuse_option(const GivenFlags& flags, const SynchronisationOption& option,
                                const StrategyEntry& entry, const RunConfig& config) {
  std::string takers = strategies_with(entry.processes, option.flag);
  if (takers.empty()) {
    const ProcessLayout other = entry.processes == ProcessLayout::one_process ? ProcessLayout::one_process_per_gpu
                                                                             : ProcessLayout::one_process;
    takers = strategies_with(other, option.flag);
    if (other == ProcessLayout::one_process_per_gpu) takers += " (one process per GPU, under mpirun, srun or torchrun)";
  }
  if (entry.options.empty())
    reject(option.flag, flags.text(option.flag),
           asked_strategy(config) + " exchanges no gradients; drop --" + option.flag + ", or use --variable_update=" +
               strategies_with(entry.processes, option.flag));
  reject(option.flag, flags.text(option.flag),
         "only --variable_update=" + takers + " " + option.purpose + ", and this run is " + asked_strategy(config) +
             "; drop --" + option.flag + " or use --variable_update=" + takers);
}

// The three ways to cut the gradient buffer exclude each other: N equal pieces, buckets in
// backward order, or one exchange per tensor with the small ones batched.
void check_gradient_cutting(const GivenFlags& flags, RunConfig* config) {
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
  // The tail bucket is the last of the buckets: it needs buckets, no larger than the others.
  if (config->tail_bucket_mb > 0) {
    if (config->gradient_repacking > 0 || config->bucket_cap_mb == 0)
      reject("tail_bucket_mb", flags.text("tail_bucket_mb"),
             "only matters with buckets (--bucket_cap_mb greater than 0, no --gradient_repacking or "
             "--agg_small_grads_max_bytes); drop it or use buckets");
    if (config->tail_bucket_mb > config->bucket_cap_mb)
      reject("tail_bucket_mb", flags.text("tail_bucket_mb"),
             "larger than --bucket_cap_mb=" + flags.text("bucket_cap_mb") +
                 "; the tail bucket is the last bucket cut smaller, so give at most the cap");
  }
}

}  // namespace

void resolve_strategy(const GivenFlags& flags, RunConfig* config) {
  config->independent_replica = parse_bool("independent_replica", flags.text("independent_replica"));
  config->cuda_graph = parse_bool("cuda_graph", flags.text("cuda_graph"));
  std::string strategy = flags.text("variable_update");
  if (find_strategy(strategy) == nullptr)
    reject("variable_update", strategy, "unknown strategy; accepted: " + strategy_names());
  // The seeds spell the no-exchange baseline this way (tf_cnn_benchmarks had no "independent").
  if (config->independent_replica && strategy == "replicated") strategy = "independent";
  if (config->independent_replica && strategy != "independent") {
    reject("independent_replica", flags.text("independent_replica"),
           "only meaningful with --variable_update=replicated (which it turns into independent); "
           "got --variable_update=" + strategy);
  }
  const StrategyEntry& entry = *resolve_strategy_name(strategy);
  config->variable_update = entry.name;
  if (config->forward_only && entry.family != StrategyFamily::independent)
    reject("variable_update", flags.text("variable_update"),
           "--forward_only runs no backward pass, so there are no gradients to exchange; use "
           "--variable_update=independent (the default), or drop --forward_only");

  // One process per GPU: mpirun starts the processes, each drives the GPU of its host-local rank.
  const bool per_gpu = entry.processes == ProcessLayout::one_process_per_gpu;
  if (per_gpu && config->num_devices() != 1)
    reject("num_gpus", std::to_string(config->num_devices()),
           "--variable_update=" + entry.name + " drives one GPU per process; start one process per GPU, "
           "e.g. mpirun -np " + std::to_string(config->num_devices()) + " dpbench --variable_update=" + entry.name);
  if (!per_gpu && config->num_processes > 1)
    reject("variable_update", entry.name,
           "this is one of " + std::to_string(config->num_processes) + " processes started by mpirun, which only " +
               strategies_with(ProcessLayout::one_process_per_gpu) + " use; run --variable_update=" + entry.name +
               " as one process, or pick one of those");
}

// The synchronisation options: each parsed and range-checked, each refused with a strategy whose
// description does not take it, then the strategy's own rules. Options it does not take keep
// their defaults (and are not recorded).
void resolve_exchange(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  const StrategyEntry& entry = *find_strategy(config->variable_update);
  // An empty --all_reduce_spec= means the default, as tf_cnn_benchmarks' unset spec did.
  const std::string spec_text = flags.text("all_reduce_spec");
  const AllReduceSpec spec = spec_text.empty() ? AllReduceSpec{} : parse_all_reduce_spec(spec_text);
  config->all_reduce_spec = entry.accepts("all_reduce_spec") ? spec.text() : "";
  config->local_parameter_device = flags.text("local_parameter_device");
  require_one_of("local_parameter_device", config->local_parameter_device, {"gpu", "cpu"}, "device");
  parse_exchange_flags(flags, config);
  for (const SynchronisationOption& option : synchronisation_options())
    if (flags.was_given(option.flag) && !entry.accepts(option.flag)) refuse_option(flags, option, entry, *config);
  check_gradient_cutting(flags, config);

  if (config->sparse_embedding_grads) {
    const std::vector<std::string> takers = models_with_embeddings();
    if (std::find(takers.begin(), takers.end(), model.name) == takers.end())
      reject("sparse_embedding_grads", flags.text("sparse_embedding_grads"),
             "--model=" + model.name + " has no embedding tables (only " + join(takers, " and ") +
                 " have); drop --sparse_embedding_grads");
  }
  StrategyRequest request{entry.name, *config, {}, config->precision == Precision::fp16 && config->fp16_enable_auto_loss_scale};
  for (const std::string& option : entry.options)
    if (flags.was_given(option)) request.given[option] = flags.text(option);
  entry.validate(request);
}

}  // namespace dpbench
