// What `dpbench report` sets aside before any table: results with numbers no run can produce
// (each named by its field: the summary, the steps, the breakdown, telemetry and FLOPs), files
// holding a number no double holds (1e400), FIFOs, sockets, devices, broken links and link loops
// found in a folder or named directly (reported, never opened, never blocked on), folders that
// link back to themselves, and byte-identical copies of one result (counted once).
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>

#include "cli/strategies_command.h"
#include "cli/report_command.h"
#include "reports/report_tables.h"
#include "reports/text_file.h"
#include "tests/host/data_test_support.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;

namespace {

// A fixture result as JSON, for editing one field into something impossible.
nlohmann::json fixture_json(int gpus = 2, double speed = 1900) {
  return result_to_json(make_fixture_result(replicated_run(gpus, speed)));
}

void write_json(const std::string& path, const nlohmann::json& document) {
  std::ofstream(path) << document.dump();
}

std::string skipped_list(const LoadedResults& loaded, const TempDir& dir) {
  std::string text;
  for (const SkippedFile& file : loaded.skipped) text += file.path + ": " + file.reason + "\n";
  return with_placeholder(text, dir);
}

void make_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof(address.sun_path));
  std::strcpy(address.sun_path, path.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0);
  ::close(fd);  // the socket file stays
}

// A file name, and what to change in a good result to make that file.
using FixtureEdit = std::pair<std::string, std::function<void(nlohmann::json&)>>;

// Writes one edited copy of the fixture per edit into `dir`, and loads the folder.
LoadedResults load_edited_fixtures(const TempDir& dir, const std::vector<FixtureEdit>& edits) {
  for (const auto& [name, edit] : edits) {
    nlohmann::json document = fixture_json();
    edit(document);
    write_json(dir.file(name), document);
  }
  return load_results({dir.path().string()});
}

}  // namespace

TEST_CASE("report sets aside results with impossible numbers, naming the field", "[report]") {
  TempDir dir;
  write_fixture(dir, "good.json", replicated_run(1, 1000));
  const std::vector<FixtureEdit> edits = {
      {"a_speed.json", [](nlohmann::json& d) { d["summary"]["items_per_sec"] = 1e308; }},
      {"b_time.json", [](nlohmann::json& d) { d["summary"]["total_time_s"] = -1.0; }},
      {"c_devices.json", [](nlohmann::json& d) { d["summary"]["num_devices"] = int64_t{1} << 31; }},
      {"d_steps.json", [](nlohmann::json& d) { d["summary"]["measured_steps"] = 0; }},
      {"e_batch.json", [](nlohmann::json& d) { d["summary"]["global_batch_size"] = -8; }},
      {"f_jitter.json", [](nlohmann::json& d) { d["summary"]["jitter"] = -3.0; }},
      {"g_median.json", [](nlohmann::json& d) { d["summary"]["step_time_ms"]["median"] = nullptr; }},
      {"h_step.json", [](nlohmann::json& d) { d["steps"][4]["time_ms"] = -5.0; }},
      {"i_per_gpu.json", [](nlohmann::json& d) { d["config"]["batch_size"] = 0; }},
      {"j_few_items.json", [](nlohmann::json& d) { d["summary"]["global_batch_size"] = 1; }},
      {"k_time_nan.json", [](nlohmann::json& d) { d["summary"]["total_time_s"] = nullptr; }},
  };
  const LoadedResults loaded = load_edited_fixtures(dir, edits);
  CHECK(loaded.results.size() == 1);
  CHECK(skipped_list(loaded, dir) ==
        "<dir>/a_speed.json: summary.items_per_sec is 1e+308, impossible for a run (expected > 0 and <= 1e+12)\n"
        "<dir>/b_time.json: summary.total_time_s is -1.0, impossible for a run (expected > 0 and <= 1e+09)\n"
        "<dir>/c_devices.json: summary.num_devices is 2147483648, impossible for a run (expected 1 to 1000000)\n"
        "<dir>/d_steps.json: summary.measured_steps is 0, impossible for a run (expected 1 to 2147483647)\n"
        "<dir>/e_batch.json: summary.global_batch_size is -8, impossible for a run (expected 1 to 2147483647)\n"
        "<dir>/f_jitter.json: summary.jitter is -3.0, impossible for a run (expected >= 0 and <= 1e+12)\n"
        "<dir>/g_median.json: summary.step_time_ms.median is NaN, impossible for a run (expected >= 0 and <= "
        "1e+12)\n"
        "<dir>/h_step.json: steps[4].time_ms is -5.0, impossible for a run (expected >= 0 and <= 1e+12)\n"
        "<dir>/i_per_gpu.json: config.batch_size is 0, impossible for a run (expected 1 to 2147483647)\n"
        "<dir>/j_few_items.json: summary.global_batch_size 1 is smaller than summary.num_devices 2, impossible "
        "for a run\n"
        "<dir>/k_time_nan.json: summary.total_time_s is NaN, impossible for a run (expected > 0 and <= 1e+09)\n");
  // The markdown lists them as skipped and prints no 300-digit speed.
  const std::string markdown = render_markdown(build_report(loaded, strategy_catalog_for_reports()));
  CHECK_THAT(markdown, Contains("1 result from 12 files in 1 series; 11 files skipped"));
  CHECK(markdown.find("0000000000") == std::string::npos);

  // Large but possible numbers stay.
  nlohmann::json fast = fixture_json(4, 9e11);
  write_json(dir.file("fast.json"), fast);
  CHECK(report_of({dir.file("fast.json")}).results == 1);
}

