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

// An allocation that would take a device past the memory it may use (--device_memory, or what the
// GPU had free), refused before it is made. The runner turns it, at set-up, into the one line that
// says what each category needs and what batch would fit (Runner, Note [too little memory]).
class OutOfDeviceMemory : public RuntimeError {
 public:
  OutOfDeviceMemory(const std::string& message, int device_index)
      : RuntimeError(message), device_index_(device_index) {}
  int device_index() const { return device_index_; }

 private:
  int device_index_;
};

}  // namespace dpbench
