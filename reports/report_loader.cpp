// Loading and validating the inputs of `dpbench report` (see report_loader.h).
#include "reports/report_loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/machine/file_checks.h"
#include "engine/machine/text_content.h"
#include "reports/result_json.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Why something that is neither a folder nor a regular file is skipped ("" for those two).
std::string why_not_a_file(const PathInfo& info) {
  switch (info.kind) {
    case PathKind::regular_file:
    case PathKind::directory: return "";
    case PathKind::missing: return "does not exist";
    case PathKind::fifo:
    case PathKind::character_device:
    case PathKind::block_device:
    case PathKind::socket: return describe_path_kind(info) + ", not a regular file";
    default: return describe_path_kind(info);  // a broken link, a link loop, not accessible
  }
}

// A folder as the file system knows it, whatever path (or link) reached it.
using FolderId = std::pair<dev_t, ino_t>;

bool folder_id(const std::string& path, FolderId* id) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return false;
  *id = {status.st_dev, status.st_ino};
  return true;
}

// The folders from the top one down to the one being searched: a folder met again among them
// (through a link to a parent, or a bind mount) would be searched forever.
using FolderChain = std::vector<std::pair<FolderId, std::string>>;

// Everything below `folder` that the report reads or reports: *.json regular files, and anything
// that is neither a folder nor a regular file (never opened: a FIFO would block). Links to
// folders are followed.
void search_folder(const std::string& folder, FolderChain* chain, std::vector<ListedPath>* found,
                   std::vector<SkippedFile>* problems) {
  std::error_code error;
  fs::directory_iterator entries(folder, error);
  if (error) {
    problems->push_back({folder, "cannot read the folder: " + error.message()});
    return;
  }
  std::vector<std::string> names;
  for (; entries != fs::directory_iterator(); entries.increment(error)) {
    if (error) {
      problems->push_back({folder, "cannot read part of the folder: " + error.message()});
      break;
    }
    names.push_back(entries->path().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& path : names) {
    const PathInfo info = inspect_path(path);
    if (info.kind == PathKind::directory) {
      FolderId id;
      if (!folder_id(path, &id)) continue;  // gone since it was listed
      const auto seen = std::find_if(chain->begin(), chain->end(), [&](const auto& link) { return link.first == id; });
      if (seen != chain->end()) {
        problems->push_back({path, "leads back to the folder '" + seen->second + "', which holds it (a loop); "
                                   "not searched again"});
        continue;
      }
      chain->push_back({id, path});
      search_folder(path, chain, found, problems);
      chain->pop_back();
    } else if (info.kind == PathKind::regular_file) {
      if (fs::path(path).extension() == ".json") found->push_back({path, ""});
    } else if (info.kind != PathKind::missing) {
      found->push_back({path, why_not_a_file(info)});
    }
  }
}

// The same file reached twice (by name and through its folder, or through two links) must count once.
std::string identity_of(const std::string& path) {
  std::error_code error;
  const fs::path canonical = fs::weakly_canonical(path, error);
  return error ? path : canonical.string();
}

// A document that cannot be a training result gets one plain reason, not a key-by-key complaint.
std::string why_not_a_result(const json& document) {
  if (!document.is_object()) return std::string("not a dpbench result (a JSON ") + document.type_name() + ")";
  if (document.contains("command") && document["command"] == "comm_bench")
    return "a comm_bench result, not a training run";
  if (!document.contains("schema_version") || !document.contains("summary"))
    return "not a dpbench result (no schema_version and summary)";
  const json& version = document["schema_version"];
  if (!version.is_number_integer()) return "not a dpbench result (schema_version is " + version.dump() + ")";
  if (version.get<int64_t>() < kOldestReadableSchemaVersion || version.get<int64_t>() > kResultSchemaVersion) {
    return "result schema_version " + version.dump() + " (this dpbench reads " + readable_schema_versions() + ")";
  }
  return "";
}

// A number as JSON writes it ("0.0", "1e+308"), and NaN and infinities by name (JSON has none).
std::string number_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return json(value).dump();
}

std::string bound_text(double bound) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", bound);
  return text;
}

