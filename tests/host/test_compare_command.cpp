// `dpbench compare` as a command, on made-up result files: series matched by key and GPU count and
// those on one side listed, its verdicts (identical runs within noise, a tight
// 5% slowdown slower and over --fail_above=2 with exit code 3, a noisy 3% difference within
// noise), repeats in folders combined, runs left out with too few samples, the three formats and
// --output, and the command-line and input errors (exit codes 2 and 1, no output written).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "cli/compare_command.h"
#include "cli/strategies_command.h"
#include "engine/errors.h"
#include "reports/comparison_tables.h"
#include "reports/text_file.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// The run's measured step times off by up to +/- `spread` (a fraction), uniformly.
Result with_noisy_steps(Result result, double spread, uint32_t seed) {
  std::mt19937 random(seed);
  for (StepRecord& step : result.steps) {
    if (step.warmup) continue;
    step.time_ms *= 1.0 + spread * (2.0 * static_cast<double>(random()) / 4294967295.0 - 1.0);
  }
  return result;
}

void make_folders(const TempDir& dir, std::initializer_list<const char*> names) {
  for (const char* name : names) std::filesystem::create_directories(dir.path() / name);
}

void write_result(const TempDir& dir, const std::string& name, const Result& result) {
  write_result_atomically(result, dir.file(name));
}

ResultComparison comparison_of(const std::string& base, const std::string& changed,
                               std::optional<double> fail_above_pct = std::nullopt) {
  return compare_results(base, load_results({base}), changed, load_results({changed}), strategy_catalog_for_reports(),
                         ComparisonSettings(), fail_above_pct);
}

ComparedSeries only_matched(const ResultComparison& comparison) {
  REQUIRE(comparison.matched_count() == 1);
  return *std::find_if(comparison.series.begin(), comparison.series.end(),
                       [](const ComparedSeries& entry) { return entry.matched(); });
}

std::string config_error_of(const std::vector<std::string>& args) {
  return error_message_of<ConfigError>([&] { parse_compare_flags(args); }, "ConfigError");
}

std::string runtime_error_of(const std::vector<std::string>& args) {
  return error_message_of<RuntimeError>([&] { run_compare_command(args); }, "RuntimeError");
}

size_t files_in(const std::filesystem::path& folder) {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(folder), {}));
}

}  // namespace

TEST_CASE("compare matches series by key and GPU count and lists those on one side only", "[compare]") {
  TempDir dir;
  make_folders(dir, {"base", "new"});
  write_fixture(dir, "base/r1.json", replicated_run(1, 1000));
  write_fixture(dir, "base/r2.json", replicated_run(2, 1900));
  write_fixture(dir, "base/ps2.json", run_of({"--model=resnet50", "--variable_update=parameter_server"}, 2, 1500));
  write_fixture(dir, "new/r1.json", replicated_run(1, 1000));
  write_fixture(dir, "new/r2.json", replicated_run(2, 1805));  // 5% slower
  write_fixture(dir, "new/r4.json", replicated_run(4, 3600));
  FixtureRun h200 = replicated_run(1, 1400);
  h200.gpu_name = "NVIDIA H200";
  write_fixture(dir, "new/h200.json", h200);  // another GPU type: another series

  const ResultComparison comparison = comparison_of(dir.file("base"), dir.file("new"), 2.0);
  CHECK(comparison.series.size() == 5);
  CHECK(comparison.matched_count() == 2);
  CHECK(comparison.over_fail_above_count() == 1);
  std::string listing;
  for (const ComparedSeries& entry : comparison.series) {
    const std::string side = entry.matched() ? std::string("both, ") + verdict_name(entry.speeds.verdict)
                             : entry.base_runs ? "base"
                                               : "new";
    listing += entry.label() + ": " + side + "\n";
  }
  const std::string replicated = "resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)";
  // Report's order (workload, then the strategies' order), then the GPU count; the two replicated
  // series that read alike are told apart by their GPU type.
  CHECK(listing == "resnet50, parameter_server (gpu), fp32, NCHW, batch 64 per GPU (weak scaling), 2 GPUs: base\n" +
                       replicated + " [device_name=NVIDIA H100 80GB HBM3], 1 GPU: both, within noise\n" +
                       replicated + " [device_name=NVIDIA H100 80GB HBM3], 2 GPUs: both, slower\n" +
                       replicated + " [device_name=NVIDIA H100 80GB HBM3], 4 GPUs: new\n" +
                       replicated + " [device_name=NVIDIA H200], 1 GPU: new\n");

  const std::string markdown = with_placeholder(render_comparison_markdown(comparison), dir);
  CHECK_THAT(markdown, Contains("# dpbench compare\n\nBASE: `<dir>/base`, 3 results from 3 files; NEW: `<dir>/new`, "
                                "4 results from 4 files.\n2 series in both, 1 only in BASE, 2 only in NEW.\n"));
  CHECK_THAT(markdown, Contains("| Series | GPUs | BASE runs | NEW runs | BASE speed | NEW speed | Ratio | 95% CI | "
                                "Change | Verdict |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"));
  CHECK_THAT(markdown, Contains(" | 2 | 1 | 1 | 1900.0 images/s | 1805.0 images/s | 0.950 | "));
  CHECK_THAT(markdown, Contains(" | -5.0% | slower, over --fail_above |\n"));
  CHECK_THAT(markdown, Contains(" | 1000.0 images/s | 1000.0 images/s | 1.000 | "));
  CHECK_THAT(markdown, Contains("\nGate (--fail_above=2%): failed; 1 series slower by more than 2% "));
  CHECK_THAT(markdown, Contains("\n## Only in BASE\n\n- resnet50, parameter_server (gpu), fp32, NCHW, batch 64 per "
                                "GPU (weak scaling), 2 GPUs: 1500.0 images/s (`<dir>/base/ps2.json`)\n"));
  CHECK_THAT(markdown, Contains("\n## Only in NEW\n\n- " + replicated + " [device_name=NVIDIA H100 80GB HBM3], 4 GPUs: "
                                "3600.0 images/s (`<dir>/new/r4.json`)\n- " + replicated +
                                " [device_name=NVIDIA H200], 1 GPU: 1400.0 images/s (`<dir>/new/h200.json`)\n"));
}

