// `dpbench report` as a command: folders and files in any mix, files that are skipped with a note
// (another schema_version, not JSON, not a result), and the command-line errors: a path that does
// not exist and an unknown --format (ConfigError, exit 2), no results at all (exit 1).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/compare_command.h"
#include "cli/predict_command.h"
#include "cli/strategies_command.h"
#include "cli/report_command.h"
#include "engine/errors.h"
#include "reports/comparison_tables.h"
#include "reports/prediction_tables.h"
#include "reports/report_tables.h"
#include "reports/text_file.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

std::string config_error_of(const std::vector<std::string>& args) {
  return error_message_of<ConfigError>([&] { parse_report_flags(args); }, "ConfigError");
}

}  // namespace

TEST_CASE("report reads folders recursively and files directly, each file once", "[report]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "sweep" / "nested");
  write_fixture(dir, "sweep/one.json", replicated_run(1, 1000));
  write_fixture(dir, "sweep/nested/two.json", replicated_run(2, 1900));
  write_fixture(dir, "elsewhere.json", replicated_run(4, 3600));
  write_text(dir.file("sweep/notes.txt"), "not looked at: only *.json is read inside folders");
  const LoadedResults loaded =
      load_results({dir.file("sweep"), dir.file("elsewhere.json"), dir.file("sweep/nested/two.json")});
  CHECK(loaded.files_examined == 3);
  CHECK(loaded.skipped.empty());
  REQUIRE(loaded.results.size() == 3);
  CHECK(with_placeholder(loaded.results[0].path, dir) == "<dir>/sweep/nested/two.json");
  CHECK(with_placeholder(loaded.results[1].path, dir) == "<dir>/sweep/one.json");
  CHECK(with_placeholder(loaded.results[2].path, dir) == "<dir>/elsewhere.json");
  const Report report = build_report(loaded, strategy_catalog_for_reports());
  REQUIRE(report.series.size() == 1);
  CHECK(report.series[0].rows.size() == 3);
}

TEST_CASE("report skips a result of another schema_version with a note naming the file", "[report]") {
  TempDir dir;
  write_fixture(dir, "one.json", replicated_run(1, 1000));
  nlohmann::json future = result_to_json(make_fixture_result(replicated_run(2, 1900)));
  future["schema_version"] = 4;
  write_text(dir.file("future.json"), future.dump());
  const Report report = report_of({dir.path().string()});
  CHECK(report.results == 1);
  REQUIRE(report.skipped.size() == 1);
  CHECK(report.skipped[0].reason == "result schema_version 4 (this dpbench reads 1 to 3)");
  const std::string markdown = with_placeholder(render_markdown(report), dir);
  CHECK_THAT(markdown, Contains("1 result from 2 files in 1 series; 1 file skipped (listed at the end).\n"));
  CHECK_THAT(markdown, Contains("\n## Skipped files\n\n- `<dir>/future.json`: result schema_version 4 (this dpbench "
                                "reads 1 to 3)\n"));
}

TEST_CASE("report skips files that are not dpbench results with a note naming each", "[report]") {
  TempDir dir;
  write_fixture(dir, "good.json", replicated_run(1, 1000));
  write_text(dir.file("broken.json"), "{\"schema_version\": 1, \"summ");
  write_text(dir.file("settings.json"), "{\"learning_rate\": 0.1}");
  write_text(dir.file("list.json"), "[1, 2, 3]");
  write_text(dir.file("comm.json"), "{\"schema_version\": 1, \"command\": \"comm_bench\", \"rows\": []}");
  write_text(dir.file("partial.json"), "{\"schema_version\": 1, \"summary\": {}, \"steps\": []}");
  nlohmann::json stalled = result_to_json(make_fixture_result(replicated_run(2, 1900)));
  stalled["summary"]["items_per_sec"] = 0.0;
  write_text(dir.file("stalled.json"), stalled.dump());
  write_text(dir.file("log.txt"), "step 10 images/s: 1000");

  const Report report = report_of({dir.path().string(), dir.file("log.txt")});
  CHECK(report.results == 1);
  std::string skipped;
  for (const SkippedFile& file : report.skipped) skipped += with_placeholder(file.path, dir) + ": " + file.reason + "\n";
  CHECK(skipped ==
        "<dir>/broken.json: not JSON\n"
        "<dir>/comm.json: a comm_bench result, not a training run\n"
        "<dir>/list.json: not a dpbench result (a JSON array)\n"
        "<dir>/partial.json: not a dpbench result: missing key 'tool'\n"
        "<dir>/settings.json: not a dpbench result (no schema_version and summary)\n"
        "<dir>/stalled.json: no throughput (summary.items_per_sec is 0.0)\n"
        "<dir>/log.txt: not JSON\n");
  CHECK_THAT(with_placeholder(render_markdown(report), dir), Contains("- `<dir>/log.txt`: not JSON\n"));
}

TEST_CASE("report of a path that does not exist is a ConfigError naming it, exit code 2", "[report]") {
  TempDir dir;
  write_fixture(dir, "one.json", replicated_run(1, 1000));
  const std::string missing = dir.file("no_such_folder");
  CHECK(config_error_of({dir.file("one.json"), missing}) ==
        "report: no such file or folder: '" + missing + "' (give result files or folders that hold them)");
  const std::string output = dir.file("report.md");
  CHECK(run_cli({"report", missing, "--output=" + output}) == 2);
  CHECK_FALSE(std::filesystem::exists(output));
}

