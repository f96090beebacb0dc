// The reference results' folder and a run's summary.reference (see reference_lookup.h).
#include "cli/reference_lookup.h"

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <system_error>

#include "cli/strategies_command.h"
#include "reports/reference_results.h"
#include "reports/report_loader.h"

// Compiled in by cmake/Packaging.cmake, which knows both the build tree and the install layout.
#ifndef DPBENCH_BUILD_TREE
#define DPBENCH_BUILD_TREE ""
#endif
#ifndef DPBENCH_CHECKOUT_REFERENCE_RESULTS
#define DPBENCH_CHECKOUT_REFERENCE_RESULTS ""
#endif
#ifndef DPBENCH_INSTALLED_REFERENCE_RESULTS
#define DPBENCH_INSTALLED_REFERENCE_RESULTS "../share/dpbench/reference_results"
#endif

namespace dpbench {
namespace {

namespace fs = std::filesystem;

// `path` made absolute and free of "." and ".." and links where it exists (weakly_canonical),
// else as given, lexically normal.
fs::path settled(const fs::path& path) {
  std::error_code error;
  const fs::path canonical = fs::weakly_canonical(path, error);
  return error ? path.lexically_normal() : canonical;
}

bool lies_within(const fs::path& path, const fs::path& folder) {
  if (folder.empty()) return false;
  const fs::path relative = path.lexically_relative(folder);
  return !relative.empty() && *relative.begin() != "..";
}

}  // namespace

std::string reference_folder_for_executable(const std::string& executable, const std::string& build_dir,
                                            const std::string& checkout_folder, const std::string& installed_relative) {
  const fs::path program = settled(executable);
  if (!build_dir.empty() && !checkout_folder.empty() && lies_within(program, settled(build_dir)))
    return checkout_folder;
  return (program.parent_path() / installed_relative).lexically_normal().string();
}

std::string checkout_reference_folder_above(const std::string& executable) {
  fs::path folder = settled(executable).parent_path();
  // Deep enough for a test binary in a carried copy: CHECKOUT/.device/NAME/build/tests/.
  for (int level = 0; level < 6 && !folder.empty(); ++level, folder = folder.parent_path()) {
    std::error_code error;
    if (fs::is_directory(folder / "reference_results", error) && fs::is_regular_file(folder / "CMakeLists.txt", error))
      return (folder / "reference_results").string();
    if (folder == folder.root_path()) break;
  }
  return "";
}

std::string default_reference_folder() {
  if (const char* given = std::getenv(kReferenceFolderVariable); given != nullptr && *given != '\0') return given;
  std::error_code error;
  const fs::path executable = fs::read_symlink("/proc/self/exe", error);
  if (error) return DPBENCH_CHECKOUT_REFERENCE_RESULTS;
  const std::string folder = reference_folder_for_executable(
      executable.string(), DPBENCH_BUILD_TREE, DPBENCH_CHECKOUT_REFERENCE_RESULTS, DPBENCH_INSTALLED_REFERENCE_RESULTS);
  if (fs::is_directory(folder, error)) return folder;
  // A build tree copied away from where it was built (a GPU machine's copy of the checkout): the
  // checkout it sits in.
  const std::string above = checkout_reference_folder_above(executable.string());
  return above.empty() ? folder : above;
}

std::optional<nlohmann::json> reference_for_run(const Result& run) {
  const char* given = std::getenv(kReferenceFolderVariable);
  const bool folder_given = given != nullptr && *given != '\0';
  if (run.environment.backend != "cuda" && !folder_given) return std::nullopt;
  const std::string folder = default_reference_folder();
  try {
    std::error_code error;
    if (folder.empty() || !fs::exists(folder, error))
      return unreadable_references_summary(folder, "no reference results: no such folder");
    const LoadedResults references = load_results({folder});
    return reference_summary(run, folder, references, strategy_catalog_for_reports(), ComparisonSettings());
  } catch (const std::exception& failure) {
    return unreadable_references_summary(folder,
                                         std::string("the reference results could not be read: ") + failure.what());
  }
}

}  // namespace dpbench
