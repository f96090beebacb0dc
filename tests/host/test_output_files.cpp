// Where results, reports and plots may be written, and how: regular files replaced atomically,
// links followed to their target, devices, FIFOs and standard output written through and never
// renamed over, everything else refused before a run starts.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <fstream>
#include <future>
#include <string>

#include "engine/errors.h"
#include "engine/machine/file_checks.h"
#include "reports/text_file.h"
#include "test_support.h"

using Catch::Contains;
using dpbench::check_output_path;
using dpbench::ConfigError;
using dpbench::OutputMode;
using dpbench::resolve_output_target;
using dpbench::RuntimeError;
using dpbench::write_text_atomically;
using dpbench::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool is_character_device(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISCHR(info.st_mode);
}

std::vector<std::string> names_in(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// What `write` sends to standard output, caught in a file.
std::string captured_stdout(const TempDir& dir, const std::function<void()>& write) {
  const std::string capture = dir.file("stdout.txt");
  std::fflush(stdout);
  const int saved = ::dup(1);
  const int fd = ::open(capture.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 1);
  ::close(fd);
  write();
  ::dup2(saved, 1);
  ::close(saved);
  return contents(capture);
}

}  // namespace

TEST_CASE("a regular file or a new name is replaced atomically, leaving no temporary file", "[output_files]") {
  TempDir dir;
  const std::string path = dir.file("out.json");
  CHECK(resolve_output_target(path, "result file").mode == OutputMode::replace_atomically);
  write_text_atomically(path, "first\n");
  write_text_atomically(path, "second\n");
  CHECK(contents(path) == "second\n");
  CHECK(names_in(dir) == std::vector<std::string>{"out.json"});
}

TEST_CASE("/dev/null is written through and stays a device", "[output_files]") {
  REQUIRE(is_character_device("/dev/null"));
  CHECK(resolve_output_target("/dev/null", "result file").mode == OutputMode::write_through);
  check_output_path("/dev/null", "--result_file");
  write_text_atomically("/dev/null", "discarded\n", "result file");
  CHECK(is_character_device("/dev/null"));
  CHECK_FALSE(fs::exists("/dev/null.tmp." + std::to_string(::getpid())));
}

TEST_CASE("a full device reports its error and is not replaced", "[output_files]") {
  if (!is_character_device("/dev/full")) return;  // not every container has it
  CHECK_THROWS_WITH(write_text_atomically("/dev/full", "x\n", "result file"),
                    Contains("/dev/full") && Contains("No space left on device"));
  CHECK(is_character_device("/dev/full"));
}

TEST_CASE("standard output: -, /dev/stdout, /dev/fd/1 and links to them are written through", "[output_files]") {
  TempDir dir;
  fs::create_symlink("/dev/stdout", dir.file("to_stdout"));
  for (const std::string& name : {std::string("-"), std::string("/dev/stdout"), std::string("/dev/fd/1"),
                                  std::string("/proc/self/fd/1"), dir.file("to_stdout")}) {
    INFO(name);
    CHECK(resolve_output_target(name, "report").mode == OutputMode::file_descriptor);
    CHECK(captured_stdout(dir, [&] { write_text_atomically(name, "hello " + name + "\n"); }) == "hello " + name + "\n");
  }
  CHECK(fs::is_symlink(dir.file("to_stdout")));
  CHECK(is_character_device("/dev/null"));
}

