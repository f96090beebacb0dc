// Grouping results into series, speedups, comparison groups (see report_series.h).
#include "reports/report_series.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "reports/table_cells.h"
#include "reports/workload_flags.h"

namespace dpbench {
namespace {

using nlohmann::json;

// The number at `key` of `object`; 0 where it holds none (absent or null: not measured; the
// loader set aside results where it holds anything else).
double number_or_zero(const json& object, const char* key) {
  if (!object.is_object()) return 0;
  const auto found = object.find(key);
  return found != object.end() && found->is_number() ? found->get<double>() : 0.0;
}

int64_t config_integer(const json& config, const char* name) {
  const auto found = config.find(name);
  return found != config.end() && found->is_number_integer() ? found->get<int64_t>() : 0;
}

// The reference backend names its devices by index ("reference-cpu-0"); they are all the same
// host, so only GPU names tell hardware apart.
std::string device_name_of(const Result& result) {
  if (result.environment.backend == "reference") return "";
  std::vector<std::string> names;
  for (const DeviceRecord& device : result.environment.devices) {
    if (std::find(names.begin(), names.end(), device.name) == names.end()) names.push_back(device.name);
  }
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : " + ") + name;
  return joined;
}

// Numbers by value ("4" before "16"), anything else by text. (Finite numbers only: a NaN would
// compare equal to everything and break the map's ordering.)
bool option_less(const std::string& a, const std::string& b) {
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double number_a = std::strtod(a.c_str(), &end_a), number_b = std::strtod(b.c_str(), &end_b);
  const bool numeric = !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' &&
                       std::isfinite(number_a) && std::isfinite(number_b);
  return numeric && number_a != number_b ? number_a < number_b : a < b;
}

std::string model_label(const SeriesKey& key) {
  if (key.encoder_type.empty()) return key.model;
  return key.model + " (" + key.encoder_type + (key.direction.empty() ? "" : ", " + key.direction) + ")";
}

// The parts of a workload label after the model: precision, layout (images only), backend, batch.
std::vector<std::string> workload_details(const SeriesKey& key) {
  std::vector<std::string> parts;
  if (key.forward_only) parts.push_back("inference (forward only)");
  if (key.activation_checkpointing == "blocks") parts.push_back("blocks recomputed");
  parts.push_back(key.precision);
  if (key.encoder_type.empty() && !key.data_format.empty()) parts.push_back(key.data_format);
  if (!key.data.empty()) parts.push_back(key.data);
  if (key.backend == "reference") parts.push_back("reference backend");
  const std::string device = key.backend == "reference" ? "device" : "GPU";
  parts.push_back(key.scaling == Scaling::weak
                      ? "batch " + std::to_string(key.batch) + " per " + device + " (weak scaling)"
                      : "total batch " + std::to_string(key.batch) + " (strong scaling)");
  return parts;
}

// A note per flag whose value differs between the series' runs: they still share the table (their
// key agrees), but the reader must know the comparison is not like for like.
std::vector<std::string> config_difference_notes(const Series& series) {
  std::map<std::string, std::set<std::string>> values;
  std::set<std::string> flags;
  for (const SeriesRow& row : series.rows)
    for (const LoadedResult& run : row.runs)
      for (const auto& item : run.result.config.items()) flags.insert(item.key());
  for (const SeriesRow& row : series.rows) {
    for (const LoadedResult& run : row.runs) {
      for (const std::string& flag : flags) {
        const auto found = run.result.config.find(flag);
        values[flag].insert(found == run.result.config.end() ? "(absent)" : found->dump());
      }
    }
  }
  std::vector<std::string> notes;
  for (const auto& [flag, seen] : values) {
    if (seen.size() < 2 || config_flag_role(flag, series.key.scaling == Scaling::strong) == FlagRole::varies_by_design)
      continue;
    notes.push_back("The runs differ in " + flag + " (" + join_parts({seen.begin(), seen.end()}, ", ") +
                    "): the rows are not like for like.");
  }
  return notes;
}

// A sweep shows an N-GPU run the first N GPUs of one list (0; 0,1; 0,1,2,3): CUDA_VISIBLE_DEVICES
// then differs by design. True where every run's list holds as many GPUs as the run had devices
// and each shorter list begins the longer ones; false where a run was set on other GPUs (a 1-GPU
// run on GPU 3 beside a 2-GPU run on 0,1), or a run left it unset.
bool visible_devices_grow_with_the_count(const Series& series) {
  std::vector<std::vector<std::string>> lists;
  for (const SeriesRow& row : series.rows) {
    for (const LoadedResult& run : row.runs) {
      const auto& variables = run.result.environment.variables;
      const auto found = variables.find("CUDA_VISIBLE_DEVICES");
      if (found == variables.end()) return false;
      std::vector<std::string> list;
      std::string entry;
      for (char c : found->second + ",") {
        if (c != ',') { entry += c; continue; }
        list.push_back(entry);
        entry.clear();
      }
      // One process per GPU sees the job's list; one process, its own devices.
      if (static_cast<int64_t>(list.size()) != run.result.summary.num_devices) return false;
      lists.push_back(std::move(list));
    }
  }
  std::sort(lists.begin(), lists.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
  for (size_t i = 1; i < lists.size(); ++i)
    if (!std::equal(lists[i - 1].begin(), lists[i - 1].end(), lists[i].begin())) return false;
  return true;
}

// Notes where the series' runs ran on different topologies: over different numbers of hosts (a
// 4-GPU run on two hosts beside 1- and 2-GPU runs on one), or with different NCCL_* / CUDA_*
// environment variables. The GPU count differs by design; how the GPUs are spread does not.
std::vector<std::string> topology_difference_notes(const Series& series) {
  std::map<int, std::set<int64_t>> gpu_counts_by_hosts;
  std::map<std::string, std::set<std::string>> variables;
  std::set<std::string> names;
  for (const SeriesRow& row : series.rows)
    for (const LoadedResult& run : row.runs)
      for (const auto& [name, value] : run.result.environment.variables) names.insert(name);
  for (const SeriesRow& row : series.rows) {
    for (const LoadedResult& run : row.runs) {
      const EnvironmentRecord& environment = run.result.environment;
      const int hosts = environment.ranks_per_host.empty() ? 1 : static_cast<int>(environment.ranks_per_host.size());
      gpu_counts_by_hosts[hosts].insert(run.result.summary.num_devices);
      for (const std::string& name : names) {
        const auto found = environment.variables.find(name);
        variables[name].insert(found == environment.variables.end() ? "(unset)" : found->second);
      }
    }
  }
  std::vector<std::string> notes;
  if (gpu_counts_by_hosts.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [hosts, counts] : gpu_counts_by_hosts) {
      std::vector<std::string> gpus;
      for (int64_t count : counts) gpus.push_back(std::to_string(count));
      parts.push_back(std::to_string(hosts) + (hosts == 1 ? " host (" : " hosts (") + join_parts(gpus, ", ") + " GPUs)");
    }
    notes.push_back("The runs span different numbers of hosts: " + join_parts(parts, "; ") +
                    ": the traffic between hosts is part of the difference.");
  }
  for (const auto& [name, seen] : variables) {
    if (seen.size() < 2) continue;
    if (name == "CUDA_VISIBLE_DEVICES" && visible_devices_grow_with_the_count(series)) continue;
    notes.push_back("The runs differ in " + name + " (" + join_parts({seen.begin(), seen.end()}, ", ") +
                    "): the rows are not like for like.");
  }
  return notes;
}

std::string repeated_runs_note(const SeriesRow& row, const std::string& unit) {
  std::vector<std::string> speeds;
  for (const LoadedResult& run : row.runs) speeds.push_back(format_fixed(run.result.summary.items_per_sec, 1));
  const std::string which =
      row.runs.size() % 2 == 1 ? "the median run" : "the slower of the two middle runs (median of an even count)";
  return std::to_string(row.num_devices) + " GPU" + (row.num_devices == 1 ? "" : "s") + ": " +
         std::to_string(row.runs.size()) + " runs (" + join_parts(speeds, ", ") + " " + unit + "); the row shows " +
         which + " by processing speed.";
}

// Note [where the efficiency went]
// Weak scaling: every GPU has the 1-GPU run's batch, so an N-GPU run at efficiency e takes 1 / e
// of the 1-GPU run's wall time per step, and the lost points, 100 - e, are the extra time per step
// over the N-GPU run's time (x 100). That extra time is split by the parts of summary.breakdown
// that grew: exposed communication, straggler wait, data wait and host gaps, each part's growth
// over the N-GPU run's wall time per step in points; clock loss is the compute (forward, backward,
// update) the N-GPU run spent above what it would have at the 1-GPU run's mean SM clock (from the
// GPU telemetry; 0 where either run lacks it); `other` is what the named parts leave, so the parts
// add up to the lost points (compute that grew for another reason: contention for memory or
// PCIe, different algorithms).
std::optional<EfficiencyLoss> efficiency_loss(const Result& run, const Result& single, double efficiency_pct) {
  const json& parts = run.summary.breakdown, & single_parts = single.summary.breakdown;
  if (!parts.contains("ms_per_step") || !single_parts.contains("ms_per_step")) return std::nullopt;
  const double wall_ms = number_or_zero(parts, "wall_ms_per_step");
  if (!(wall_ms > 0)) return std::nullopt;
  auto part = [](const json& breakdown, const char* key) { return number_or_zero(breakdown["ms_per_step"], key); };
  auto growth_points = [&](const char* key) { return 100.0 * (part(parts, key) - part(single_parts, key)) / wall_ms; };
  EfficiencyLoss loss;
  loss.exposed_comm = growth_points("exposed_comm_ms");
  loss.straggler = growth_points("straggler_wait_ms");
  loss.data = growth_points("data_wait_ms");
  loss.host = growth_points("host_gap_ms");
  if (const std::optional<double> clock = clock_loss_points(run, single)) {
    loss.clock_known = true;
    loss.clock = *clock;
  }
  loss.other = (100.0 - efficiency_pct) - (loss.exposed_comm + loss.straggler + loss.clock + loss.data + loss.host);
  return loss;
}

Series make_series(const SeriesKey& key, std::vector<LoadedResult> runs) {
  Series series;
  series.key = key;
  std::map<int64_t, std::vector<LoadedResult>> by_gpu_count;
  for (LoadedResult& run : runs) by_gpu_count[run.result.summary.num_devices].push_back(std::move(run));
  for (auto& [gpus, gpu_runs] : by_gpu_count) {
    SeriesRow row;
    row.num_devices = gpus;
    row.runs = std::move(gpu_runs);
    std::sort(row.runs.begin(), row.runs.end(), [](const LoadedResult& a, const LoadedResult& b) {
      return std::make_pair(a.result.summary.items_per_sec, a.path) < std::make_pair(b.result.summary.items_per_sec, b.path);
    });
    row.chosen = (row.runs.size() - 1) / 2;  // a real run, so its time and jitter belong to it
    series.rows.push_back(std::move(row));
  }
  const SeriesRow* baseline = find_row(series, 1);
  series.baseline_missing = baseline == nullptr;
  for (SeriesRow& row : series.rows) {
    if (!baseline) continue;
    row.speedup = row.run().result.summary.items_per_sec / baseline->run().result.summary.items_per_sec;
    row.efficiency_pct = 100.0 * *row.speedup / static_cast<double>(row.num_devices);
    if (row.num_devices > 1 && key.scaling == Scaling::weak)
      row.efficiency_loss = efficiency_loss(row.run().result, baseline->run().result, *row.efficiency_pct);
  }
  if (series.baseline_missing) {
    series.notes.push_back("The 1-GPU run is missing: speedup and efficiency are n/a (both are relative to the "
                           "1-GPU run of the same series).");
  }
  for (const SeriesRow& row : series.rows)
    if (row.runs.size() > 1) series.notes.push_back(repeated_runs_note(row, key.unit));
  for (std::string& note : config_difference_notes(series)) series.notes.push_back(std::move(note));
  for (std::string& note : topology_difference_notes(series)) series.notes.push_back(std::move(note));
  return series;
}

}  // namespace

