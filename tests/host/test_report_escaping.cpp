// Control bytes from result and curve files never reach the terminal raw: the escaper
// (engine/machine/text_content.h) on values and documents, the cells of markdown and CSV on top,
// and whole outputs of `report`, `compare` and `predict` (markdown, CSV, JSON, SVG) made from
// results whose model, GPU and file names hold an escape sequence.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/machine/text_content.h"
#include "reports/backward_timeline.h"
#include "reports/table_cells.h"
#include "reports/text_file.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

// "\e[2J": clears the screen of a terminal that prints it.
const std::string kClear = "\x1b[2J";

// The first byte a terminal would act on: C0 controls (but line feeds, where `lines`), DEL, and
// C1 controls in UTF-8 (0xC2 0x80..0x9F); npos where none is.
size_t raw_control_at(const std::string& text, bool lines) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && !(lines && c == '\n')) || c == 0x7F) return i;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0 &&
        static_cast<unsigned char>(text[i + 1]) >= 0x80)
      return i;
  }
  return std::string::npos;
}

// Every file in `folder`, each checked for a raw control byte.
void check_files_escaped(const std::string& folder) {
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    INFO(entry.path());
    CHECK(raw_control_at(read_text_file(entry.path().string()), true) == std::string::npos);
  }
}

// A replicated run whose model name, GPU name and hostname hold kClear (and a C1 control).
json hostile_result(int gpus, double speed) {
  json document = result_to_json(make_fixture_result(replicated_run(gpus, speed)));
  document["config"]["model"] = "resnet50" + kClear;
  document["environment"]["hostname"] = "node\x07";
  for (json& device : document["environment"]["devices"]) device["name"] = "H100\xc2\x9b" "31m";
  return document;
}

void write_json(const std::string& path, const json& document) { std::ofstream(path) << document.dump(); }

}  // namespace

TEST_CASE("a value from a file prints escaped, whole, on its line", "[report]") {
  CHECK(escaped_value("resnet50") == "resnet50");
  CHECK(escaped_value("caf\xc3\xa9 / \xe2\x80\x94") == "caf\xc3\xa9 / \xe2\x80\x94");  // UTF-8 kept
  CHECK(escaped_value(kClear + "x") == "\\x1B[2Jx");
  CHECK(escaped_value("a\tb\nc\rd") == "a\\x09b\\x0Ac\\x0Dd");
  CHECK(escaped_value("\xc2\x9b" "1m") == "\\xC2\\x9B1m");  // C1 CSI
  CHECK(escaped_value("\xff\xfe") == "\\xFF\\xFE");         // not UTF-8
  CHECK(escaped_value("a\\b \"q\"") == "a\\b \"q\"");       // no quotes around a value: kept as they are
  CHECK(escaped_value(std::string(100, 'x'), 10) == "xxxxxxxxxx...");
  CHECK(escaped_lines("# title\n" + kClear + "row\n") == "# title\n\\x1B[2Jrow\n");
  // The quoting of a token keeps its old form.
  CHECK(escaped_excerpt("say \"hi\"\x1b") == "say \\\"hi\\\"\\x1B");
}

TEST_CASE("markdown and CSV cells escape control bytes, then their own characters", "[report]") {
  CHECK(markdown_row({kClear + "a|b", "line\nbreak"}) == "| \\x1B[2Ja\\|b | line\\x0Abreak |\n");
  CHECK(csv_field(kClear) == "\\x1B[2J");
  CHECK(csv_field("a,\x1b") == "\"a,\\x1B\"");
  CHECK(csv_field("two\nlines") == "two\\x0Alines");
}

TEST_CASE("report writes no control byte of a result's names or a file's name, in any format", "[report]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "results");
  std::filesystem::create_directories(dir.path() / "plots");
  write_json(dir.file("results/g1.json"), hostile_result(1, 1000));
  write_json(dir.file("results/g2.json"), hostile_result(2, 1900));
  std::ofstream(dir.file("results/" + kClear + ".json")) << "not json";
  for (const char* format : {"markdown", "csv", "json"}) {
    INFO(format);
    const std::string output = dir.file(std::string("report.") + format);
    REQUIRE(run_cli({"report", dir.file("results"), "--format", format, "--output", output, "--plots",
                     dir.file("plots")}) == 0);
    const std::string text = read_text_file(output);
    CHECK(raw_control_at(text, true) == std::string::npos);
    if (std::string(format) == "json") {
      const json document = json::parse(text);  // the names come back whole
      CHECK(document.dump().find("resnet50\\u001b[2J") != std::string::npos);
    } else {
      CHECK_THAT(text, Contains("resnet50\\x1B[2J"));
    }
    if (std::string(format) == "markdown") CHECK_THAT(text, Contains("\\x1B[2J.json"));  // skipped, named escaped
  }
  check_files_escaped(dir.file("plots"));
}

TEST_CASE("compare writes no control byte of a result's names or values, in any format", "[compare]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "base");
  std::filesystem::create_directories(dir.path() / "new");
  write_json(dir.file("base/r.json"), hostile_result(2, 1000));
  json changed = hostile_result(2, 900);
  changed["config"]["optimizer"] = "sgd" + kClear;  // refused, the value named
  write_json(dir.file("new/r.json"), changed);
  for (const char* format : {"markdown", "csv", "json"}) {
    INFO(format);
    const std::string output = dir.file(std::string("compare.") + format);
    REQUIRE(run_cli({"compare", dir.file("base"), dir.file("new"), "--format", format, "--output", output}) == 1);
    const std::string text = read_text_file(output);
    CHECK(raw_control_at(text, true) == std::string::npos);
    if (std::string(format) != "json") CHECK_THAT(text, Contains("optimizer (BASE momentum; NEW sgd\\x1B[2J)"));
  }
}

TEST_CASE("predict writes no control byte of BASE's or a measured run's names", "[predict]") {
  TempDir dir;
  json base = hostile_result(1, 1000);
  base["config"]["model"] = "trivial" + kClear;
  const BackwardTimeline timeline = ten_ms_step_timeline({1000}, {{0, 1000, 4.0}});
  base["summary"]["num_parameters"] = 1000;
  base["summary"]["timeline"] = backward_timeline_to_json(timeline);
  write_json(dir.file("base.json"), base);
  std::filesystem::create_directories(dir.path() / "measured");
  write_json(dir.file("measured/" + kClear + ".json"), hostile_result(2, 1900));  // another model: a note
  const std::string system = std::string(DPBENCH_SOURCE_DIR) + "/systems/reference_backend.json";
  for (const char* format : {"markdown", "csv", "json"}) {
    INFO(format);
    const std::string output = dir.file(std::string("predict.") + format);
    REQUIRE(run_cli({"predict", dir.file("base.json"), dir.file("measured"), "--system", system, "--max_gpus=2",
                     "--format", format, "--output", output, "--plot", dir.file("predict.svg")}) == 0);
    const std::string text = read_text_file(output);
    CHECK(raw_control_at(text, true) == std::string::npos);
    if (std::string(format) == "markdown") {
      CHECK_THAT(text, Contains("trivial\\x1B[2J"));
      CHECK_THAT(text, Contains("\\x1B[2J.json`: another workload than BASE"));
    }
    CHECK(raw_control_at(read_text_file(dir.file("predict.svg")), true) == std::string::npos);
  }
}