TEST_CASE("compare through the command: identical runs pass and a tight 5% slowdown trips --fail_above=2",
          "[compare]") {
  TempDir dir;
  write_fixture(dir, "base.json", replicated_run(1, 1000));
  write_fixture(dir, "same.json", replicated_run(1, 1000));
  write_fixture(dir, "slower.json", replicated_run(1, 950));
  make_folders(dir, {"out"});
  const std::string output = dir.file("out/compare.md");

  const std::string base = dir.file("base.json"), same = dir.file("same.json"), slower = dir.file("slower.json");
  CHECK(run_cli({"compare", base, same, "--fail_above=2", "--output=" + output}) == 0);
  CHECK(only_matched(comparison_of(base, same)).speeds.verdict == Verdict::within_noise);
  CHECK_THAT(read_text_file(output), Contains("Gate (--fail_above=2%): passed; no series is slower by more than 2%."));

  CHECK(run_cli({"compare", base, slower, "--fail_above=2", "--output", output}) == kCompareSlowerExitCode);
  CHECK_THAT(read_text_file(output), Contains("| -5.0% | slower, over --fail_above |"));  // written all the same
  CHECK(files_in(dir.path() / "out") == 1);                                                  // no temporary file left
  // Slower, but not by more than the gate allows; and no gate, no exit code 3.
  CHECK(run_cli({"compare", base, slower, "--fail_above=6", "--output", output}) == 0);
  CHECK(run_cli({"compare", base, slower, "--output", output}) == 0);
  // The slowdown within the noise floor is no regression however tight.
  CHECK(run_cli({"compare", base, slower, "--fail_above=2", "--noise_floor=6", "--output", output}) == 0);
}

TEST_CASE("compare calls a noisy 3% difference within noise and does not fail the gate", "[compare]") {
  TempDir dir;
  // Step times off by up to 30%, the same pattern on both sides: the means differ by exactly 3%.
  write_result(dir, "base.json", with_noisy_steps(make_fixture_result(replicated_run(1, 1000)), 0.3, 1));
  write_result(dir, "new.json", with_noisy_steps(make_fixture_result(replicated_run(1, 970)), 0.3, 1));
  const ComparedSeries entry = only_matched(comparison_of(dir.file("base.json"), dir.file("new.json")));
  CHECK(*entry.speeds.ratio == Approx(0.97));
  CHECK(entry.speeds.verdict == Verdict::within_noise);
  CHECK(*entry.speeds.ratio_low < 1.0);
  CHECK(*entry.speeds.ratio_high > 1.0);
  CHECK(run_cli({"compare", dir.file("base.json"), dir.file("new.json"), "--fail_above=2",
                 "--output=" + dir.file("compare.md")}) == 0);
}