std::optional<double> clock_loss_points(const Result& run, const Result& single) {
  const json& parts = run.summary.breakdown;
  const json& clocks = run.summary.gpu_telemetry, & single_clocks = single.summary.gpu_telemetry;
  if (!parts.contains("ms_per_step") || !clocks.contains("sm_clock_mhz_mean") ||
      !single_clocks.contains("sm_clock_mhz_mean"))
    return std::nullopt;
  const double wall_ms = number_or_zero(parts, "wall_ms_per_step");
  const double clock = number_or_zero(clocks, "sm_clock_mhz_mean");
  const double single_clock = number_or_zero(single_clocks, "sm_clock_mhz_mean");
  if (!(wall_ms > 0) || !(clock > 0) || !(single_clock > 0)) return std::nullopt;
  auto part = [&](const char* key) { return number_or_zero(parts["ms_per_step"], key); };
  const double compute = part("forward_ms") + part("backward_ms") + part("update_ms");
  return 100.0 * compute * (1.0 - clock / single_clock) / wall_ms;
}

// Scaling mode, then the workload (so a workload's series stay together and form one comparison),
// then the strategy.
bool SeriesKeyLess::operator()(const SeriesKey& a, const SeriesKey& b) const {
  auto workload = [](const SeriesKey& k) {
    return std::tie(k.scaling, k.forward_only, k.model, k.encoder_type, k.direction, k.precision, k.data_format,
                    k.data, k.batch, k.backend, k.device_name, k.unit, k.activation_checkpointing);
  };
  if (workload(a) != workload(b)) return workload(a) < workload(b);
  if (a.strategy_rank != b.strategy_rank) return a.strategy_rank < b.strategy_rank;
  const KeyFields fields_a = a.strategy_fields(), fields_b = b.strategy_fields();
  for (size_t i = 0; i < fields_a.size(); ++i) {
    if (fields_a[i].second != fields_b[i].second) return option_less(fields_a[i].second, fields_b[i].second);
  }
  return false;
}

