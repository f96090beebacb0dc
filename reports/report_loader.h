// Loading the inputs of `dpbench report`: result files and folders (searched recursively for
// *.json, following links to folders but never round a loop) in any mix, each file read and
// validated, anything that is not a usable schema_version 1 result set aside with a note that
// names it and says why, so no table silently leaves it out: another schema, a number JSON holds
// but a double cannot (1e400), numbers no run can produce, a run that was interrupted
// (summary.interrupted), a FIFO, socket, device or broken link found in a folder, a second copy
// of one result. Nothing here blocks on a FIFO (engine/machine/file_checks.h).
#pragma once

#include <cstdint>
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
  // e.g. "not JSON", "result schema_version 2 (this dpbench reads 1)", "a FIFO (named pipe), not
  // a regular file", "identical to <first path>; counted once"; control bytes from the file
  // escaped (escaped_value), so it prints as it is
  std::string reason;
};

struct LoadedResults {
  std::vector<LoadedResult> results;  // in path order
  std::vector<SkippedFile> skipped;   // folder problems first, then the files in path order
  size_t files_examined = 0;
};

// Bounds of a believable result. A number beyond them comes from a corrupt or edited file, not
// from a measurement, and printing it as one (a 63-digit speed) would mislead: such a file is
// skipped with a note naming the field. The bounds are far beyond any machine there is.
constexpr double kMaxItemsPerSec = 1e12;      // items (images, words) per second, also jitter and TFLOP/s
constexpr double kMaxTotalTimeS = 1e9;        // about 32 years
constexpr double kMaxStepMs = kMaxTotalTimeS * 1000;  // one step, or any part of one
constexpr int64_t kMaxDevices = 1000000;      // summary.num_devices
constexpr int64_t kMaxBatchSize = 2147483647; // batch sizes and step counts are ints in a run's config
constexpr int64_t kMaxRecordedSteps = 2147483647;  // measured and warm-up steps, as a result records them

// One entry of a listing: a file to read, or something found that cannot be one.
struct ListedPath {
  std::string path;
  std::string not_readable;  // "" for a file to read; else why it is skipped unread
};

// The given paths where nothing is (the caller turns them into one error line); a broken link
// or a link loop is something, and load_results says what.
std::vector<std::string> find_missing_paths(const std::vector<std::string>& paths);

// Files named directly, plus every regular *.json file below each folder and every FIFO, socket,
// device, broken link or link loop there (whatever its name: it is reported, never opened),
// sorted within a folder; a file reached twice (a file and its folder, two links) is listed
// once. Folders that cannot be read and links that lead back to a folder being searched are
// reported through `unreadable`.
std::vector<ListedPath> list_result_files(const std::vector<std::string>& paths,
                                          std::vector<SkippedFile>* unreadable);

// list_result_files, each file read and validated; byte-identical copies of one result
// count once (the first in path order), each later copy skipped with a note naming the first.
LoadedResults load_results(const std::vector<std::string>& paths);

}  // namespace dpbench