TEST_CASE("compare combines the repeats in a folder per series", "[compare]") {
  TempDir dir;
  make_folders(dir, {"base", "new"});
  int seed = 0;
  for (double speed : {1000.0, 1010.0, 990.0})
    write_result(dir, "base/run" + std::to_string(seed) + ".json",
                 with_noisy_steps(make_fixture_result(replicated_run(2, speed)), 0.02, ++seed));
  for (double speed : {950.0, 960.0, 940.0})
    write_result(dir, "new/run" + std::to_string(seed) + ".json",
                 with_noisy_steps(make_fixture_result(replicated_run(2, speed)), 0.02, ++seed));
  const ComparedSeries entry = only_matched(comparison_of(dir.file("base"), dir.file("new"), 2.0));
  CHECK(entry.base_runs->files.size() == 3);
  CHECK(entry.base_runs->runs_used() == 3);
  CHECK(entry.new_runs->runs_used() == 3);
  CHECK(*entry.speeds.base_speed == Approx(1000).epsilon(0.01));
  CHECK(*entry.speeds.new_speed == Approx(950).epsilon(0.01));
  CHECK(entry.speeds.verdict == Verdict::slower);
  CHECK(entry.over_fail_above(2.0));
}

TEST_CASE("compare leaves out runs with too few measured steps and skips interrupted runs and says so",
          "[compare]") {
  TempDir dir;
  make_folders(dir, {"base", "new"});
  write_fixture(dir, "base/full.json", replicated_run(1, 1000));
  FixtureRun short_run = replicated_run(1, 900);
  short_run.measured_steps = 1;
  write_fixture(dir, "new/short.json", short_run);
  Result interrupted = make_fixture_result(replicated_run(1, 800));
  interrupted.summary.interrupted = true;
  write_result(dir, "new/interrupted.json", interrupted);

  const ResultComparison comparison = comparison_of(dir.file("base"), dir.file("new"), 0.0);
  const ComparedSeries entry = only_matched(comparison);
  CHECK(entry.speeds.verdict == Verdict::too_few_samples);
  CHECK_FALSE(entry.over_fail_above(0.0));
  REQUIRE(entry.new_runs->left_out.size() == 1);
  CHECK(entry.new_runs->left_out[0].reason == "1 measured step recorded (2 needed)");
  const std::string markdown = with_placeholder(render_comparison_markdown(comparison), dir);
  CHECK_THAT(markdown, Contains(" | 1 | 1 | 0 | 1000.0 images/s | n/a | n/a | n/a | n/a | too few samples |\n"));
  CHECK_THAT(markdown, Contains("\n## Runs left out of the verdict\n\n- resnet50, replicated (nccl), fp32, NCHW, "
                                "batch 64 per GPU (weak scaling), 1 GPU: NEW `<dir>/new/short.json`: 1 measured step "
                                "recorded (2 needed)\n"));
  CHECK_THAT(markdown, Contains("\n## Skipped files\n\n- NEW `<dir>/new/interrupted.json`: an interrupted run"));
  CHECK(run_cli({"compare", dir.file("base"), dir.file("new"), "--fail_above=0", "--output=" + dir.file("c.md")}) == 0);
}