// "" when low < value <= high (low <= value where `low_included`); else why not, naming the field.
std::string outside(const std::string& field, double value, double low, bool low_included, double high) {
  if (std::isfinite(value) && (low_included ? value >= low : value > low) && value <= high) return "";
  return field + " is " + number_text(value) + ", impossible for a run (expected " + (low_included ? ">= " : "> ") +
         bound_text(low) + " and <= " + bound_text(high) + ")";
}

std::string outside(const std::string& field, int64_t value, int64_t low, int64_t high) {
  if (value >= low && value <= high) return "";
  return field + " is " + std::to_string(value) + ", impossible for a run (expected " + std::to_string(low) +
         " to " + std::to_string(high) + ")";
}

std::string first_problem(std::initializer_list<std::string> problems) {
  for (const std::string& problem : problems)
    if (!problem.empty()) return problem;
  return "";
}

// The step-time statistics of the plots' median line, and the steps they draw and compare samples.
std::string why_not_believable_times(const Result& result) {
  if (const auto& stats = result.summary.step_time_ms) {
    const std::pair<const char*, double> values[] = {{"mean", stats->mean}, {"median", stats->median},
                                                     {"stddev", stats->stddev}, {"min", stats->min},
                                                     {"max", stats->max}, {"p5", stats->p5}, {"p95", stats->p95}};
    for (const auto& [name, value] : values) {
      const std::string problem = outside(std::string("summary.step_time_ms.") + name, value, 0, true, kMaxStepMs);
      if (!problem.empty()) return problem;
    }
  }
  for (size_t i = 0; i < result.steps.size(); ++i) {
    const StepRecord& step = result.steps[i];
    const std::string where = "steps[" + std::to_string(i) + "].";
    // A host feed's step holds at most the global batch (a last batch of an epoch, fewer).
    const std::string problem = first_problem(
        {outside(where + "time_ms", step.time_ms, 0, true, kMaxStepMs),
         step.data_wait_ms ? outside(where + "data_wait_ms", *step.data_wait_ms, 0, true, kMaxStepMs) : "",
         step.items ? outside(where + "items", *step.items, 0, result.summary.global_batch_size) : ""});
    if (!problem.empty()) return problem;
  }
  return "";
}

// The number at `key` of `object` (`where` names it), where the result states one (absent and
// null mean unknown): "" when it is a number from `low` to `high` (above `low` where
// !low_included), else why not.
std::string optional_number_problem(const json& object, const std::string& where, const char* key, double low,
                                    bool low_included, double high) {
  if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) return "";
  const json& value = object.at(key);
  const std::string field = where + "." + key;
  if (!value.is_number()) return field + " is " + escaped_value(value.dump(), kQuotedExcerptBytes) + ", not a number";
  return outside(field, value.get<double>(), low, low_included, high);
}

// "" when `object` at `where` is absent, null or an object; else why not.
std::string not_an_object(const json& parent, const std::string& where, const char* key) {
  if (!parent.contains(key) || parent.at(key).is_null() || parent.at(key).is_object()) return "";
  return where + "." + key + " is a JSON " + parent.at(key).type_name() + ", not an object";
}

// summary.math_paths.convolutions.classic_algorithms: per pass, per algorithm, a count of
// shapes (report reads it as an int).
std::string why_not_shape_counts(const json& paths) {
  if (!paths.contains("convolutions") || !paths.at("convolutions").is_object() ||
      !paths.at("convolutions").contains("classic_algorithms"))
    return "";
  auto shown = [](const std::string& text) { return escaped_value(text, kQuotedExcerptBytes); };
  const json& algorithms = paths.at("convolutions").at("classic_algorithms");
  const std::string field = "summary.math_paths.convolutions.classic_algorithms";
  if (!algorithms.is_object()) return field + " is not an object";
  for (const auto& [pass, counts] : algorithms.items()) {
    if (!counts.is_object()) return field + "." + shown(pass) + " is not an object";
    for (const auto& [name, count] : counts.items())
      if (!count.is_number_unsigned() || count.get<uint64_t>() > uint64_t(std::numeric_limits<int>::max()))
        return field + "." + shown(pass) + "." + shown(name) + " is " + shown(count.dump()) + ", not a count of shapes";
  }
  return "";
}

