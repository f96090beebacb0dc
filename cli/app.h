// dpbench's entry point as a function, so tests can run the whole command line in-process.
#pragma once

#include <string>
#include <vector>

namespace dpbench {

// Dispatches subcommands (`run`, the default; `report`, `compare`, ...). Returns the process exit
// code: 0 success, 1 runtime failure, 2 bad command line, 3 `compare --fail_above` found a series
// slower than it allows. Errors are printed as one line on stderr.
int dpbench_main(const std::vector<std::string>& args);

// Prints the error line (naming the rank under mpirun) and ends the process at once with
// `exit_code` (the whole job under mpirun): for a failure that leaves threads behind which the
// process can neither wait for nor safely unwind past.
[[noreturn]] void end_process_with_error(const std::string& message, int exit_code);

// For a wait that made no progress for --collective_timeout: under mpirun every other rank is
// asked whether it still answers, and the job ends with one line naming the rank and host that
// stopped (said by the lowest rank that answers); in a single process, the line names the wait.
[[noreturn]] void end_job_after_stall(const std::string& waiting_for, double timeout_seconds);

// Installs end_job_after_stall as the process group's stall handler (no-op without a group).
void watch_process_group_collectives(double timeout_seconds);

}  // namespace dpbench
