// Where dpbench finds its reference results (README, "Is my number normal?"), and a run's
// summary.reference from them. The folder: DPBENCH_REFERENCE_RESULTS where it is set; else, for a
// dpbench run from its build tree, the checkout's reference_results/; else, for an installed one,
// share/dpbench/reference_results/ beside its bin/ (cmake/Packaging.cmake installs it there and
// names the path; the build tree and the checkout are compiled in).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "reports/result.h"

namespace dpbench {

inline constexpr const char* kReferenceFolderVariable = "DPBENCH_REFERENCE_RESULTS";

// The folder for an executable at `executable`: `checkout_folder` where the executable lies in
// `build_dir` or below it, else `installed_relative` taken from the executable's folder (made
// lexically normal: "/usr/bin/../share/..." reads "/usr/share/..."). Pure, for the tests.
std::string reference_folder_for_executable(const std::string& executable, const std::string& build_dir,
                                            const std::string& checkout_folder, const std::string& installed_relative);

// The reference_results/ of a checkout (a folder with it and a CMakeLists.txt) at most three
// folders above the executable's; "" where there is none. Pure but for reading the folders.
std::string checkout_reference_folder_above(const std::string& executable);

// DPBENCH_REFERENCE_RESULTS where set and not empty, else reference_folder_for_executable for this
// process's executable (/proc/self/exe) with the paths compiled in, and where that folder does
// not exist (a build tree copied elsewhere) the checkout above the executable's.
std::string default_reference_folder();

// summary.reference for `run` (reports/reference_results.h): every GPU run's, against the default
// folder's references; a reference-backend run's only where DPBENCH_REFERENCE_RESULTS names a
// folder (dpbench's references are GPU runs; the tests make reference-backend ones). Never
// throws: references that cannot be read give a summary saying why.
std::optional<nlohmann::json> reference_for_run(const Result& run);

}  // namespace dpbench