TEST_CASE("report lists FIFOs, sockets, devices and broken links in a folder as skipped, without blocking",
          "[report]") {
  TempDir dir;
  namespace fs = std::filesystem;
  write_fixture(dir, "good.json", replicated_run(1, 1000));
  const std::string fifo = dir.file("fifo.json");
  make_fifo(fifo);
  make_socket(dir.file("sock"));
  fs::create_symlink("/dev/null", dir.file("null.json"));
  fs::create_symlink("missing.json", dir.file("dangling.json"));
  fs::create_symlink("loop.json", dir.file("loop.json"));
  // A folder that links back to its parent must not be searched forever.
  fs::create_directories(dir.path() / "sub");
  fs::create_symlink("..", dir.path() / "sub" / "back");
  write_fixture(dir, "sub/two.json", replicated_run(2, 1900));

  LoadedResults loaded;
  REQUIRE(finishes_without_blocking([&] { loaded = load_results({dir.path().string()}); }, {fifo}));
  CHECK(loaded.results.size() == 2);
  CHECK(skipped_list(loaded, dir) ==
        "<dir>/sub/back: leads back to the folder '<dir>', which holds it (a loop); not searched again\n"
        "<dir>/dangling.json: a symbolic link whose target does not exist\n"
        "<dir>/fifo.json: a FIFO (named pipe), not a regular file\n"
        "<dir>/loop.json: a loop of symbolic links\n"
        "<dir>/null.json: a character device, not a regular file\n"
        "<dir>/sock: a socket, not a regular file\n");
  CHECK(loaded.files_examined == 7);

  // Named directly: the same reasons, no "no such file" for a link that exists, and no hang.
  CHECK(find_missing_paths({dir.file("dangling.json"), dir.file("loop.json"), dir.file("none.json")}) ==
        std::vector<std::string>{dir.file("none.json")});
  REQUIRE(finishes_without_blocking(
      [&] { loaded = load_results({fifo, dir.file("dangling.json"), dir.file("loop.json")}); }, {fifo}));
  CHECK(skipped_list(loaded, dir) ==
        "<dir>/fifo.json: a FIFO (named pipe), not a regular file\n"
        "<dir>/dangling.json: a symbolic link whose target does not exist\n"
        "<dir>/loop.json: a loop of symbolic links\n");
  int exit_code = -1;
  REQUIRE(finishes_without_blocking([&] { exit_code = run_cli({"report", fifo}); }, {fifo}));
  CHECK(exit_code == 1);  // no results: every file skipped
}

TEST_CASE("report counts byte-identical copies of a result once, naming the first", "[report]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "sub");
  write_fixture(dir, "a.json", replicated_run(1, 1000));
  std::filesystem::copy_file(dir.file("a.json"), dir.file("b_copy.json"));
  std::filesystem::copy_file(dir.file("a.json"), dir.file("sub/c_copy.json"));
  write_fixture(dir, "d.json", replicated_run(2, 1900));
  // The same numbers written differently are not a copy of the bytes: both count.
  nlohmann::json reformatted = result_to_json(make_fixture_result(replicated_run(4, 3600)));
  write_json(dir.file("e.json"), reformatted);
  std::ofstream(dir.file("f.json")) << reformatted.dump(2);

  const LoadedResults loaded = load_results({dir.path().string()});
  REQUIRE(loaded.results.size() == 4);
  CHECK(with_placeholder(loaded.results[0].path, dir) == "<dir>/a.json");
  CHECK(skipped_list(loaded, dir) ==
        "<dir>/b_copy.json: identical to <dir>/a.json; counted once\n"
        "<dir>/sub/c_copy.json: identical to <dir>/a.json; counted once\n");
  const Report report = build_report(loaded, strategy_catalog_for_reports());
  CHECK(report.series.at(0).rows.at(0).runs.size() == 1);  // the 1-GPU row: one run, not three
  CHECK_THAT(with_placeholder(render_markdown(report), dir),
             Contains("- `<dir>/b_copy.json`: identical to <dir>/a.json; counted once\n"));
}

