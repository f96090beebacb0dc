// Helpers for the data set reader tests: a temporary folder to write tiny data sets into, file
// writers, catching a ConfigError to check what its message names, and running a call that must
// not block on a FIFO without letting a regression hang the test binary.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <random>
#include <string>
#include <thread>
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

inline void make_fifo(const std::string& path) { REQUIRE(::mkfifo(path.c_str(), 0600) == 0); }

// Runs `action` on a thread of its own and returns whether it finished within `seconds`
// (rethrowing what it threw). A reader that blocks in open() or read() on one of `fifos` is
// released by opening and closing the FIFO's writing end, which ends its wait with end-of-file,
// so a regression fails the test instead of hanging it; a thread that still does not finish is
// left behind.
inline bool finishes_without_blocking(const std::function<void()>& action, const std::vector<std::string>& fifos,
                                      int seconds = 20) {
  std::packaged_task<void()> task(action);
  std::future<void> done = task.get_future();
  std::thread worker(std::move(task));
  if (done.wait_for(std::chrono::seconds(seconds)) == std::future_status::ready) {
    worker.join();
    done.get();
    return true;
  }
  for (int attempt = 0; attempt < 50 && done.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready;
       ++attempt) {
    for (const std::string& fifo : fifos) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  if (done.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    worker.join();
  } else {
    worker.detach();
  }
  return false;
}

}  // namespace dpbench::testing
