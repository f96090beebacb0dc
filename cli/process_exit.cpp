// Ending the process (the whole job under a launcher) with one line: see process_exit.h.
#include "cli/process_exit.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cli/flag_parsing.h"
#include "cli/log.h"
#include "engine/communication/process_group.h"

namespace dpbench {
namespace {

// An error is one line whatever it quotes: a value with a newline or an escape sequence from
// anywhere (a flag, a file, a peer) is escaped here, and a message past this length is cut.
constexpr size_t kLongestErrorLine = 4096;

}  // namespace

void print_error(const std::string& raw_message) {
  const std::string message = printable_text(raw_message, kLongestErrorLine);
  const ProcessGroup* group = process_group();
  if (group == nullptr || group->size() <= 1) {
    error_log().error(message);
    return;
  }
  error_log().error("rank " + std::to_string(group->rank()) + " of " + std::to_string(group->size()) + " (" +
                    group->hostnames().at(static_cast<size_t>(group->rank())) + "): " + message);
}

void end_process_with_error(const std::string& message, int exit_code) {
  print_error(message);
  output_log().flush();
  error_log().flush();
  std::fflush(nullptr);
  const ProcessGroup* group = process_group();
  if (group != nullptr && group->size() > 1) group->abort(exit_code);
  std::_Exit(exit_code);
}

void end_job_after_stall(const std::string& waiting_for, double timeout_seconds) {
  // Device threads and the progress thread may all time out at once: the first one speaks.
  static std::atomic<bool> ending{false};
  if (ending.exchange(true))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  char waited[32];
  std::snprintf(waited, sizeof waited, "%g", timeout_seconds);
  std::string line = std::string("no progress for ") + waited + " s (--collective_timeout) in " + waiting_for;
  const ProcessGroup* group = process_group();
  if (group == nullptr || group->size() <= 1) end_process_with_error(line + "; ending the process", 1);
  const ProcessGroup::StallDiagnosis diagnosis = group->diagnose_stall();
  line += ": " + diagnosis.message + "; ending the job";
  // The rank that says the line aborts the job at once; the others give it time to, so the job
  // ends with one line rather than one per rank (they still end it if it cannot).
  if (!diagnosis.speaker) std::this_thread::sleep_for(std::chrono::seconds(15));
  end_process_with_error(line, 1);
}

void watch_process_group_collectives(double timeout_seconds) {
  ProcessGroup* group = process_group();
  if (group == nullptr) return;
  group->set_stall_handler(timeout_seconds, [timeout_seconds](const std::string& what) {
    end_job_after_stall(what, timeout_seconds);
  });
}

}  // namespace dpbench
