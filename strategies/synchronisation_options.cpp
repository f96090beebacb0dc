// The synchronisation options' table (see synchronisation_options.h).
#include "strategies/synchronisation_options.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace dpbench {
namespace {

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

std::vector<SynchronisationOption> make_options() {
  auto none = [](const OptionTexts&, bool) { return std::string(); };
  return {
      {"all_reduce_spec", "takes an all-reduce spec",
       [](const StrategyOptions& c) { return nlohmann::json(c.all_reduce_spec.empty() ? "nccl" : c.all_reduce_spec); },
       [](const OptionTexts& o, bool every) {
         const std::string spec = text_of(o, "all_reduce_spec");
         return spec.empty() ? spec : every ? "all-reduce " + spec : spec;
       }},
      {"local_parameter_device", "keeps a master copy", [](const StrategyOptions& c) { return nlohmann::json(c.local_parameter_device); },
       [](const OptionTexts& o, bool every) {
         const std::string device = text_of(o, "local_parameter_device");
         return device.empty() ? device : every ? "on " + device : device;
       }},
      {"gradient_repacking", "cuts the gradients into pieces", [](const StrategyOptions& c) { return nlohmann::json(c.gradient_repacking); },
       repacking_label},
      {"bucket_cap_mb", "exchanges the gradients in buckets", [](const StrategyOptions& c) { return nlohmann::json(c.bucket_cap_mb); }, bucket_label},
      {"tail_bucket_mb", "exchanges the gradients in buckets", [](const StrategyOptions& c) { return nlohmann::json(c.tail_bucket_mb); },
       when_changed("tail_bucket_mb",
                    [](const std::string& value) {
                      const double megabytes = std::strtod(value.c_str(), nullptr);
                      return megabytes > 0 ? fmt::format("tail bucket {:g} MB", megabytes) : std::string();
                    })},
      {"agg_small_grads_max_bytes", "batches small gradients", [](const StrategyOptions& c) { return nlohmann::json(c.agg_small_grads_max_bytes); },
       small_gradients_label},
      {"agg_small_grads_max_group", "batches small gradients", [](const StrategyOptions& c) { return nlohmann::json(c.agg_small_grads_max_group); },
       none},  // said by agg_small_grads_max_bytes' words
      {"overlap_comm", "overlaps the exchange with backward", [](const StrategyOptions& c) { return nlohmann::json(c.overlap_comm); },
       [](const OptionTexts& o, bool every) -> std::string {
         const bool overlapped = text_of(o, "overlap_comm") != "false";
         if (!every) return overlapped ? "" : "no overlap";
         return overlapped ? "overlapped" : "after backward";
       }},
      {"compact_gradient_transfer", "sends gradients at half width",
       [](const StrategyOptions& c) {
         return nlohmann::json(c.compact_gradient_transfer.empty() ? "none" : c.compact_gradient_transfer);
       },
       [](const OptionTexts& o, bool) {
         const std::string type = text_of(o, "compact_gradient_transfer");
         return type.empty() || type == "none" ? std::string() : type + " transfer";
       }},
      {"sparse_embedding_grads", "gathers sparse embedding gradients", [](const StrategyOptions& c) { return nlohmann::json(c.sparse_embedding_grads); },
       [](const OptionTexts& o, bool every) -> std::string {
         if (text_of(o, "sparse_embedding_grads") != "true") return "";
         return every ? "sparse embedding gradients" : "sparse embeddings";
       }},
      {"sharded_update", "shards the update of its replicas", [](const StrategyOptions& c) { return nlohmann::json(c.sharded_update); },
       when_changed("sharded_update",
                    [](const std::string& value) { return value == "true" ? "sharded update" : ""; })},
      {"hierarchical_all_reduce", "all-reduces inside each host, then across hosts",
       [](const StrategyOptions& c) { return nlohmann::json(c.hierarchical_all_reduce); },
       when_changed("hierarchical_all_reduce",
                    [](const std::string& value) { return value == "true" ? "hierarchical" : ""; })},
  };
}

}  // namespace

std::string SynchronisationOption::default_text() const {
  StrategyOptions defaults;
  return option_text(recorded(defaults));
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

std::string option_text(const nlohmann::json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace dpbench