// The numbers of summary.breakdown, gpu_telemetry, flops and math_paths that reports print or
// compute with (the efficiency decomposition, the clock loss, the power-cap note, MFU).
std::string why_not_believable_details(const Summary& summary) {
  const json& breakdown = summary.breakdown;
  std::string problem = first_problem(
      {not_an_object(breakdown, "summary.breakdown", "ms_per_step"),
       optional_number_problem(breakdown, "summary.breakdown", "wall_ms_per_step", 0, true, kMaxStepMs)});
  if (!problem.empty()) return problem;
  if (breakdown.contains("ms_per_step") && breakdown.at("ms_per_step").is_object())
    for (const char* part : {"data_wait_ms", "forward_ms", "backward_ms", "exposed_comm_ms", "update_ms",
                             "straggler_wait_ms", "host_gap_ms"}) {
      problem = optional_number_problem(breakdown.at("ms_per_step"), "summary.breakdown.ms_per_step", part, 0, true,
                                        kMaxStepMs);
      if (!problem.empty()) return problem;
    }
  constexpr double kMaxClockMhz = 1e5, kMaxPowerW = 1e6;  // 100 GHz, a megawatt: far beyond any GPU
  const json& telemetry = summary.gpu_telemetry;
  const std::string where = "summary.gpu_telemetry";
  problem = first_problem({optional_number_problem(telemetry, where, "sm_clock_mhz_mean", 0, false, kMaxClockMhz),
                           optional_number_problem(telemetry, where, "power_w_mean", 0, true, kMaxPowerW),
                           optional_number_problem(telemetry, where, "power_limit_w_mean", 0, true, kMaxPowerW),
                           optional_number_problem(telemetry, where, "power_capped_share", 0, true, 1),
                           optional_number_problem(summary.flops, "summary.flops", "tflops_per_sec_per_device", 0,
                                                   true, kMaxItemsPerSec),
                           // Above 1 where fast convolutions do fewer multiplications than counted.
                           optional_number_problem(summary.flops, "summary.flops", "mfu", 0, true, 100)});
  if (!problem.empty()) return problem;
  return why_not_shape_counts(summary.math_paths);
}

// A result that parses but cannot stand in a table: no throughput, no device count, no model, or
// a number no run produces (see the bounds in the header).
std::string why_not_reportable(const Result& result) {
  const Summary& summary = result.summary;
  if (!result.config.contains("model") || !result.config["model"].is_string()) return "its config names no model";
  if (!std::isfinite(summary.items_per_sec) || summary.items_per_sec <= 0)
    return "no throughput (summary.items_per_sec is " + number_text(summary.items_per_sec) + ")";
  if (summary.unit.empty()) return "summary.unit is empty";
  std::string problem = first_problem(
      {outside("summary.num_devices", summary.num_devices, 1, kMaxDevices),
       outside("summary.items_per_sec", summary.items_per_sec, 0, false, kMaxItemsPerSec),
       outside("summary.total_time_s", summary.total_time_s, 0, false, kMaxTotalTimeS),
       outside("summary.measured_steps", summary.measured_steps, 1, kMaxRecordedSteps),
       outside("summary.warmup_steps", summary.warmup_steps, 0, kMaxRecordedSteps),
       outside("summary.global_batch_size", summary.global_batch_size, 1, kMaxBatchSize),
       summary.jitter ? outside("summary.jitter", *summary.jitter, 0, true, kMaxItemsPerSec) : ""});
  if (!problem.empty()) return problem;
  // Every device takes at least one item of the global batch.
  if (summary.global_batch_size < summary.num_devices)
    return "summary.global_batch_size " + std::to_string(summary.global_batch_size) + " is smaller than " +
           "summary.num_devices " + std::to_string(summary.num_devices) + ", impossible for a run";
  const auto batch = result.config.find("batch_size");
  if (batch != result.config.end() && batch->is_number_integer()) {
    const int64_t per_device = batch->is_number_unsigned() && batch->get<uint64_t>() > uint64_t(kMaxBatchSize)
                                   ? kMaxBatchSize + 1
                                   : batch->get<int64_t>();
    problem = outside("config.batch_size", per_device, 1, kMaxBatchSize);
    if (!problem.empty()) return problem;
  }
  problem = why_not_believable_times(result);
  return problem.empty() ? why_not_believable_details(summary) : problem;
}