void make_titles_unique(std::vector<std::string>& titles, const std::vector<KeyFields>& fields) {
  std::map<std::string, std::vector<size_t>> by_title;
  for (size_t i = 0; i < titles.size(); ++i) by_title[titles[i]].push_back(i);
  for (const auto& [title, indices] : by_title) {
    if (indices.size() < 2) continue;
    for (size_t i : indices) {
      std::vector<std::string> differing;
      for (size_t f = 0; f < fields[i].size(); ++f) {
        const bool differs = std::any_of(indices.begin(), indices.end(),
                                         [&](size_t j) { return fields[j][f].second != fields[i][f].second; });
        if (differs) differing.push_back(fields[i][f].first + "=" + fields[i][f].second);
      }
      titles[i] = title + " [" + join_parts(differing, ", ") + "]";
    }
  }
}

const char* scaling_name(Scaling scaling) { return scaling == Scaling::weak ? "weak" : "strong"; }

KeyFields SeriesKey::workload_fields() const {
  return {{"scaling", scaling_name(scaling)}, {"mode", forward_only ? "inference" : "training"},
          {"model", model},     {"encoder_type", encoder_type},
          {"direction", direction},           {"precision", precision}, {"data_format", data_format},
          {"data", data}, {"fixed_batch", std::to_string(batch)},   {"backend", backend},
          {"device_name", device_name}, {"unit", unit}, {"activation_checkpointing", activation_checkpointing}};
}

