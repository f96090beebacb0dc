// Watching the process named by DPBENCH_END_WITH_PID (see end_with_process.h).
#include "cli/end_with_process.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/process_exit.h"
#include "engine/errors.h"
#include "engine/machine/environment.h"

namespace dpbench {
namespace {

bool process_is_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

// An environment value quoted in a message: short, and no control bytes.
std::string printable_prefix(const std::string& value) {
  std::string shown;
  for (char c : value.substr(0, 60)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  return shown;
}

}  // namespace

void end_with_process_from_environment() {
  const char* text = std::getenv(kEndWithPidVariable);
  if (text == nullptr || *text == '\0') return;
  const std::string value(text);
  char* end = nullptr;
  errno = 0;
  const long pid = std::strtol(text, &end, 10);
  const bool host_given = end != text && *end == '@';
  if (errno != 0 || end == text || (*end != '\0' && !host_given) || (host_given && end[1] == '\0') || pid <= 1 ||
      pid > 4194304)
    throw ConfigError(std::string(kEndWithPidVariable) + "=" + printable_prefix(value) +
                      ": not PID or PID@HOST; unset it, or name the process whose end should stop this run");
  if (host_given && std::string(end + 1) != machine_host_name()) return;
  static bool watching = false;  // once per process, though tests may call dpbench_main often
  if (watching) return;
  watching = true;
  std::thread([pid] {
    while (!process_is_gone(static_cast<pid_t>(pid))) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    end_process_with_error("the process that started this run (pid " + std::to_string(pid) + ", named by " +
                               kEndWithPidVariable + ") has ended; stopping without writing a result",
                           143);
  }).detach();
}

}  // namespace dpbench
