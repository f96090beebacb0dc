// Reading the launch flags early (see the header).
#include "cli/launch_flags.h"

#include <optional>

#include "cli/flag_limits.h"
#include "cli/flag_parsing.h"

namespace dpbench {
namespace {

// The value of --name=V or --name V, the last one given; none when absent.
std::optional<std::string> find_value(const std::vector<std::string>& args, const std::string& name) {
  std::optional<std::string> value;
  const std::string with_equals = "--" + name + "=";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind(with_equals, 0) == 0) value = args[i].substr(with_equals.size());
    else if (args[i] == "--" + name && i + 1 < args.size()) value = args[i + 1];
  }
  return value;
}

}  // namespace

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
  if (const auto port = find_value(args, "rendezvous_port")) settings.rendezvous_port = parse_rendezvous_port(*port);
  if (const auto timeout = find_value(args, "collective_timeout"))
    settings.timeout_seconds = parse_collective_timeout(*timeout);
  return settings;
}

}  // namespace dpbench
