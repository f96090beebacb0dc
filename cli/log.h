// The two console streams of dpbench, as spdlog loggers: `output` (stdout: header, progress,
// summary, notes; bare lines) and `errors` (stderr: "dpbench: error: ..."). One place decides the
// format, and a later --quiet or log file needs no change at the call sites.
#pragma once

#include <string>

#include <spdlog/logger.h>

namespace dpbench {

spdlog::logger& output_log();
spdlog::logger& error_log();

// Logs each line of `text` (which may end with a newline) as its own record.
void log_lines(spdlog::logger& log, const std::string& text);

}  // namespace dpbench
