// The two flags a process needs before it can read the rest: a job started without MPI meets at
// rank 0 (engine/communication/tcp_process_group.h) before the flags are validated (their validation already
// asks the process group which GPU is this rank's), so --rendezvous_port and --collective_timeout
// are read first, by the reader and with the words the full parse uses.
#pragma once

#include <string>
#include <vector>

namespace dpbench {

struct LaunchSettings {
  int rendezvous_port = 0;        // 0: the launcher's (MASTER_PORT, or derived under srun)
  double timeout_seconds = 300;   // where the command takes no --collective_timeout (comm_bench)
};

// `args` as main() has them, the subcommand's word included. ConfigError for a command line
// `run` refuses to read (cli/flag_reader.h) and for a malformed value of either flag.
LaunchSettings launch_settings_from(const std::vector<std::string>& args);

// The validated value of --rendezvous_port (0 to 65535), shared with the full parse.
int parse_rendezvous_port(const std::string& text);
// The validated value of --collective_timeout (1 s to a day), shared with the full parse.
double parse_collective_timeout(const std::string& text);

}  // namespace dpbench
