// The two console streams of dpbench, as spdlog loggers: `output` (stdout: header, progress,
// summary, notes; bare lines) and `errors` (stderr: "dpbench: error: ..."). One place decides the
// format, and a later --quiet or log file needs no change at the call sites.
#pragma once

#include <chrono>
#include <string>

#include <spdlog/logger.h>

namespace dpbench {

spdlog::logger& output_log();
spdlog::logger& error_log();

// Logs each line of `text` (which may end with a newline) as its own record.
void log_lines(spdlog::logger& log, const std::string& text);

// The output log never blocks and never ends the process: its lines go through a ConsoleWriter
// (cli/console_writer.h) to standard output, or to standard error (`to_standard_error`) where a
// result, trace or JSON takes standard output and must stay one document there.
void send_output_log_to_standard_error(bool to_standard_error);

// Waits, at most kOutputLogPatience without the stream taking anything, for the output log's
// queued lines; then returns the line that says how many were not printed and why, once ("" where
// none were lost since the last call).
std::string finish_output_log();
inline constexpr std::chrono::milliseconds kOutputLogPatience{2000};

}  // namespace dpbench