TEST_CASE("a FIFO is written through to its reader and stays a FIFO", "[output_files]") {
  TempDir dir;
  const std::string fifo = dir.file("pipe.json");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  check_output_path(fifo, "--result_file");  // no reader yet: the check does not open it
  auto reader = std::async(std::launch::async, [&] { return contents(fifo); });
  write_text_atomically(fifo, "{\"through\": true}\n", "result file");
  REQUIRE(reader.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(reader.get() == "{\"through\": true}\n");
  CHECK(dpbench::inspect_path(fifo).kind == dpbench::PathKind::fifo);
  CHECK(names_in(dir) == std::vector<std::string>{"pipe.json"});
}

TEST_CASE("a symbolic link is followed: its target is replaced, the link stays", "[output_files]") {
  TempDir dir;
  fs::create_directory(dir.path() / "real");
  const std::string target = dir.file("real/result.json");
  std::ofstream(target) << "old\n";
  fs::create_symlink("real/result.json", dir.file("link.json"));  // relative, as users make them
  fs::create_symlink(dir.file("link.json"), dir.file("link_to_link.json"));
  CHECK(resolve_output_target(dir.file("link_to_link.json"), "result file").path == dir.path().string() + "/real/result.json");
  check_output_path(dir.file("link_to_link.json"), "--result_file");
  write_text_atomically(dir.file("link_to_link.json"), "new\n");
  CHECK(fs::is_symlink(dir.file("link.json")));
  CHECK(fs::is_symlink(dir.file("link_to_link.json")));
  CHECK(contents(target) == "new\n");

  // A link to a name that does not exist yet creates that name.
  fs::create_symlink("real/later.json", dir.file("dangling.json"));
  write_text_atomically(dir.file("dangling.json"), "made\n");
  CHECK(fs::is_symlink(dir.file("dangling.json")));
  CHECK(contents(dir.file("real/later.json")) == "made\n");
}

TEST_CASE("folders, sockets, link loops and missing folders are refused before anything runs", "[output_files]") {
  TempDir dir;
  CHECK_THROWS_WITH(check_output_path(dir.path().string(), "--result_file"),
                    Contains("--result_file=" + dir.path().string() + ": it is a directory"));
  fs::create_symlink(dir.file("b"), dir.file("a"));
  fs::create_symlink(dir.file("a"), dir.file("b"));
  CHECK_THROWS_WITH(check_output_path(dir.file("a"), "--result_file"), Contains("loop of symbolic links"));
  CHECK_THROWS_WITH(check_output_path(dir.file("no/such/out.json"), "--output"),
                    Contains("its folder '" + dir.file("no/such") + "' does not exist"));
  std::ofstream(dir.file("plain")) << "x";
  CHECK_THROWS_WITH(check_output_path(dir.file("plain/out.json"), "--output"),
                    Contains("is a regular file, not a folder"));

  const std::string socket_path = dir.file("s");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_path.c_str());
  if (socket_path.size() < sizeof address.sun_path &&
      ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    CHECK_THROWS_WITH(check_output_path(socket_path, "--result_file"), Contains("it is a socket"));
    CHECK_THROWS_AS(write_text_atomically(socket_path, "x"), RuntimeError);
  }
  ::close(fd);
  CHECK_THROWS_AS(check_output_path("/proc/version", "--result_file"), ConfigError);
  CHECK_THROWS_WITH(check_output_path("/proc/version", "--result_file"), Contains("temporary file"));
}

TEST_CASE("a name at the length limit is written: its temporary name is shortened to fit", "[output_files]") {
  TempDir dir;
  const std::string name(250, 'r');
  const std::string path = dir.file(name + ".json");  // 255 bytes, the most a name may have
  const dpbench::OutputTarget target = check_output_path(path, "--result_file");
  CHECK(fs::path(target.temporary_path).filename().string().size() <= 255);
  write_text_atomically(path, "long\n");
  CHECK(contents(path) == "long\n");
  CHECK(names_in(dir) == std::vector<std::string>{name + ".json"});
}

TEST_CASE("temporary files of killed writers are removed, those of running ones kept", "[output_files]") {
  TempDir dir;
  const std::string path = dir.file("result.json");
  // A pid far above pid_max is never running; our parent always is.
  const std::string dead = dir.file("result.json.tmp.999999999");
  const std::string alive = dir.file("result.json.tmp." + std::to_string(::getppid()));
  const std::string unrelated = dir.file("other.json.tmp.999999999");
  for (const std::string& file : {dead, alive, unrelated}) std::ofstream(file) << "{\"half";
  check_output_path(path, "--result_file");
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(alive));
  CHECK(fs::exists(unrelated));  // another output's: checked when that one is written
  CHECK_FALSE(fs::exists(path));  // the check creates nothing that stays
}

TEST_CASE("a run with --result_file=/dev/null or a link writes through them", "[output_files]") {
  TempDir dir;
  const std::vector<std::string> run = {"--device=cpu", "--model=trivial", "--num_batches=2", "--num_warmup_batches=1"};
  auto with = [&](const std::string& result_file) {
    std::vector<std::string> args = run;
    args.push_back("--result_file=" + result_file);
    return dpbench::testing::run_cli(args);
  };
  CHECK(with("/dev/null") == 0);
  CHECK(is_character_device("/dev/null"));

  fs::create_symlink("kept.json", dir.file("latest.json"));
  CHECK(with(dir.file("latest.json")) == 0);
  CHECK(fs::is_symlink(dir.file("latest.json")));
  CHECK_THAT(contents(dir.file("kept.json")), Contains("\"schema_version\""));

  CHECK(with(dir.file("missing/out.json")) == 2);
  CHECK_FALSE(fs::exists(dir.file("missing")));
}