KeyFields SeriesKey::strategy_fields() const {
  KeyFields fields = {{"variable_update", variable_update}, {"processes", processes}};
  fields.insert(fields.end(), strategy_options.begin(), strategy_options.end());
  return fields;
}

KeyFields SeriesKey::fields() const {
  KeyFields all = workload_fields();
  for (auto& field : strategy_fields()) all.push_back(std::move(field));
  return all;
}

// The model as a report names it: gpt with its size ("gpt 124m", or "gpt 4 x 256 (4 heads)" off
// the presets), sizes being different workloads; every other model by its name.
static std::string model_with_size(const json& config) {
  const std::string model = config_text(config, "model");
  if (model != "gpt") return model;
  const std::string size = config_text(config, "gpt_size");
  if (!size.empty() && size != "custom") return model + " " + size;
  return model + " " + config_text(config, "num_layers") + " x " + config_text(config, "hidden_size") + " (" +
         config_text(config, "num_heads") + " heads)";
}

// "cifar10, host feed (prefetch 2)", "synthetic, host feed (synchronous)", "cifar10 shape
// (synthetic)"; "" for synthetic data on the device.
static std::string data_label(const json& config) {
  const std::string name = config_text(config, "data_name"), dir = config_text(config, "data_dir");
  const std::string feed = config_text(config, "data_feed");
  std::string data = name.empty() ? "synthetic" : dir.empty() ? name + " shape (synthetic)" : name;
  if (feed == "host") {
    const bool prefetch = config_text(config, "prefetch_data_to_device") != "false";
    data += prefetch ? ", host feed (prefetch " + config_text(config, "prefetch_depth") + ")" : ", host feed (synchronous)";
  } else if (!dir.empty()) {
    data += ", first batch kept on the device";
  }
  return data == "synthetic" ? "" : data;
}