TEST_CASE("compare --output writes each format atomically and CSV and JSON carry the same facts", "[compare]") {
  TempDir dir;
  make_folders(dir, {"base", "new", "out"});
  write_fixture(dir, "base/r1.json", replicated_run(1, 1000));
  write_fixture(dir, "base/r2.json", replicated_run(2, 1900));
  write_fixture(dir, "new/r1.json", replicated_run(1, 950));
  const ResultComparison comparison = comparison_of(dir.file("base"), dir.file("new"), 2.0);
  for (const auto& [format, rendered] : std::vector<std::pair<std::string, std::string>>{
           {"markdown", render_comparison_markdown(comparison)},
           {"csv", render_comparison_csv(comparison)},
           {"json", render_comparison_json(comparison)}}) {
    const std::string output = dir.file("out/compare." + format);
    CHECK(run_cli({"compare", "--format=" + format, dir.file("base"), dir.file("new"), "--fail_above=2",
                   "--output", output}) == kCompareSlowerExitCode);
    CHECK(read_text_file(output) == rendered);
  }
  CHECK(files_in(dir.path() / "out") == 3);

  const std::string csv = with_placeholder(render_comparison_csv(comparison), dir);
  CHECK_THAT(csv, StartsWith("series,scaling,mode,model,"));
  CHECK_THAT(csv, Contains(",unit,activation_checkpointing,variable_update,"));  // the key's fields, as report's CSV has them
  CHECK_THAT(csv, Contains(",gpu_number,found_in,base_runs,new_runs,base_speed,new_speed,ratio,ratio_low,ratio_high,"
                           "change_pct,verdict,over_fail_above,base_files,new_files,left_out,workload_differences\n"));
  // Numbers as they read back exactly (1000 x 256 images over the steps' summed times: 950.0000000000001).
  CHECK_THAT(csv, Contains(",1,both,1,1,1000.0,950.0"));
  CHECK_THAT(csv, Contains(",slower,true,<dir>/base/r1.json,<dir>/new/r1.json,,\n"));
  CHECK_THAT(csv, Contains(",2,base only,1,,1900.0"));
  CHECK_THAT(csv, Contains(",,,,,,,,<dir>/base/r2.json,,,\n"));  // no NEW speed, ratio, interval, verdict, gate

  const nlohmann::json document = nlohmann::json::parse(render_comparison_json(comparison));
  CHECK(document["method"]["resamples"] == 10000);
  CHECK(document["method"]["confidence"] == 0.95);
  CHECK(document["method"]["noise_floor_pct"] == 1.0);
  CHECK(document["method"]["fail_above_pct"] == 2.0);
  CHECK(document["over_fail_above"] == 1);
  REQUIRE(document["series"].size() == 1);
  const nlohmann::json& series = document["series"][0];
  CHECK(series["gpu_number"] == 1);
  CHECK(series["key"]["model"] == "resnet50");
  CHECK(series["key"]["fixed_batch"] == 64);
  CHECK(series["base"]["speed"].get<double>() == Approx(1000.0));
  CHECK(series["new"]["speed"].get<double>() == Approx(950.0));
  CHECK(series["ratio"].get<double>() == Approx(0.95));
  CHECK(series["ratio_low"].get<double>() <= series["ratio"].get<double>());
  CHECK(series["verdict"] == "slower");
  CHECK(series["over_fail_above"] == true);
  REQUIRE(document["only_in_base"].size() == 1);
  CHECK(document["only_in_base"][0]["gpu_number"] == 2);
  CHECK(document["only_in_base"][0]["base"]["speed"].get<double>() == Approx(1900.0));
  CHECK(document["only_in_base"][0]["new"].is_null());
  CHECK(document["only_in_new"].empty());
}

