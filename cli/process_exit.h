// How a dpbench process ends on an error: one line on stderr (naming the rank under a launcher,
// escaped and bounded whatever it quotes), then the process, or under a launcher the whole job,
// ends. The subcommands reach these without the dispatcher (cli/app.h).
#pragma once

#include <string>

namespace dpbench {

// Prints `message` as the one error line: under mpirun, srun or torchrun prefixed with the rank
// that failed and its host; control bytes escaped and the line cut at 4096 bytes.
void print_error(const std::string& message);

// Prints the error line and ends the process at once with `exit_code` (the whole job under a
// launcher): for a failure that leaves threads behind which the process can neither wait for nor
// safely unwind past.
[[noreturn]] void end_process_with_error(const std::string& message, int exit_code);

// For a wait that made no progress for --collective_timeout: under a launcher every other rank is
// asked whether it still answers, and the job ends with one line naming the rank and host that
// stopped (said by the lowest rank that answers); in a single process, the line names the wait.
[[noreturn]] void end_job_after_stall(const std::string& waiting_for, double timeout_seconds);

// Installs end_job_after_stall as the process group's stall handler (no-op without a group).
void watch_process_group_collectives(double timeout_seconds);

}  // namespace dpbench
