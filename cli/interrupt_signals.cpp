// SIGINT and SIGTERM handlers for a graceful stop (see interrupt_signals.h). The handler only
// stores the signal and writes fixed text with write(2): both are async-signal-safe.
#include "cli/interrupt_signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace dpbench {
namespace {

std::atomic<int> g_signal{0};
std::atomic<bool> g_announce{false};
static_assert(std::atomic<int>::is_always_lock_free, "the handler's store must be lock-free");

void write_text(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void on_signal(int signal_number) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, signal_number)) {
    if (g_announce.load())
      write_text(signal_number == SIGINT
                     ? "\ndpbench: SIGINT: stopping after the current step and keeping the steps measured so far "
                       "(press Ctrl-C again to stop at once)\n"
                     : "\ndpbench: SIGTERM: stopping after the current step and keeping the steps measured so far "
                       "(a second signal stops at once)\n");
    return;
  }
  if (g_announce.load()) write_text("\ndpbench: stopped at once; no result written\n");
  ::_exit(128 + signal_number);
}

}  // namespace

void install_interrupt_handlers(bool announce) {
  g_announce = announce;
  // Installed on every call: something else (a test framework) may have replaced them since.
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }

std::string interrupt_signal_name(int signal_number) {
  if (signal_number == SIGINT) return "SIGINT";
  if (signal_number == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal_number);
}

void forget_interrupt_for_testing() { g_signal = 0; }

}  // namespace dpbench
