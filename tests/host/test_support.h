// Helpers shared by the host and GPU tests: temporary folders, running the CLI in-process, and
// reading a result back.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/app.h"

namespace dpbench::testing {

// A fresh folder under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::random_device entropy;
    path_ = std::filesystem::temp_directory_path() /
            ("dpbench-test-" + std::to_string(entropy()) + std::to_string(entropy()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline int run_cli(std::vector<std::string> args) { return dpbench_main(args); }

// The message of the `Error` that `call` throws, or "(no <what>)": for exact checks of error lines.
template <typename Error, typename Call>
std::string error_message_of(Call call, const char* what) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return std::string("(no ") + what + ")";
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace dpbench::testing
