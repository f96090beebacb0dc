// The synchronisation options' table (see synchronisation_options.h).
#include "strategies/synchronisation_options.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "strategies/all_reduce_spec.h"

namespace dpbench {
namespace {

// The largest values the counts and sizes take: far beyond any real run, yet small enough that
// what they size cannot exhaust a machine (cli/flag_limits.h holds the other flags' limits).
constexpr int kMaxGradientPieces = 65536;  // --gradient_repacking, --agg_small_grads_max_group
constexpr long long kMaxAggregatedBytes = 1LL << 40;
// --bucket_cap_mb: more megabytes are a typo, and their byte count would not fit the exchange
// planner (past about 9e12 it wraps round to a small cap).
constexpr double kMaxBucketCapMb = 1 << 20;  // 1 TiB

std::string text_of(const OptionTexts& options, const std::string& flag) {
  const auto found = options.find(flag);
  return found == options.end() ? std::string() : found->second;
}

double number_of(const OptionTexts& options, const std::string& flag) {
  return std::strtod(text_of(options, flag).c_str(), nullptr);
}

// The same value, whether written as 25, 25.0 or "25".
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  return !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && std::isfinite(x) && x == y;
}

bool is_default(const OptionTexts& options, const std::string& flag) {
  const SynchronisationOption* option = find_synchronisation_option(flag);
  return option != nullptr && same_value(text_of(options, flag), option->default_text());
}

// How the gradient buffer is cut into exchanges: N pieces, buckets, or per tensor (small ones
// batched); the flags exclude each other, so one of them speaks for all three.
std::string repacking_label(const OptionTexts& o, bool every) {
  const std::string pieces = text_of(o, "gradient_repacking");
  if (pieces.empty() || pieces == "0") return "";
  if (!every) return "repacking " + pieces;
  return "repacked into " + pieces + (pieces == "1" ? " piece" : " pieces");
}

std::string bucket_label(const OptionTexts& o, bool every) {
  if (!every) return is_default(o, "bucket_cap_mb") || text_of(o, "bucket_cap_mb").empty()
                         ? ""
                         : fmt::format("bucket {:g} MB", number_of(o, "bucket_cap_mb"));
  if (number_of(o, "gradient_repacking") > 0 || number_of(o, "agg_small_grads_max_bytes") > 0) return "";
  const double megabytes = number_of(o, "bucket_cap_mb");
  return megabytes > 0 ? fmt::format("buckets of {:g} MB", megabytes) : "per tensor";
}

std::string small_gradients_label(const OptionTexts& o, bool every) {
  const std::string bytes = text_of(o, "agg_small_grads_max_bytes"), group = text_of(o, "agg_small_grads_max_group");
  if (bytes.empty() || bytes == "0") return "";
  return every ? "per tensor, small ones batched (up to " + bytes + " bytes, " + group + " per batch)"
               : "small grads <= " + bytes + " B in groups of " + group;
}

// A label that names a value only when it is not the default: `words` of the value.
template <typename Words>
auto when_changed(std::string flag, Words words) {
  return [flag, words](const OptionTexts& o, bool every) -> std::string {
    const std::string value = text_of(o, flag);
    if (value.empty() || (!every && is_default(o, flag))) return "";
    return words(value);
  };
}

// "must be at least 0 (0: off)" and no maximum: a number option's range.
OptionRange at_least(double minimum, std::string accepted, std::string below) {
  return {minimum, std::numeric_limits<double>::infinity(), std::move(accepted), std::move(below), ""};
}

OptionRange up_to(OptionRange range, double maximum, const std::string& shown) {
  range.maximum = maximum;
  range.above = "too large; accepted: up to " + shown;
  return range;
}

std::string all_reduce_choices() {
  std::string text;
  for (const AllReduceAlgorithmName& entry : all_reduce_algorithms())
    text += (text.empty() ? "" : ", ") + std::string(entry.name) + " (" + entry.description + ")";
  return text;
}

// The records, in the order labels and report keys list them. Each row: flag and field, value
// hint, help, purpose (for the refusal elsewhere), then what the values are and the label.
std::vector<SynchronisationOption> make_options() {
  auto none = [](const OptionTexts&, bool) { return std::string(); };
  auto option = [](std::string flag, OptionMember member, std::string hint, std::string help, std::string purpose) {
    SynchronisationOption record;
    record.flag = std::move(flag);
    record.member = member;
    record.value_hint = std::move(hint);
    record.help = std::move(help);
    record.purpose = std::move(purpose);
    return record;
  };
  std::vector<SynchronisationOption> options;

  SynchronisationOption spec = option("all_reduce_spec", &StrategyOptions::all_reduce_spec, "SPEC",
                                      "How the gradients are all-reduced: " + all_reduce_choices() +
                                          "; ALG#k splits every exchange into k shards, e.g. nccl#2",
                                      "takes an all-reduce spec");
  spec.canonical = [](const std::string& text) {
    return parse_all_reduce_spec(text).text();
  };
  // Resolved for the strategies that take it; empty (not taken) reads as the default.
  spec.recorded_as = [](const StrategyOptions& c) {
    return nlohmann::json(c.all_reduce_spec.empty() ? AllReduceSpec{}.text() : c.all_reduce_spec);
  };
  spec.label = [](const OptionTexts& o, bool every) {
    const std::string text = text_of(o, "all_reduce_spec");
    return text.empty() ? text : every ? "all-reduce " + text : text;
  };
  options.push_back(std::move(spec));

  SynchronisationOption device =
      option("local_parameter_device", &StrategyOptions::local_parameter_device, "",
             "Where the master copy lives: gpu (its tensors spread over the GPUs) or cpu (host memory)",
             "keeps a master copy");
  device.choices = {"gpu", "cpu"};
  device.choice_kind = "device";
  device.label = [](const OptionTexts& o, bool every) {
    const std::string text = text_of(o, "local_parameter_device");
    return text.empty() ? text : every ? "on " + text : text;
  };
  options.push_back(std::move(device));

  SynchronisationOption repacking = option("gradient_repacking", &StrategyOptions::gradient_repacking, "N",
                                           "Exchange the whole gradient buffer as N equal pieces (0: off)",
                                           "cuts the gradients into pieces");
  repacking.range = up_to(at_least(0, "an integer >= 0", "must be at least 0 (0: off)"), kMaxGradientPieces,
                          std::to_string(kMaxGradientPieces));
  repacking.label = repacking_label;
  options.push_back(std::move(repacking));

  SynchronisationOption cap = option(
      "bucket_cap_mb", &StrategyOptions::bucket_cap_mb, "X",
      "Exchange the gradients in buckets of about X MB, filled in the order backward produces them (as PyTorch DDP; "
      "0: one exchange per tensor)",
      "exchanges the gradients in buckets");
  cap.range = up_to(at_least(0, "a number of MB >= 0, e.g. 25", "must be at least 0 (0: one exchange per tensor)"),
                    kMaxBucketCapMb, "1048576 (1 TiB)");
  cap.label = bucket_label;
  options.push_back(std::move(cap));

  SynchronisationOption tail = option(
      "tail_bucket_mb", &StrategyOptions::tail_bucket_mb, "X",
      "With buckets: the last bucket, the tensors backward produces last, closes at X MB, so less of the exchange is "
      "left when backward ends (0: it holds what the other buckets leave)",
      "exchanges the gradients in buckets");
  tail.range = at_least(0, "a number of MB >= 0, e.g. 2", "must be at least 0 (0: off)");
  tail.label = when_changed("tail_bucket_mb", [](const std::string& value) {
    const double megabytes = std::strtod(value.c_str(), nullptr);
    return megabytes > 0 ? fmt::format("tail bucket {:g} MB", megabytes) : std::string();
  });
  options.push_back(std::move(tail));

  SynchronisationOption bytes = option(
      "agg_small_grads_max_bytes", &StrategyOptions::agg_small_grads_max_bytes, "N",
      "One exchange per tensor (--bucket_cap_mb=0): batch consecutive tensors of at most N bytes into one exchange "
      "(0: off; given alone it sets --bucket_cap_mb=0)",
      "batches small gradients");
  bytes.range = up_to(at_least(0, "a number of bytes >= 0 (0: off)", "must be at least 0 (0: off)"),
                      static_cast<double>(kMaxAggregatedBytes), std::to_string(kMaxAggregatedBytes));
  bytes.label = small_gradients_label;
  options.push_back(std::move(bytes));

  SynchronisationOption group = option("agg_small_grads_max_group", &StrategyOptions::agg_small_grads_max_group, "N",
                                       "A batch of --agg_small_grads_max_bytes holds at most N tensors",
                                       "batches small gradients");
  group.range = up_to(at_least(1, "an integer >= 1", "must be at least 1"), kMaxGradientPieces,
                      std::to_string(kMaxGradientPieces));
  group.label = none;  // said by agg_small_grads_max_bytes' words
  options.push_back(std::move(group));

  SynchronisationOption overlap = option(
      "overlap_comm", &StrategyOptions::overlap_comm, "",
      "Start exchanging gradients as soon as backward has produced them (false: after the whole backward pass)",
      "overlaps the exchange with backward");
  overlap.label = [](const OptionTexts& o, bool every) -> std::string {
    const bool overlapped = text_of(o, "overlap_comm") != "false";
    if (!every) return overlapped ? "" : "no overlap";
    return overlapped ? "overlapped" : "after backward";
  };
  options.push_back(std::move(overlap));

  SynchronisationOption compact = option("compact_gradient_transfer", &StrategyOptions::compact_gradient_transfer, "",
                                         "Gradients travel at half width and are summed in fp32 (not with xring)",
                                         "sends gradients at half width");
  compact.choices = {"none", "fp16", "bf16"};  // TransferWidth's values, in its order
  compact.choice_kind = "transfer type";
  compact.label = [](const OptionTexts& o, bool) {
    const std::string type = text_of(o, "compact_gradient_transfer");
    return type.empty() || type == "none" ? std::string() : type + " transfer";
  };
  options.push_back(std::move(compact));

  SynchronisationOption sparse = option(
      "sparse_embedding_grads", &StrategyOptions::sparse_embedding_grads, "",
      "nmt and rnnlm: embedding tables exchange only the rows a step touched, gathered, instead of the dense gradient",
      "gathers sparse embedding gradients");
  sparse.label = [](const OptionTexts& o, bool every) -> std::string {
    if (text_of(o, "sparse_embedding_grads") != "true") return "";
    return every ? "sparse embedding gradients" : "sparse embeddings";
  };
  options.push_back(std::move(sparse));

  SynchronisationOption sharded = option(
      "sharded_update", &StrategyOptions::sharded_update, "",
      "With --all_reduce_spec=nccl: reduce-scatter each range, update only this replica's 1/N shard, all-gather the "
      "updated parameters (the optimizer's work split N ways) instead of all-reducing gradients",
      "shards the update of its replicas");
  sharded.label =
      when_changed("sharded_update", [](const std::string& value) { return value == "true" ? "sharded update" : ""; });
  options.push_back(std::move(sharded));

  SynchronisationOption hierarchical = option(
      "hierarchical_all_reduce", &StrategyOptions::hierarchical_all_reduce, "",
      "distributed_all_reduce: reduce-scatter inside each host, all-reduce each piece across hosts (one communicator "
      "per host-local rank), all-gather inside each host (Horovod's hierarchical all-reduce)",
      "all-reduces inside each host, then across hosts");
  hierarchical.label = when_changed("hierarchical_all_reduce",
                                    [](const std::string& value) { return value == "true" ? "hierarchical" : ""; });
  options.push_back(std::move(hierarchical));

  SynchronisationOption prefetch = option(
      "prefetch_units", &StrategyOptions::prefetch_units, "N",
      "fully_sharded: all-gather each unit this many unit uses before the model reaches it (0: just before it)",
      "prefetches the units it gathers");
  prefetch.range = up_to(at_least(0, "an integer >= 0", "must be at least 0 (0: no prefetch)"), 64, "64");
  prefetch.label = when_changed("prefetch_units", [](const std::string& value) { return "prefetch " + value; });
  options.push_back(std::move(prefetch));

  SynchronisationOption reshard = option(
      "reshard_after_forward", &StrategyOptions::reshard_after_forward, "",
      "fully_sharded: free a unit's gathered copy after its forward and gather it again for backward (ZeRO-3; "
      "false: keep it until its backward, as FSDP's SHARD_GRAD_OP)",
      "frees or keeps the units it gathers");
  reshard.label = [](const OptionTexts& o, bool every) -> std::string {
    const bool freed = text_of(o, "reshard_after_forward") != "false";
    if (!every) return freed ? "" : "kept for backward";
    return freed ? "resharded after forward" : "kept for backward";
  };
  options.push_back(std::move(reshard));

  SynchronisationOption copy = option(
      "shard_weight_copy", &StrategyOptions::shard_weight_copy, "",
      "fully_sharded under fp16/bf16: keep a 16-bit copy of each device's shard, refreshed by its update, and gather "
      "that (as ZeRO-3's partitioned 16-bit parameters; false: round the fp32 shard at each gather, as FSDP2: 2 "
      "bytes per parameter / N less on every device, one rounding pass over the shard per gather)",
      "keeps or rounds the 16-bit shard it gathers");
  copy.label = when_changed("shard_weight_copy",
                            [](const std::string& value) { return value == "false" ? "cast at gather" : ""; });
  options.push_back(std::move(copy));

  SynchronisationOption reduce = option("reduce_precision", &StrategyOptions::reduce_precision, "",
                                        "fully_sharded: the type each unit's gradients are reduce-scattered in",
                                        "reduce-scatters gradients");
  reduce.choices = {"fp32", "bf16"};  // ReducePrecision's values, in its order
  reduce.choice_kind = "reduce precision";
  reduce.label = when_changed("reduce_precision", [](const std::string& value) { return value + " reduce"; });
  options.push_back(std::move(reduce));

  SynchronisationOption shard_group = option(
      "shard_group_size", &StrategyOptions::shard_group_size, "K",
      "fully_sharded: shard within groups of K devices and all-reduce the shards' gradients across the groups "
      "(hybrid sharding, HSDP; 0: one group of every device)",
      "shards parameters over groups of devices");
  shard_group.range = up_to(at_least(0, "an integer >= 0", "must be at least 0 (0: every device)"), 65536, "65536");
  shard_group.label = when_changed("shard_group_size", [](const std::string& value) {
    return value == "0" ? std::string() : "groups of " + value;
  });
  options.push_back(std::move(shard_group));
  return options;
}

// 25 as the command line spells it (not JSON's 25.0).
std::string flag_spelling(const nlohmann::json& value) {
  if (!value.is_number_float()) return option_text(value);
  std::ostringstream text;
  text << value.get<double>();
  return text.str();
}

}  // namespace