TEST_CASE("report flags: unknown --format, unknown flags, missing values and no paths exit 2", "[report]") {
  TempDir dir;
  write_fixture(dir, "one.json", replicated_run(1, 1000));
  const std::string file = dir.file("one.json");
  CHECK(config_error_of({file, "--format=xml"}) == "--format=xml: unknown report format; accepted: markdown, csv, json");
  CHECK(config_error_of({file, "--format"}) == "--format: missing a value; e.g. --format=FORMAT");
  CHECK(config_error_of({file, "--format="}) == "--format: empty value; e.g. --format=FORMAT");
  CHECK(config_error_of({file, "--colour=red"}) == "--colour=red: unknown flag; dpbench report --help lists the accepted flags");
  CHECK(config_error_of({file, "--plot=figures"}) ==
        "--plot=figures: unknown flag; did you mean --plots? dpbench report --help lists the accepted flags");
  // A flag given twice must say the same both times, as for every command.
  CHECK(config_error_of({file, "--format=csv", "--format=json"}) == "--format is given twice, as csv and as json; give it once");
  CHECK(parse_report_flags({file, "--format=csv", "-format", "csv"}).format == ReportFormat::csv);
  CHECK_THAT(config_error_of({}), Contains("report: no result files or folders given"));
  CHECK_THAT(config_error_of({file, "--output=" + dir.file("missing/report.md")}), Contains("does not exist"));
  CHECK(run_cli({"report", file, "--format=xml"}) == 2);
  CHECK(run_cli({"report"}) == 2);
  CHECK(parse_report_flags({file, "--format", "csv"}).format == ReportFormat::csv);
  // After "--" everything is a path, even what looks like a flag.
  CHECK_THAT(config_error_of({"--format=json", "--", "--odd-name.json"}),
             Contains("no such file or folder: '--odd-name.json'"));
}

TEST_CASE("report with no results at all fails with one error line and exit code 1", "[report]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "empty");
  write_text(dir.file("junk.json"), "junk");
  try {
    run_report_command({dir.file("empty"), dir.file("junk.json")});
    FAIL("no error");
  } catch (const RuntimeError& error) {
    CHECK(std::string(error.what()) == "report: no dpbench results to report in '" + dir.file("empty") + "', '" +
                                           dir.file("junk.json") + "' (1 file(s) examined, 1 skipped)");
  }
  CHECK(run_cli({"report", dir.file("empty")}) == 1);
}

TEST_CASE("report --output writes the chosen format to a file and --help prints the usage", "[report]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "results");
  write_fixture(dir, "results/one.json", replicated_run(1, 1000));
  write_fixture(dir, "results/two.json", replicated_run(2, 1900));
  const Report report = report_of({dir.file("results")});
  for (const auto& [format, rendered] : std::vector<std::pair<std::string, std::string>>{
           {"markdown", render_markdown(report)}, {"csv", render_csv(report)}, {"json", render_json(report)}}) {
    const std::string output = dir.file("report." + format);
    REQUIRE(run_cli({"report", "--format=" + format, dir.file("results"), "--output", output}) == 0);
    CHECK(read_text_file(output) == rendered);
  }
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 4);  // no temporary files left
  CHECK(parse_report_flags({"--help"}).help);
  CHECK_THAT(report_help_text(), Contains("usage: dpbench report [flags] PATH..."));
  for (const char* flag : {"--output FILE", "--format FORMAT", "--plots DIR"}) CHECK_THAT(report_help_text(), Contains(flag));
  CHECK(run_cli({"report", "--help"}) == 0);
}

// Every --format is parsed once, through the formats' one table of names, into ReportFormat; each
// command accepts the formats its subject has a writer for, and refuses others in one wording.
TEST_CASE("report, compare and predict parse --format through one table of names", "[report]") {
  auto format_error = [](auto parse, const std::vector<std::string>& args) {
    try {
      parse(args);
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  const std::string refusal = "--format=xml: unknown report format; accepted: markdown, csv, json";
  CHECK(format_error(parse_report_flags, {"x.json", "--format=xml"}) == refusal);
  CHECK(format_error(parse_compare_flags, {"a.json", "b.json", "--format=xml"}) == refusal);
  CHECK(format_error(parse_predict_flags, {"a.json", "--system=s.json", "--format=xml"}) == refusal);
  for (const ReportFormatName& name : report_format_names()) {
    INFO(name.name);
    CHECK(parse_report_format(name.name, report_writers()) == name.value);
    CHECK(parse_report_format(name.name, comparison_writers()) == name.value);
    CHECK(parse_report_format(name.name, prediction_writers()) == name.value);
  }
  CHECK(parse_report_format("md", report_writers()) == ReportFormat::markdown);  // an unlisted spelling
  // A subject without a writer for a format refuses it, and lists only what it writes.
  const ReportWriters<Report> markdown_only = {{ReportFormat::markdown, render_markdown}};
  CHECK_THROWS_WITH(parse_report_format("csv", markdown_only), "--format=csv: unknown report format; accepted: markdown");
  // JSON escapes what it quotes itself; the others' lines are escaped on the way out.
  for (const ReportWriter<Report>& writer : report_writers())
    CHECK(writer.escapes_itself == (writer.format == ReportFormat::json));
  // strategies lists itself as text or JSON, through its own table, in the same wording.
  CHECK_THROWS_WITH(run_strategies_command({"--format=yaml"}), "--format=yaml: unknown format; accepted: text, json");
}
