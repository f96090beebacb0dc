// Helpers for the data set reader tests: a temporary folder to write tiny data sets into, file
// writers, and catching a ConfigError to check what its message names.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "tests/host/test_support.h"

namespace dpbench::testing {

// A fresh folder under the system temp dir, removed when the object goes away.
class DataTempDir {
 public:
  DataTempDir() {
    std::random_device entropy;
    path_ = std::filesystem::temp_directory_path() /
            ("dpbench-data-test-" + std::to_string(entropy()) + std::to_string(entropy()));
    std::filesystem::create_directories(path_);
  }
  ~DataTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  DataTempDir(const DataTempDir&) = delete;
  DataTempDir& operator=(const DataTempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// The text as given: the caller writes the line terminators.
inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

using CliArgs = std::vector<std::string>;

inline CliArgs joined(CliArgs a, const CliArgs& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs dpbench with `args` plus --result_file=<dir>/<name>; the run must succeed. Returns the result.
inline nlohmann::json run_result(CliArgs args, const DataTempDir& dir, const std::string& name) {
  args.push_back("--result_file=" + dir.file(name));
  REQUIRE(run_cli(args) == 0);
  return read_json(dir.file(name));
}

// Runs `action`, which must throw a ConfigError, and returns its message.
template <typename Action>
std::string config_error_of(Action&& action) {
  try {
    action();
  } catch (const ConfigError& error) {
    return error.what();
  }
  FAIL("expected a ConfigError");
  return {};
}

}  // namespace dpbench::testing