std::string OptionRange::why_not(double value) const {
  if (!(value >= minimum)) return below;
  if (value > maximum) return above;
  return "";
}

nlohmann::json SynchronisationOption::recorded(const StrategyOptions& options) const {
  if (recorded_as) return recorded_as(options);
  return std::visit(
      [&](auto member) -> nlohmann::json {
        const auto& value = options.*member;
        if constexpr (std::is_enum_v<std::decay_t<decltype(value)>>)
          return choices.at(static_cast<size_t>(value));
        else
          return value;
      },
      member);
}

std::string SynchronisationOption::default_text() const { return option_text(recorded(StrategyOptions())); }

std::string SynchronisationOption::default_flag_text() const { return flag_spelling(recorded(StrategyOptions())); }

std::string SynchronisationOption::hint() const {
  if (is_boolean()) return "BOOL";
  if (!choices.empty()) {
    std::string text;
    for (const std::string& choice : choices) text += (text.empty() ? "" : "|") + choice;
    return text;
  }
  return value_hint;
}

const std::vector<SynchronisationOption>& synchronisation_options() {
  static const std::vector<SynchronisationOption> options = make_options();
  return options;
}

const SynchronisationOption* find_synchronisation_option(const std::string& flag) {
  for (const SynchronisationOption& option : synchronisation_options())
    if (option.flag == flag) return &option;
  return nullptr;
}

const SynchronisationOption& synchronisation_option(const std::string& flag) {
  const SynchronisationOption* option = find_synchronisation_option(flag);
  if (option == nullptr) throw std::logic_error("no synchronisation option --" + flag);
  return *option;
}

std::string option_text(const nlohmann::json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace dpbench