TEST_CASE("compare flags: bad values and the wrong number of paths exit 2 and write nothing", "[compare]") {
  TempDir dir;
  write_fixture(dir, "one.json", replicated_run(1, 1000));
  const std::string file = dir.file("one.json");
  CHECK(config_error_of({file, file, "--fail_above=abc"}) ==
        "--fail_above=abc: not a number; accepted: a percentage from 0 to below 100, e.g. 2");
  CHECK(config_error_of({file, file, "--fail_above=-1"}) ==
        "--fail_above=-1: out of range; accepted: a percentage from 0 to below 100, e.g. 2");
  CHECK(config_error_of({file, file, "--noise_floor=100"}) ==
        "--noise_floor=100: out of range; accepted: a percentage from 0 to below 100, e.g. 2");
  CHECK(config_error_of({file, file, "--fail_above"}) == "--fail_above: missing a value; e.g. --fail_above=PCT");
  CHECK(config_error_of({file, file, "--output="}) == "--output: empty value; e.g. --output=FILE");
  CHECK(config_error_of({file, file, "--fail_above=2", "--fail_above=3"}) ==
        "--fail_above is given twice, as 2 and as 3; give it once");
  CHECK(config_error_of({file, file, "--format=xml"}) ==
        "--format=xml: unknown report format; accepted: markdown, csv, json");
  CHECK(config_error_of({file, file, "--plots=figures"}) ==
        "--plots=figures: unknown flag; dpbench compare --help lists the accepted flags");
  CHECK(config_error_of({file, file, "--fail_abve=2"}) ==
        "--fail_abve=2: unknown flag; did you mean --fail_above? dpbench compare --help lists the accepted flags");
  CHECK_THAT(config_error_of({file}), StartsWith("compare: give two result files or folders, BASE and NEW (got 1)"));
  CHECK_THAT(config_error_of({file, file, file}), Contains("(got 3)"));
  const std::string missing = dir.file("no_such_folder");
  CHECK(config_error_of({file, missing}) ==
        "compare: no such file or folder: '" + missing + "' (give result files or folders that hold them)");
  CHECK_THAT(config_error_of({file, file, "--output=" + dir.file("missing/compare.md")}), Contains("does not exist"));
  CHECK(parse_compare_flags({file, file, "--noise_floor", "0.5"}).settings.noise_floor_pct == 0.5);
  CHECK(parse_compare_flags({file, file, "--fail_above=0"}).fail_above_pct == 0.0);
  CHECK(parse_compare_flags({file, file}).settings.noise_floor_pct == ComparisonSettings().noise_floor_pct);
  CHECK(parse_compare_flags({file, "-fail_above=2", file, "--fail_above", "2"}).fail_above_pct == 2.0);

  const std::string output = dir.file("compare.md");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"compare", file, missing, "--output=" + output},
        {"compare", file, file, "--fail_above=two", "--output=" + output},
        {"compare", file, "--output=" + output},
        {"compare"}}) {
    CHECK(run_cli(args) == 2);
    CHECK_FALSE(std::filesystem::exists(output));
  }
  CHECK(parse_compare_flags({"--help"}).help);
  CHECK_THAT(compare_help_text(), Contains("usage: dpbench compare [flags] BASE NEW"));
  for (const char* text : {"--fail_above PCT", "--noise_floor PCT", "--output FILE", "--format FORMAT", "(default: 1)",
                           "3 a series slower than --fail_above allows"})
    CHECK_THAT(compare_help_text(), Contains(text));
  CHECK(run_cli({"compare", "--help"}) == 0);
}

TEST_CASE("compare of a side with no usable result is one error line naming it with exit 1 and no output",
          "[compare]") {
  TempDir dir;
  write_fixture(dir, "good.json", replicated_run(1, 1000));
  std::filesystem::create_directories(dir.path() / "empty");
  std::filesystem::create_directories(dir.path() / "junk");
  std::ofstream(dir.file("broken.json")) << "{\"schema_version\": 2, \"summ";
  std::ofstream(dir.file("junk/a.json")) << "[1, 2]";
  std::ofstream(dir.file("junk/b.json")) << "not json";
  const std::string good = dir.file("good.json");
  CHECK(runtime_error_of({dir.file("broken.json"), good}) ==
        "compare: no dpbench results in BASE '" + dir.file("broken.json") + "': not JSON");
  CHECK(runtime_error_of({good, dir.file("empty")}) ==
        "compare: no dpbench results in NEW '" + dir.file("empty") + "': no *.json files in it");
  CHECK(runtime_error_of({good, dir.file("junk")}) ==
        "compare: no dpbench results in NEW '" + dir.file("junk") + "': 2 file(s) examined, 2 skipped (the first, '" +
            dir.file("junk/a.json") + "': not a dpbench result (a JSON array))");
  const std::string output = dir.file("compare.md");
  CHECK(run_cli({"compare", good, dir.file("empty"), "--output=" + output}) == 1);
  CHECK(run_cli({"compare", dir.file("broken.json"), good, "--output=" + output}) == 1);
  CHECK_FALSE(std::filesystem::exists(output));
}

