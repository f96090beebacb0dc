// Console loggers (see log.h).
#include "cli/log.h"

#include <mutex>
#include <sstream>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "cli/console_writer.h"

namespace dpbench {
namespace {

// Never destroyed: a line logged while the process exits still finds it.
ConsoleWriter& output_writer() {
  static ConsoleWriter* writer = new ConsoleWriter(1);
  return *writer;
}

// Each formatted record goes out as soon as the stream takes it (progress appears as it happens,
// also in pipes), never waiting for a stream that does not.
class ConsoleWriterSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(message, formatted);
    output_writer().write(std::string(formatted.data(), formatted.size()));
  }
  void flush_() override {}
};

}  // namespace

spdlog::logger& output_log() {
  static spdlog::logger log = [] {
    spdlog::logger logger("dpbench", std::make_shared<ConsoleWriterSink>());
    logger.set_pattern("%v");
    return logger;
  }();
  return log;
}

void send_output_log_to_standard_error(bool to_standard_error) { output_writer().redirect(to_standard_error ? 2 : 1); }

std::string finish_output_log() {
  output_writer().drain(kOutputLogPatience);
  return output_writer().untold_losses();
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