TEST_CASE("report sets aside a file holding a number no double holds, naming it, and reports the rest",
          "[report]") {
  TempDir dir;
  write_fixture(dir, "good.json", replicated_run(1, 1000));
  std::string text = fixture_json().dump();
  text.replace(text.find("\"final_loss\":"), 13, "\"final_loss\":1e400,\"x\":");
  std::ofstream(dir.file("huge.json")) << text;
  const LoadedResults loaded = load_results({dir.path().string()});
  CHECK(loaded.results.size() == 1);
  CHECK(skipped_list(loaded, dir) ==
        "<dir>/huge.json: holds the number 1e400, beyond the range of a double (no file dpbench writes)\n");
  CHECK(run_cli({"report", dir.path().string(), "--output", dir.file("report.md")}) == 0);
  CHECK_THAT(read_text_file(dir.file("report.md")), Contains("| 1 |"));
}

TEST_CASE("report sets aside a result whose breakdown, telemetry, FLOPs or steps hold impossible numbers",
          "[report]") {
  TempDir dir;
  write_fixture(dir, "good.json", replicated_run(1, 1000));
  const std::vector<FixtureEdit> edits = {
      {"a_wall.json", [](nlohmann::json& d) { d["summary"]["breakdown"]["wall_ms_per_step"] = 1e300; }},
      {"b_part.json", [](nlohmann::json& d) { d["summary"]["breakdown"]["ms_per_step"]["backward_ms"] = -2.0; }},
      {"c_parts.json", [](nlohmann::json& d) { d["summary"]["breakdown"]["ms_per_step"] = "fast"; }},
      {"d_clock.json", [](nlohmann::json& d) { d["summary"]["gpu_telemetry"]["sm_clock_mhz_mean"] = "high"; }},
      {"e_share.json", [](nlohmann::json& d) { d["summary"]["gpu_telemetry"]["power_capped_share"] = 7.0; }},
      {"f_mfu.json", [](nlohmann::json& d) { d["summary"]["flops"]["mfu"] = -0.5; }},
      {"g_shapes.json",
       [](nlohmann::json& d) {
         d["summary"]["math_paths"] = {{"convolutions", {{"classic_algorithms", {{"forward", {{"fft", "many"}}}}}}}};
       }},
      {"h_items.json", [](nlohmann::json& d) { d["steps"][3]["items"] = -5; }},
      {"i_wait.json", [](nlohmann::json& d) { d["steps"][3]["data_wait_ms"] = 1e300; }},
  };
  const LoadedResults loaded = load_edited_fixtures(dir, edits);
  CHECK(loaded.results.size() == 1);
  CHECK(skipped_list(loaded, dir) ==
        "<dir>/a_wall.json: summary.breakdown.wall_ms_per_step is 1e+300, impossible for a run (expected >= 0 and "
        "<= 1e+12)\n"
        "<dir>/b_part.json: summary.breakdown.ms_per_step.backward_ms is -2.0, impossible for a run (expected >= 0 "
        "and <= 1e+12)\n"
        "<dir>/c_parts.json: summary.breakdown.ms_per_step is a JSON string, not an object\n"
        "<dir>/d_clock.json: summary.gpu_telemetry.sm_clock_mhz_mean is \"high\", not a number\n"
        "<dir>/e_share.json: summary.gpu_telemetry.power_capped_share is 7.0, impossible for a run (expected >= 0 "
        "and <= 1)\n"
        "<dir>/f_mfu.json: summary.flops.mfu is -0.5, impossible for a run (expected >= 0 and <= 100)\n"
        "<dir>/g_shapes.json: summary.math_paths.convolutions.classic_algorithms.forward.fft is \"many\", not a "
        "count of shapes\n"
        "<dir>/h_items.json: steps[3].items is -5, impossible for a run (expected 0 to 128)\n"
        "<dir>/i_wait.json: steps[3].data_wait_ms is 1e+300, impossible for a run (expected >= 0 and <= 1e+12)\n");
}