// The strategy's options as the catalog lists them: recorded, or the default where an older
// result lacks one the strategy takes; "" for those it does not take. A strategy the catalog does
// not know keeps what it recorded.
KeyFields strategy_options_of(const nlohmann::json& config, const std::string& strategy,
                              const StrategyCatalog& strategies) {
  const StrategyCatalog::Entry* entry = strategies.find(strategy);
  KeyFields fields;
  for (const std::string& key : strategies.option_keys) {
    std::string value = config_text(config, key.c_str());
    if (entry != nullptr) {
      const auto taken = std::find_if(entry->options.begin(), entry->options.end(),
                                      [&](const StrategyCatalog::Option& option) { return option.key == key; });
      if (taken == entry->options.end()) value.clear();
      else if (value.empty()) value = taken->default_text;
    }
    fields.emplace_back(key, value);
  }
  return fields;
}

SeriesKey series_key_of(const Result& result, const StrategyCatalog& strategies) {
  const json& config = result.config;
  SeriesKey key;
  key.scaling = config_integer(config, "total_batch_size") > 0 ? Scaling::strong : Scaling::weak;
  const int64_t per_gpu = config_integer(config, "batch_size");
  key.batch = key.scaling == Scaling::strong ? result.summary.global_batch_size
              : per_gpu > 0                  ? per_gpu
                                             : result.summary.global_batch_size / result.summary.num_devices;
  key.model = model_with_size(config);
  key.encoder_type = config_text(config, "encoder_type");
  key.direction = config_text(config, "direction");
  // summary.math is what ran (a tf32 request computes fp32 on the reference backend).
  key.precision = result.summary.math.empty() ? config_text(config, "precision") : result.summary.math;
  // A layout of images: a sequence model (one with a sequence length) has none.
  if (!config.contains("seq_len") && !config.contains("src_max_len")) key.data_format = config_text(config, "data_format");
  key.forward_only = config_text(config, "forward_only") == "true";  // absent before the flag existed
  const std::string checkpointing = config_text(config, "activation_checkpointing");
  key.activation_checkpointing = checkpointing.empty() ? "none" : checkpointing;
  key.backend = result.environment.backend;
  key.device_name = device_name_of(result);
  key.unit = result.summary.unit;
  key.data = data_label(config);
  key.variable_update = config_text(config, "variable_update");
  key.strategy_options = strategy_options_of(config, key.variable_update, strategies);
  key.strategy_rank = strategies.column_rank(key.variable_update);
  std::map<std::string, std::string> recorded;
  for (const auto& [name, value] : key.strategy_options)
    if (!value.empty()) recorded[name] = value;
  key.strategy_words = key.variable_update.empty() ? "(no strategy)"
                       : strategies.label         ? strategies.label(key.variable_update, recorded)
                                                  : key.variable_update;
  const StrategyCatalog::Entry* entry = strategies.find(key.variable_update);
  const bool process_per_gpu = result.environment.launcher != "none" || result.summary.num_devices > config_integer(config, "num_gpus");
  if (entry != nullptr && entry->runs_either_way && process_per_gpu) {
    key.processes = "one process per GPU";
    std::string& words = key.strategy_words;
    words = words.back() == ')' ? words.substr(0, words.size() - 1) + ", " + key.processes + ")"
                                : words + " (" + key.processes + ")";
  }
  return key;
}

