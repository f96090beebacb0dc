// dpbench's entry point as a function, so tests can run the whole command line in-process.
#pragma once

#include <string>
#include <vector>

namespace dpbench {

// Dispatches subcommands (`run`, the default; `report`, `compare`, ...). Returns the process exit
// code: 0 success, 1 runtime failure, 2 bad command line, 3 `compare --fail_above` found a series
// slower than it allows. Errors are printed as one line on stderr.
int dpbench_main(const std::vector<std::string>& args);

}  // namespace dpbench
