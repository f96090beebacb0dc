// A run that outlives the script that started it is worse than no run: it competes with the
// script's rerun for the same GPUs and renames a stale result over the rerun's. A sweep names
// itself in DPBENCH_END_WITH_PID; dpbench then watches that process and stops, writing no result,
// soon after it ends, even when it was killed by SIGKILL and could not pass anything on.
#pragma once

namespace dpbench {

inline constexpr const char* kEndWithPidVariable = "DPBENCH_END_WITH_PID";

// Starts the watch when DPBENCH_END_WITH_PID is set, to PID or PID@HOST; with a host, only a
// process on that host watches (a pid means nothing elsewhere: ranks on other hosts end with the
// job). Throws ConfigError when the value is neither. When that process is gone (checked every
// 200 ms) the process ends with one line and exit code 143, as if it had been sent SIGTERM (the
// whole job under mpirun).
void end_with_process_from_environment();

}  // namespace dpbench