// Reads and validates `path`, keeping its text for the comparison of copies.
bool load_result_text(const std::string& path, std::string* text, Result* result, std::string* why_not) {
  // A FIFO, a device or a broken link gets the same plain reason as one found in a folder.
  *why_not = why_not_a_file(inspect_path(path));
  if (!why_not->empty()) return false;
  try {
    *text = read_text_file(path);
  } catch (const std::exception& error) {
    *why_not = error.what();
    return false;
  }
  json document;
  *why_not = parse_json_text(*text, &document);
  if (!why_not->empty()) return false;
  *why_not = why_not_a_result(document);
  if (!why_not->empty()) return false;
  try {
    *result = result_from_json(document);
  } catch (const std::exception& error) {
    *why_not = error.what();
    return false;
  }
  *why_not = why_not_reportable(*result);
  return why_not->empty();
}

}  // namespace

std::vector<std::string> find_missing_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> missing;
  for (const std::string& path : paths)
    if (inspect_path(path).kind == PathKind::missing) missing.push_back(path);
  return missing;
}

std::vector<ListedPath> list_result_files(const std::vector<std::string>& paths,
                                          std::vector<SkippedFile>* unreadable) {
  std::vector<ListedPath> listed;
  std::set<std::string> seen;
  auto add = [&](const ListedPath& entry) {
    if (seen.insert(identity_of(entry.path)).second) listed.push_back(entry);
  };
  for (const std::string& path : paths) {
    const PathInfo info = inspect_path(path);
    FolderId id;
    if (info.kind != PathKind::directory || !folder_id(path, &id)) {
      add({path, why_not_a_file(info)});  // named directly: read whatever its extension, and say so if it is no result
      continue;
    }
    // In path order over the whole tree, as one sorted listing of the folder would give them.
    std::vector<ListedPath> below;
    FolderChain chain = {{id, path}};
    search_folder(path, &chain, &below, unreadable);
    std::sort(below.begin(), below.end(), [](const ListedPath& a, const ListedPath& b) { return a.path < b.path; });
    for (const ListedPath& entry : below) add(entry);
  }
  return listed;
}

LoadedResults load_results(const std::vector<std::string>& paths) {
  LoadedResults loaded;
  const std::vector<ListedPath> listed = list_result_files(paths, &loaded.skipped);
  loaded.files_examined = listed.size();
  // Copies are found by hash and confirmed byte for byte against the texts kept here.
  std::unordered_map<size_t, std::vector<size_t>> results_by_hash;
  std::vector<std::string> texts;  // of loaded.results
  for (const ListedPath& file : listed) {
    if (!file.not_readable.empty()) {
      loaded.skipped.push_back({file.path, file.not_readable});
      continue;
    }
    LoadedResult entry;
    entry.path = file.path;
    std::string text, why_not;
    if (!load_result_text(file.path, &text, &entry.result, &why_not)) {
      loaded.skipped.push_back({file.path, escaped_value(why_not)});  // it may quote the file
      continue;
    }
    // A run stopped early measured fewer steps than its configuration says: a table would put it
    // beside complete runs of the same configuration as if it were one.
    if (entry.result.summary.interrupted) {
      loaded.skipped.push_back(
          {file.path, "an interrupted run (stopped early, after " + std::to_string(entry.result.summary.measured_steps) +
                          " measured steps); run it again to include it"});
      continue;
    }
    std::vector<size_t>& same_hash = results_by_hash[std::hash<std::string>{}(text)];
    const auto copy = std::find_if(same_hash.begin(), same_hash.end(), [&](size_t i) { return texts[i] == text; });
    if (copy != same_hash.end()) {
      loaded.skipped.push_back(
          {file.path, "identical to " + escaped_value(loaded.results[*copy].path) + "; counted once"});
      continue;
    }
    same_hash.push_back(loaded.results.size());
    texts.push_back(std::move(text));
    loaded.results.push_back(std::move(entry));
  }
  return loaded;
}

}  // namespace dpbench
