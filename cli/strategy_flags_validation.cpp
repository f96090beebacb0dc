// Checking the synchronisation flags: --variable_update (and the seeds' --independent_replica
// spelling), --all_reduce_spec, --local_parameter_device and the gradient-exchange options. Which
// strategy takes which option, and the rules between them, come from the strategy's description
// (strategies/strategy_registry.h), each option's values from its record
// (strategies/synchronisation_options.h); here the texts are parsed and checked against them.
#include <algorithm>
#include <type_traits>
#include <variant>

#include "cli/flag_parsing.h"
#include "cli/flags_validation.h"
#include "engine/errors.h"
#include "models/model_registry.h"
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

// "replicated or fully_sharded": the strategies that run in one process layout, as the
// command line spells them (aliases left out), joined by "or".
std::string strategies_with(ProcessLayout layout, const std::string& option = "") {
  std::vector<std::string> names;
  for (const StrategyEntry& entry : strategy_registry())
    if (!entry.is_alias() && entry.runs_in(layout) && (option.empty() || entry.accepts(option)))
      names.push_back(entry.name);
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

// The layout of the strategy's runs: its own, or, for one that runs either way, the one this run
// was started in (several processes under a launcher, or one).
ProcessLayout run_layout(const StrategyEntry& entry, const RunConfig& config) {
  if (entry.processes != ProcessLayout::either) return entry.processes;
  return config.num_processes > 1 ? ProcessLayout::one_process_per_gpu : ProcessLayout::one_process;
}

// An option the run's strategy does not take: say which strategies of the same layout do (or,
// where none does, of the other: one process per GPU under a launcher).
[[noreturn]] void refuse_option(const GivenFlags& flags, const SynchronisationOption& option,
                                const StrategyEntry& entry, const RunConfig& config) {
  const auto because = entry.refused_because.find(option.flag);
  if (because != entry.refused_because.end())
    reject(option.flag, flags.text(option.flag), asked_strategy(config) + " " + because->second);
  const ProcessLayout layout = run_layout(entry, config);
  std::string takers = strategies_with(layout, option.flag);
  if (takers.empty()) {
    const ProcessLayout other = layout == ProcessLayout::one_process ? ProcessLayout::one_process_per_gpu
                                                                     : ProcessLayout::one_process;
    takers = strategies_with(other, option.flag);
    if (other == ProcessLayout::one_process_per_gpu) takers += " (one process per GPU, under mpirun, srun or torchrun)";
  }
  if (entry.options.empty())
    reject(option.flag, flags.text(option.flag),
           asked_strategy(config) + " exchanges no gradients; drop --" + option.flag + ", or use --variable_update=" +
               strategies_with(layout, option.flag));
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

void parse_synchronisation_option(const SynchronisationOption& option, const std::string& text, StrategyOptions* options) {
  const std::string& flag = option.flag;
  std::visit(
      [&](auto member) {
        auto& field = options->*member;
        using Field = std::decay_t<decltype(field)>;
        if constexpr (std::is_same_v<Field, bool>) {
          field = parse_bool(flag, text);
        } else if constexpr (std::is_integral_v<Field>) {
          long long value = 0;
          if (!parse_integer_text(text, &value)) reject(flag, text, "not an integer; accepted: " + option.range.accepted);
          if (const std::string why_not = option.range.why_not(static_cast<double>(value)); !why_not.empty())
            reject(flag, text, why_not);
          field = static_cast<Field>(value);
        } else if constexpr (std::is_floating_point_v<Field>) {
          const double value = parse_finite_number(flag, text, option.range.accepted);
          if (const std::string why_not = option.range.why_not(value); !why_not.empty()) reject(flag, text, why_not);
          field = value;
        } else if constexpr (std::is_enum_v<Field>) {
          require_one_of(flag, text, option.choices, option.choice_kind);
          const auto chosen = std::find(option.choices.begin(), option.choices.end(), text);
          field = static_cast<Field>(chosen - option.choices.begin());
        } else {  // a text: one of its choices, or in the grammar of its own parser
          if (!option.choices.empty()) require_one_of(flag, text, option.choices, option.choice_kind);
          field = option.canonical ? option.canonical(text) : text;
        }
      },
      option.member);
}

void reset_synchronisation_option(const SynchronisationOption& option, StrategyOptions* options) {
  std::visit([&](auto member) { options->*member = StrategyOptions().*member; }, option.member);
}

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
  const bool launched = config->num_processes > 1;
  if (launched && !entry.runs_in(ProcessLayout::one_process_per_gpu))
    reject("variable_update", entry.name,
           "this is one of " + std::to_string(config->num_processes) + " processes started by mpirun, which only " +
               strategies_with(ProcessLayout::one_process_per_gpu) + " use; run --variable_update=" + entry.name +
               " as one process, or pick one of those");
  if ((entry.processes == ProcessLayout::one_process_per_gpu || launched) && config->num_devices() != 1)
    reject("num_gpus", std::to_string(config->num_devices()),
           "--variable_update=" + entry.name + " drives one GPU per process" +
               (launched ? " when a launcher starts it" : "") + "; start one process per GPU, e.g. mpirun -np " +
               std::to_string(config->num_devices() * config->num_processes) +
               " dpbench --variable_update=" + entry.name);
}

// The synchronisation options: each parsed and range-checked as its record says, each refused with
// a strategy whose description does not take it, then the strategy's own rules. Options it does
// not take keep their defaults (and are not recorded).
void resolve_exchange(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  const StrategyEntry& entry = *find_strategy(config->variable_update);
  for (const SynchronisationOption& option : synchronisation_options())
    parse_synchronisation_option(option, flags.text(option.flag), config);
  for (const SynchronisationOption& option : synchronisation_options()) {
    if (entry.accepts(option.flag)) continue;
    if (flags.was_given(option.flag)) refuse_option(flags, option, entry, *config);
    reset_synchronisation_option(option, config);  // the options it does not take keep their defaults
  }
  check_gradient_cutting(flags, config);

  if (config->sparse_embedding_grads) {
    const std::vector<std::string> takers = models_with_embeddings();
    if (std::find(takers.begin(), takers.end(), model.name) == takers.end())
      reject("sparse_embedding_grads", flags.text("sparse_embedding_grads"),
             "--model=" + model.name + " has no embedding tables (only " + join(takers, " and ") +
                 " have); drop --sparse_embedding_grads");
  }
  StrategyRequest request{entry.name, *config, {}, config->precision == Precision::fp16 && config->fp16_enable_auto_loss_scale,
                          config->num_devices() * config->num_processes};
  for (const std::string& option : entry.options)
    if (flags.was_given(option)) request.given[option] = flags.text(option);
  entry.validate(request);
}

}  // namespace dpbench
