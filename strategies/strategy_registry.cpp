// The strategies' table (see strategy_registry.h): each entry's family, options, rules, sweep
// token and factory.
#include "strategies/strategy_registry.h"

#include <algorithm>
#include <stdexcept>

#include "engine/errors.h"
#include "strategies/all_reduce_spec.h"
#include "strategies/exchange_meter.h"
#include "strategies/fully_sharded.h"
#include "strategies/independent.h"
#include "strategies/parameter_server.h"
#include "strategies/replicated.h"
#include "strategies/synchronisation_options.h"

namespace dpbench {
namespace {

// How the gradient buffer is cut and when it travels: what every exchanging strategy takes.
const std::vector<std::string> kCuttingOptions = {"gradient_repacking", "bucket_cap_mb", "tail_bucket_mb",
                                                  "agg_small_grads_max_bytes", "agg_small_grads_max_group",
                                                  "overlap_comm"};

std::vector<std::string> with_cutting(std::vector<std::string> options) {
  options.insert(options.end(), kCuttingOptions.begin(), kCuttingOptions.end());
  return options;
}


// Note [owners decide alone]: with automatic loss scaling a step is skipped when any gradient
// overflows; where each owner of a part of the parameters decides for its part only (a parameter
// server's owners, a sharded update's shard owners), the replicas would skip different steps and
// diverge. Both refuse it. (fully_sharded's owners agree first, through their shard group.)

void validate_all_reduce(const StrategyRequest& request) {
  const StrategyOptions& options = request.options;
  const AllReduceSpec spec = parse_all_reduce_spec(options.all_reduce_spec);
  const std::string spec_flag = "--all_reduce_spec=" + spec.text();
  if (options.compact_gradient_transfer != TransferWidth::full && spec.algorithm == AllReduceAlgorithm::xring)
    throw ConfigError(request.typed("compact_gradient_transfer") + " with " + spec_flag +
                      ": a ring forwards partial sums, which would be rounded to half width at every "
                      "hop; use --all_reduce_spec=nccl, psgpu or pscpu");
  // The touched rows and the shards travel through the communicator, which only nccl creates.
  if (options.sparse_embedding_grads && spec.algorithm != AllReduceAlgorithm::nccl)
    throw ConfigError(request.typed("sparse_embedding_grads") + " with " + spec_flag +
                      ": the touched embedding rows are all-gathered through NCCL, which only the nccl "
                      "spec uses; use --all_reduce_spec=nccl (or nccl#k), or drop --sparse_embedding_grads");
  if (!options.sharded_update) return;
  if (spec.algorithm != AllReduceAlgorithm::nccl)
    throw ConfigError(request.typed("sharded_update") + " with " + spec_flag +
                      ": the shards travel by NCCL's reduce-scatter and all-gather, which only the nccl "
                      "spec uses; use --all_reduce_spec=nccl (or nccl#k), or drop --sharded_update");
  if (options.compact_gradient_transfer != TransferWidth::full)
    throw ConfigError(request.typed("sharded_update") + " with " + request.typed("compact_gradient_transfer") +
                      ": a sharded update all-gathers fp32 parameters, not gradients, so there is nothing "
                      "to send at half width; drop one of the two flags");
  if (options.sparse_embedding_grads)
    throw ConfigError(request.typed("sharded_update") + " with " + request.typed("sparse_embedding_grads") +
                      ": every replica needs the whole table gradient to gather touched rows, while a "
                      "sharded update leaves each with 1/N of it; drop one of the two flags");
  if (request.automatic_loss_scale)  // Note [owners decide alone]
    throw ConfigError(request.typed("sharded_update") + " with --fp16_enable_auto_loss_scale=true: each shard's "
                      "owner would decide alone whether to skip a step, so the replicas would diverge; use a "
                      "fixed --fp16_loss_scale, or drop --sharded_update");
}

void validate_parameter_server(const StrategyRequest& request) {
  if (request.automatic_loss_scale)  // Note [owners decide alone]
    throw ConfigError("--fp16_enable_auto_loss_scale=true with --variable_update=" + request.strategy +
                      ": each owner would decide alone whether to skip a step, so the replicas would diverge; "
                      "use a fixed --fp16_loss_scale, or --variable_update=replicated");
}

// The hierarchy is its own exchange: the other ways a range can travel are refused beside it.
void validate_hierarchical(const StrategyRequest& request) {
  const StrategyOptions& options = request.options;
  if (!options.hierarchical_all_reduce) return;
  const std::pair<const char*, bool> others[] = {{"compact_gradient_transfer", options.compact_gradient_transfer != TransferWidth::full},
                                                 {"sparse_embedding_grads", options.sparse_embedding_grads},
                                                 {"sharded_update", options.sharded_update}};
  for (const auto& [other, given] : others)
    if (given)
      throw ConfigError("--hierarchical_all_reduce with " + request.typed(other) +
                        ": the hierarchy all-reduces fp32 gradients in three phases of its own; drop one of the two flags");
}

// Across processes every gradient byte moves by NCCL; our own algorithms need one process.
void validate_distributed_all_reduce(const StrategyRequest& request) {
  const std::string& spec = request.options.all_reduce_spec;
  if (parse_all_reduce_spec(spec).algorithm != AllReduceAlgorithm::nccl)
    throw ConfigError("--all_reduce_spec=" + spec + " with --variable_update=distributed_all_reduce: it moves "
                      "every gradient byte with NCCL across the processes; use nccl or nccl#k (peer copies "
                      "and host sums need the GPUs in one process: --variable_update=replicated)");
  validate_all_reduce(request);
  validate_hierarchical(request);
}

void validate_distributed_replicated(const StrategyRequest& request) {
  if (request.options.local_parameter_device != "gpu")
    throw ConfigError("--local_parameter_device=" + request.options.local_parameter_device +
                      " with --variable_update=distributed_replicated: it keeps the master copy sharded over "
                      "the ranks' GPUs; use gpu, or --variable_update=parameter_server in one process");
  validate_parameter_server(request);
}

// fully_sharded's rules. The sparse and compact ways of exchanging gradients belong to
// whole-replica exchanges (a unit's rows are spread over its owners, and --reduce_precision is
// its half-width reduction): it does not take them, and says why (its entry's refused_because).
void validate_fully_sharded(const StrategyRequest& request) {
  const StrategyOptions& options = request.options;
  const int k = options.shard_group_size;
  if (k > 0 && (k > request.world_devices || request.world_devices % k != 0))
    throw ConfigError(request.typed("shard_group_size") + ": does not cut the " + std::to_string(request.world_devices) +
                      " devices into equal groups; give a divisor of " + std::to_string(request.world_devices) +
                      " (0: one group of every device)");
}

// Each entry's options in the table's order, so that listings, records and labels agree.
std::vector<StrategyEntry> in_option_order(std::vector<StrategyEntry> entries) {
  for (StrategyEntry& entry : entries) {
    std::vector<std::string> ordered;
    for (const SynchronisationOption& option : synchronisation_options())
      if (entry.accepts(option.flag)) ordered.push_back(option.flag);
    if (ordered.size() != entry.options.size())
      throw std::logic_error("strategy " + entry.name + " names an option the table does not have");
    entry.options = std::move(ordered);
  }
  return entries;
}

std::vector<StrategyEntry> make_registry() {
  auto nothing_to_check = [](const StrategyRequest&) {};
  auto replicated = [](const StrategyOptions& options, const DevicePlacement& placement) {
    return std::make_unique<ReplicatedStrategy>(options, placement);
  };
  auto parameter_server = [](const StrategyOptions& options, const DevicePlacement& placement) {
    return std::make_unique<ParameterServerStrategy>(options, placement);
  };
  const std::vector<std::string> all_reduce_options = with_cutting(
      {"all_reduce_spec", "compact_gradient_transfer", "sparse_embedding_grads", "sharded_update"});
  // The bucket plan's strategies have no use for the model's units.
  const auto replicated_schedule = [](const StrategyOptions& options, const ParameterLayout& layout,
                                      const std::vector<GradientRange>& plan, const ScheduleShape& shape,
                                      const ParameterUnits&) {
    return ReplicatedStrategy::schedule_for(options, layout, plan, shape);
  };
  const auto parameter_server_schedule = [](const StrategyOptions& options, const ParameterLayout& layout,
                                            const std::vector<GradientRange>& plan, const ScheduleShape& shape,
                                            const ParameterUnits&) {
    return ParameterServerStrategy::schedule_for(options, layout, plan, shape);
  };
  const auto replicated_memory = [](const StrategyOptions& options, const ParameterLayout& layout,
                                    const std::vector<GradientRange>& plan, const ScheduleShape& shape,
                                    const ParameterUnits&) {
    return ReplicatedStrategy::memory_for(options, layout, plan, shape);
  };
  const auto parameter_server_memory = [](const StrategyOptions& options, const ParameterLayout& layout,
                                          const std::vector<GradientRange>& plan, const ScheduleShape& shape,
                                          const ParameterUnits&) {
    return ParameterServerStrategy::memory_for(options, layout, plan, shape);
  };
  auto independent_memory = [](const StrategyOptions&, const ParameterLayout&, const std::vector<GradientRange>&,
                               const ScheduleShape&, const ParameterUnits&) {
    StrategyMemory memory;
    memory.rule = "every device holds a whole replica; nothing is exchanged";
    return memory;
  };
  const std::vector<std::string> fully_sharded_options = {"prefetch_units", "reshard_after_forward",
                                                          "shard_weight_copy", "reduce_precision",
                                                          "shard_group_size"};
  // The whole-replica ways of exchanging gradients, which a unit's owners have no use for.
  const std::map<std::string, std::string> fully_sharded_refusals = {
      {"compact_gradient_transfer",
       "reduce-scatters each unit's gradients to its owners, and --reduce_precision=bf16 is its half-width "
       "reduction; drop --compact_gradient_transfer and give that instead, or use --variable_update=replicated"},
      {"sparse_embedding_grads",
       "reduce-scatters each unit's gradients to its owners, so an embedding table's touched rows have no one "
       "device to be gathered on; drop --sparse_embedding_grads, or use --variable_update=replicated"},
  };
  std::vector<std::string> distributed_all_reduce_options = all_reduce_options;
  distributed_all_reduce_options.push_back("hierarchical_all_reduce");
  return {
      {"independent", "every replica updates from its own gradients; nothing is exchanged",
       StrategyFamily::independent, ProcessLayout::one_process, "", {}, "", nothing_to_check,
       [](const StrategyOptions&, const DevicePlacement&) { return std::make_unique<IndependentStrategy>(); },
       nullptr, independent_memory, "", {}},
      {"parameter_server", "one master copy on the GPUs or the CPU", StrategyFamily::parameter_server,
       ProcessLayout::one_process, "", with_cutting({"local_parameter_device"}), "local_parameter_device",
       validate_parameter_server, parameter_server, parameter_server_schedule, parameter_server_memory, "", {}},
      {"replicated", "every device holds a copy; gradients are all-reduced", StrategyFamily::all_reduce,
       ProcessLayout::one_process, "", all_reduce_options, "all_reduce_spec", validate_all_reduce, replicated,
       replicated_schedule, replicated_memory, "", {}},
      {"distributed_all_reduce", "one process per GPU (mpirun, srun, torchrun); gradients all-reduced with NCCL",
       StrategyFamily::all_reduce, ProcessLayout::one_process_per_gpu, "", distributed_all_reduce_options, "",
       validate_distributed_all_reduce, replicated, replicated_schedule, replicated_memory, "replicated", {}},
      {"distributed_replicated",
       "parameter server across processes (mpirun, srun, torchrun): NCCL reduce to the owner, broadcast back",
       StrategyFamily::parameter_server, ProcessLayout::one_process_per_gpu, "",
       with_cutting({"local_parameter_device"}), "", validate_distributed_replicated, parameter_server,
       parameter_server_schedule, parameter_server_memory, "parameter_server", {}},
      {"fully_sharded",
       "each device keeps 1/N of every unit's parameters, gradients and optimizer state (ZeRO-3, FSDP); units "
       "all-gathered before use, gradients reduce-scattered",
       StrategyFamily::fully_sharded, ProcessLayout::either, "", fully_sharded_options, "", validate_fully_sharded,
       [](const StrategyOptions& options, const DevicePlacement& placement) {
         return std::make_unique<FullyShardedStrategy>(options, placement);
       },
       FullyShardedStrategy::step_schedule, FullyShardedStrategy::memory_for, "", fully_sharded_refusals},
      {"horovod", "tf_cnn_benchmarks' spelling of distributed_all_reduce", StrategyFamily::all_reduce,
       ProcessLayout::one_process_per_gpu, "distributed_all_reduce", {}, "", nothing_to_check, nullptr, nullptr, nullptr,
       "", {}},
  };
}

}  // namespace

const char* family_name(StrategyFamily family) {
  switch (family) {
    case StrategyFamily::independent: return "independent";
    case StrategyFamily::parameter_server: return "parameter server";
    case StrategyFamily::all_reduce: return "all-reduce";
    case StrategyFamily::fully_sharded: return "fully sharded";
  }
  return "?";
}

std::string StrategyRequest::typed(const std::string& flag) const {
  const auto found = given.find(flag);
  if (found != given.end()) return "--" + flag + "=" + found->second;
  const SynchronisationOption* option = find_synchronisation_option(flag);
  return "--" + flag + (option ? "=" + option_text(option->recorded(options)) : "");
}

bool StrategyEntry::accepts(const std::string& option) const {
  return std::find(options.begin(), options.end(), option) != options.end();
}

const std::vector<StrategyEntry>& strategy_registry() {
  static const std::vector<StrategyEntry> entries = in_option_order(make_registry());
  return entries;
}

const StrategyEntry* find_strategy(const std::string& name) {
  for (const StrategyEntry& entry : strategy_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

const StrategyEntry* resolve_strategy_name(const std::string& name) {
  const StrategyEntry* entry = find_strategy(name);
  return entry != nullptr && entry->is_alias() ? find_strategy(entry->alias_of) : entry;
}

std::string strategy_names() {
  std::string text;
  for (const StrategyEntry& entry : strategy_registry())
    text += (text.empty() ? "" : ", ") + entry.name + (entry.is_alias() ? " (= " + entry.alias_of + ")" : "");
  return text;
}

std::string sweep_token_form(const StrategyEntry& entry) {
  if (entry.token_option.empty()) return entry.name;
  std::string value = entry.token_option == "all_reduce_spec" ? "SPEC" : "DEVICE";
  return entry.name + "[:" + value + "]";
}

std::vector<std::string> flags_of_sweep_token(const std::string& token) {
  const size_t colon = token.find(':');
  const std::string name = token.substr(0, colon);
  const StrategyEntry* entry = find_strategy(name);
  auto forms = [] {
    std::string text;
    for (const StrategyEntry& e : strategy_registry()) text += (text.empty() ? "" : ", ") + sweep_token_form(e);
    return text;
  };
  if (entry == nullptr)
    throw ConfigError("strategy token '" + token + "': unknown strategy '" + name + "'; accepted: " + forms());
  std::vector<std::string> flags = {"--variable_update=" + name};
  if (colon == std::string::npos) return flags;
  const std::string value = token.substr(colon + 1);
  if (entry->token_option.empty())
    throw ConfigError("strategy token '" + token + "': " + name + " takes no ':VALUE' (" + sweep_token_form(*entry) +
                      "); give its options as +--flag=value");
  if (entry->token_option == "all_reduce_spec") {
    try {
      parse_all_reduce_spec(value);
    } catch (const ConfigError& error) {
      throw ConfigError("strategy token '" + token + "': " + error.what());
    }
  } else if (value != "gpu" && value != "cpu") {
    throw ConfigError("strategy token '" + token + "': '" + value + "' is not a parameter device; accepted: gpu, cpu");
  }
  flags.push_back("--" + entry->token_option + "=" + value);
  return flags;
}

const std::vector<PredictedVariant>& predicted_variants() {
  static const std::vector<PredictedVariant> variants = {
      {"replicated", [](StrategyOptions&) {}},
      {"replicated", [](StrategyOptions& o) { o.overlap_comm = false; }},
      {"replicated", [](StrategyOptions& o) { o.compact_gradient_transfer = TransferWidth::fp16; }},
      {"replicated", [](StrategyOptions& o) { o.sharded_update = true; }},
      {"distributed_all_reduce", [](StrategyOptions& o) { o.hierarchical_all_reduce = true; }},
      {"fully_sharded", [](StrategyOptions&) {}},
      {"fully_sharded", [](StrategyOptions& o) { o.reshard_after_forward = false; }},
      {"fully_sharded", [](StrategyOptions& o) { o.prefetch_units = 2; }},
      {"parameter_server", [](StrategyOptions& o) { o.local_parameter_device = "gpu"; }},
      {"parameter_server", [](StrategyOptions& o) { o.local_parameter_device = "cpu"; }},
  };
  return variants;
}

StrategyOptions options_of(const PredictedVariant& variant) {
  StrategyOptions options;
  variant.options(options);
  return options;
}

std::vector<std::string> predicted_variant_labels() {
  std::vector<std::string> labels;
  for (const PredictedVariant& variant : predicted_variants())
    labels.push_back(strategy_label(variant.strategy, recorded_options(variant.strategy, options_of(variant)), false));
  return labels;
}

OptionTexts recorded_options(const std::string& strategy, const StrategyOptions& options) {
  OptionTexts texts;
  const StrategyEntry* entry = resolve_strategy_name(strategy);
  for (const SynchronisationOption& option : synchronisation_options())
    if (entry != nullptr && entry->accepts(option.flag)) texts[option.flag] = option_text(option.recorded(options));
  return texts;
}

std::string strategy_label(const std::string& strategy, const OptionTexts& options, bool every_option) {
  const StrategyEntry* entry = resolve_strategy_name(strategy);
  std::vector<std::string> words;
  for (const SynchronisationOption& option : synchronisation_options()) {
    // A strategy this build does not know (a newer result) is described by what it recorded.
    const bool taken = entry != nullptr ? entry->accepts(option.flag) : options.count(option.flag) > 0;
    if (!taken) continue;
    std::string word = option.label(options, every_option);
    if (!word.empty()) words.push_back(std::move(word));
  }
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "" : ", ") + word;
  return text.empty() ? strategy : strategy + " (" + text + ")";
}

}  // namespace dpbench
