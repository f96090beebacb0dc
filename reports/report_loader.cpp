// Loading and validating the inputs of `dpbench report` (see report_loader.h).
#include "reports/report_loader.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "reports/result_json.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool is_json_file(const fs::directory_entry& entry) {
  std::error_code error;
  return entry.is_regular_file(error) && entry.path().extension() == ".json";
}

// Folder contents in a fixed order, so the report does not depend on the file system's order.
std::vector<std::string> json_files_below(const std::string& folder, std::vector<SkippedFile>* unreadable) {
  std::vector<std::string> files;
  std::error_code error;
  fs::recursive_directory_iterator walk(folder, fs::directory_options::skip_permission_denied, error);
  if (error) {
    unreadable->push_back({folder, "cannot read the folder: " + error.message()});
    return files;
  }
  for (; walk != fs::recursive_directory_iterator(); walk.increment(error)) {
    if (error) {
      unreadable->push_back({folder, "cannot read part of the folder: " + error.message()});
      break;
    }
    if (is_json_file(*walk)) files.push_back(walk->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The same file reached twice (by name and through its folder) must count once.
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
  if (version.get<int64_t>() != kResultSchemaVersion) {
    return "result schema_version " + version.dump() + " (this dpbench reads " +
           std::to_string(kResultSchemaVersion) + ")";
  }
  return "";
}

// A result that parses but cannot stand in a table (no throughput, no device count, no model).
std::string why_not_reportable(const Result& result) {
  const Summary& summary = result.summary;
  if (!result.config.contains("model") || !result.config["model"].is_string()) return "its config names no model";
  if (summary.num_devices < 1) return "summary.num_devices is " + std::to_string(summary.num_devices);
  if (!std::isfinite(summary.items_per_sec) || summary.items_per_sec <= 0)
    return "no throughput (summary.items_per_sec is " + json(summary.items_per_sec).dump() + ")";
  if (summary.unit.empty()) return "summary.unit is empty";
  return "";
}

}  // namespace

std::vector<std::string> find_missing_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> missing;
  for (const std::string& path : paths) {
    std::error_code error;
    if (!fs::exists(path, error)) missing.push_back(path);
  }
  return missing;
}

std::vector<std::string> list_result_files(const std::vector<std::string>& paths,
                                           std::vector<SkippedFile>* unreadable) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  auto add = [&](const std::string& file) {
    if (seen.insert(identity_of(file)).second) files.push_back(file);
  };
  for (const std::string& path : paths) {
    std::error_code error;
    if (fs::is_directory(path, error)) {
      for (const std::string& file : json_files_below(path, unreadable)) add(file);
    } else {
      add(path);  // named directly: read whatever its extension, and say so if it is no result
    }
  }
  return files;
}

bool load_result_file(const std::string& path, Result* result, std::string* why_not) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const std::exception& error) {
    *why_not = error.what();
    return false;
  }
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error&) {
    *why_not = "not JSON";
    return false;
  }
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

LoadedResults load_results(const std::vector<std::string>& paths) {
  LoadedResults loaded;
  const std::vector<std::string> files = list_result_files(paths, &loaded.skipped);
  loaded.files_examined = files.size();
  for (const std::string& file : files) {
    LoadedResult entry;
    entry.path = file;
    std::string why_not;
    if (load_result_file(file, &entry.result, &why_not)) {
      loaded.results.push_back(std::move(entry));
    } else {
      loaded.skipped.push_back({file, why_not});
    }
  }
  return loaded;
}

}  // namespace dpbench