TEST_CASE("compare refuses a series whose runs differ in their workload, naming the flags", "[compare]") {
  TempDir dir;
  make_folders(dir, {"base", "new", "out"});
  // rnnlm 8 units wide against 256: a 99% "slowdown" that is another model.
  write_fixture(dir, "base/narrow.json", run_of({"--model=rnnlm", "--num_units=8"}, 1, 100000));
  write_fixture(dir, "new/wide.json", run_of({"--model=rnnlm", "--num_units=256"}, 1, 500));
  const ResultComparison comparison = comparison_of(dir.file("base"), dir.file("new"), 2.0);
  REQUIRE(comparison.series.size() == 1);
  const ComparedSeries& entry = comparison.series.front();
  CHECK(entry.refused());
  CHECK(entry.workload_differences == std::vector<std::string>{"num_units (BASE 8; NEW 256)"});
  CHECK_FALSE(entry.speeds.ratio);
  CHECK(*entry.speeds.base_speed == Approx(100000));
  CHECK(*entry.speeds.new_speed == Approx(500));
  CHECK_FALSE(entry.over_fail_above(2.0));
  CHECK(comparison.refused_count() == 1);
  // A refused series is an error (exit 1), the output written all the same, saying why.
  const std::string output = dir.file("out/compare.md");
  CHECK(run_cli({"compare", dir.file("base"), dir.file("new"), "--fail_above=2", "--output", output}) == 1);
  const std::string markdown = with_placeholder(read_text_file(output), dir);
  CHECK_THAT(markdown, Contains("1 series in both (1 refused: workloads differ), 0 only in BASE, 0 only in NEW."));
  CHECK_THAT(markdown, Contains(" | n/a | n/a | n/a | refused: workloads differ |\n"));
  CHECK_THAT(markdown, Contains("\n## Refused: the runs differ in their workload\n"));
  CHECK_THAT(markdown, Contains(", 1 GPU: the runs differ in num_units (BASE 8; NEW 256) (BASE "
                                "`<dir>/base/narrow.json`; NEW `<dir>/new/wide.json`)\n"));
  CHECK_THAT(markdown, Contains("Gate (--fail_above=2%): not judged; 1 series refused (workloads differ)"));
  REQUIRE(run_cli({"compare", dir.file("base"), dir.file("new"), "--format=json", "--output", output}) == 1);
  const nlohmann::json document = read_json(output);
  CHECK(document["series"][0]["verdict"] == "refused: workloads differ");
  CHECK(document["series"][0]["workload_differences"] == nlohmann::json({"num_units (BASE 8; NEW 256)"}));
  CHECK(document["series"][0]["over_fail_above"].is_null());
  REQUIRE(run_cli({"compare", dir.file("base"), dir.file("new"), "--format=csv", "--output", output}) == 1);
  CHECK_THAT(read_text_file(output), Contains(",refused: workloads differ,,"));
  CHECK_THAT(read_text_file(output), Contains(",num_units (BASE 8; NEW 256)\n"));
}

TEST_CASE("compare refuses runs of another optimizer or of mixed workloads on one side", "[compare]") {
  TempDir dir;
  make_folders(dir, {"base", "new", "mixed"});
  write_fixture(dir, "base/sgd.json", run_of({"--model=resnet50", "--optimizer=sgd"}, 2, 1000));
  write_fixture(dir, "new/momentum.json", run_of({"--model=resnet50", "--optimizer=momentum"}, 2, 990));
  CHECK(only_matched(comparison_of(dir.file("base"), dir.file("new"))).workload_differences ==
        std::vector<std::string>{"optimizer (BASE sgd; NEW momentum)"});
  // Two widths in BASE's folder: no side may mix workloads either.
  write_fixture(dir, "mixed/narrow.json", run_of({"--model=rnnlm", "--num_units=8"}, 1, 9000));
  write_fixture(dir, "mixed/wide.json", run_of({"--model=rnnlm", "--num_units=256"}, 1, 500));
  write_fixture(dir, "new/narrow.json", run_of({"--model=rnnlm", "--num_units=8"}, 1, 9000));
  const ResultComparison mixed = comparison_of(dir.file("mixed"), dir.file("new/narrow.json"));
  REQUIRE(mixed.series.size() == 1);
  CHECK(mixed.series.front().workload_differences == std::vector<std::string>{"num_units (BASE 256, 8; NEW 8)"});
}

TEST_CASE("compare still compares runs that differ only in how or where they ran", "[compare]") {
  TempDir dir;
  make_folders(dir, {"base", "new"});
  // The step counts, seed, result file and CUDA graphs change no workload.
  write_fixture(dir, "base/run.json", run_of({"--model=resnet50", "--seed=1", "--cuda_graph=false"}, 2, 1000));
  FixtureRun other = run_of({"--model=resnet50", "--seed=2", "--cuda_graph=true"}, 2, 1000);
  other.measured_steps = 50;
  write_fixture(dir, "new/run.json", other);
  const ComparedSeries entry = only_matched(comparison_of(dir.file("base"), dir.file("new")));
  CHECK(entry.compared());
  CHECK(entry.workload_differences.empty());
  CHECK(entry.speeds.ratio);
}
