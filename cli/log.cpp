// Console loggers (see log.h).
#include "cli/log.h"

#include <sstream>

#include <spdlog/sinks/stdout_sinks.h>

namespace dpbench {

spdlog::logger& output_log() {
  static spdlog::logger log = [] {
    spdlog::logger logger("dpbench", std::make_shared<spdlog::sinks::stdout_sink_mt>());
    logger.set_pattern("%v");
    logger.flush_on(spdlog::level::trace);  // progress must appear as it happens, also in pipes
    return logger;
  }();
  return log;
}

spdlog::logger& error_log() {
  static spdlog::logger log = [] {
    spdlog::logger logger("dpbench-errors", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger.set_pattern("dpbench: %l: %v");
    logger.flush_on(spdlog::level::trace);
    return logger;
  }();
  return log;
}

void log_lines(spdlog::logger& log, const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) log.info(line);
}

}  // namespace dpbench