std::string strategy_label(const SeriesKey& key) { return key.strategy_words; }

std::string workload_label(const SeriesKey& key) {
  std::vector<std::string> parts = {model_label(key)};
  for (std::string& part : workload_details(key)) parts.push_back(std::move(part));
  return join_parts(parts, ", ");
}

std::string series_label(const SeriesKey& key) {
  std::vector<std::string> parts = {model_label(key), strategy_label(key)};
  for (std::string& part : workload_details(key)) parts.push_back(std::move(part));
  return join_parts(parts, ", ");
}

const SeriesRow* find_row(const Series& series, int64_t num_devices) {
  for (const SeriesRow& row : series.rows)
    if (row.num_devices == num_devices) return &row;
  return nullptr;
}

std::string format_fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "n/a";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

Report build_report(LoadedResults loaded, const StrategyCatalog& strategies) {
  Report report;
  report.results = loaded.results.size();
  report.files_examined = loaded.files_examined;
  report.skipped = std::move(loaded.skipped);

  std::map<SeriesKey, std::vector<LoadedResult>, SeriesKeyLess> grouped;
  for (LoadedResult& run : loaded.results) {
    const SeriesKey key = series_key_of(run.result, strategies);
    grouped[key].push_back(std::move(run));
  }
  for (auto& [key, runs] : grouped) report.series.push_back(make_series(key, std::move(runs)));

  std::vector<std::string> titles;
  std::vector<KeyFields> fields;
  for (const Series& series : report.series) {
    titles.push_back(series_label(series.key));
    fields.push_back(series.key.fields());
  }
  make_titles_unique(titles, fields);
  for (size_t i = 0; i < report.series.size(); ++i) report.series[i].title = titles[i];

  // Series are sorted workload first, so each comparison is a run of neighbours.
  titles.clear();
  fields.clear();
  for (size_t i = 0; i < report.series.size(); ++i) {
    const SeriesKey& key = report.series[i].key;
    if (report.comparisons.empty() ||
        report.series[report.comparisons.back().series.front()].key.workload_fields() != key.workload_fields()) {
      Comparison comparison;
      comparison.scaling = key.scaling;
      comparison.unit = key.unit;
      report.comparisons.push_back(comparison);
      titles.push_back(workload_label(key));
      fields.push_back(key.workload_fields());
    }
    Comparison& comparison = report.comparisons.back();
    comparison.series.push_back(i);
    for (const SeriesRow& row : report.series[i].rows) comparison.gpu_counts.push_back(row.num_devices);
  }
  make_titles_unique(titles, fields);
  for (size_t i = 0; i < report.comparisons.size(); ++i) {
    Comparison& comparison = report.comparisons[i];
    comparison.title = titles[i];
    std::vector<KeyFields> strategy_fields;
    for (size_t index : comparison.series) {
      comparison.column_labels.push_back(strategy_label(report.series[index].key));
      strategy_fields.push_back(report.series[index].key.strategy_fields());
    }
    make_titles_unique(comparison.column_labels, strategy_fields);
    std::sort(comparison.gpu_counts.begin(), comparison.gpu_counts.end());
    comparison.gpu_counts.erase(std::unique(comparison.gpu_counts.begin(), comparison.gpu_counts.end()),
                                comparison.gpu_counts.end());
  }
  return report;
}

}  // namespace dpbench
