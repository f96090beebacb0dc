// Reading the launch flags early (see the header).
#include "cli/launch_flags.h"

#include "cli/flag_limits.h"
#include "cli/flag_parsing.h"
#include "cli/flags.h"

namespace dpbench {

int parse_rendezvous_port(const std::string& text) {
  return parse_int_at_least("rendezvous_port", text, 0, "must be a port, 1 to 65535 (0: MASTER_PORT, or a few derived from the Slurm job and step ids)", 65535);
}

double parse_collective_timeout(const std::string& text) {
  const double seconds = parse_finite_number("collective_timeout", text, "a number of seconds, e.g. 300");
  if (!(seconds >= 1.0) || seconds > kMaxCollectiveTimeoutSeconds)
    reject("collective_timeout", text, "accepted: 1 to " + std::to_string(kMaxCollectiveTimeoutSeconds) + " seconds (a day)");
  return seconds;
}

LaunchSettings launch_settings_from(const std::vector<std::string>& args) {
  LaunchSettings settings;
  if (!args.empty() && args.front() == "comm_bench") return settings;  // it takes neither flag
  const size_t skipped = !args.empty() && args.front() == "run" ? 1 : 0;
  // The reader run's parse uses, so both see the same values (-rendezvous_port=N, --name N).
  const ReadFlags flags = read_flags(run_flag_table(), {args.begin() + static_cast<long>(skipped), args.end()});
  if (flags.help() || flags.given("version")) return settings;  // nothing is validated then
  settings.rendezvous_port = parse_rendezvous_port(flags.text("rendezvous_port"));
  settings.timeout_seconds = parse_collective_timeout(flags.text("collective_timeout"));
  return settings;
}

}  // namespace dpbench
