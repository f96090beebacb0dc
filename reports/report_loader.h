// Loading the inputs of `dpbench report`: result files and folders (searched recursively for
// *.json) in any mix, each file read and validated, anything that is not a usable schema_version 1
// result set aside with a note that names it and says why, so no table silently leaves it out.
#pragma once

#include <string>
#include <vector>

#include "reports/result.h"

namespace dpbench {

struct LoadedResult {
  std::string path;  // as found: the given file, or the folder joined with the relative path
  Result result;
};

struct SkippedFile {
  std::string path;
  std::string reason;  // e.g. "not JSON", "result schema_version 2 (this dpbench reads 1)"
};

struct LoadedResults {
  std::vector<LoadedResult> results;  // in path order
  std::vector<SkippedFile> skipped;   // in path order
  size_t files_examined = 0;
};

// The given paths that do not exist (the caller turns them into one error line).
std::vector<std::string> find_missing_paths(const std::vector<std::string>& paths);

// Files named directly, plus every regular *.json file below each folder, sorted within a
// folder; a file reached twice (a file and its folder) is listed once. Folders that cannot be
// read are reported through `unreadable`.
std::vector<std::string> list_result_files(const std::vector<std::string>& paths,
                                           std::vector<SkippedFile>* unreadable);

// Reads and validates one file: the result, or why it is not a usable one.
bool load_result_file(const std::string& path, Result* result, std::string* why_not);

// list_result_files + load_result_file over all of them.
LoadedResults load_results(const std::vector<std::string>& paths);

}  // namespace dpbench
