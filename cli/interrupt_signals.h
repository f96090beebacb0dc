// Ctrl-C and SIGTERM during a run keep what was measured: the first SIGINT or SIGTERM asks the run
// to stop after its current step (every device after the same one; engine/training/runner.h), whose
// measured steps are then summarised and written as a result marked interrupted, and the process
// exits 128 + the signal (130, 143). A second signal ends the process at once with that code.
#pragma once

#include <string>

namespace dpbench {

// Installs the handlers (again on every call). With `announce`, the first
// signal also prints one line on stderr saying what happens now (under mpirun only rank 0 does).
void install_interrupt_handlers(bool announce);
// The signal that asked the run to stop (SIGINT or SIGTERM), or 0 when none came.
int interrupt_signal();
// "SIGINT", "SIGTERM".
std::string interrupt_signal_name(int signal_number);
// The exit code of a process stopped by that signal: 128 + its number.
inline int interrupted_exit_code(int signal_number) { return 128 + signal_number; }

// Clears a recorded request, for tests that interrupt several runs in one process.
void forget_interrupt_for_testing();

}  // namespace dpbench
