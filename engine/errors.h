// Error types: library code throws these; main() catches them, prints one line and picks the exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace dpbench {

// A bad flag value or an impossible combination: the user can fix it. Exit code 2, no result file.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& message) : std::runtime_error(message) {}
};

// A failure while running (a library call, out of memory, an unwritable file). Exit code 1.
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace dpbench
