// `dpbench report --plots`: the SVG line chart (well-formed, axes with ticks and labels, title,
// legend, one polyline per line, shaded range) and the two figure kinds built from results:
// speedup per workload with the ideal line, step times with the warm-up marked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "reports/report_plots.h"
#include "reports/svg_chart.h"
#include "reports/text_file.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++count;
  return count;
}

// Empty when every element is closed in order; else the first problem. Enough XML for our writer:
// elements, attributes in double quotes, text without markup (the writer escapes it).
std::string xml_problem(const std::string& svg) {
  std::vector<std::string> open;
  for (size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    const size_t end = svg.find('>', at);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(at);
    const std::string tag = svg.substr(at + 1, end - at - 1);
    if (tag.empty()) return "empty tag at " + std::to_string(at);
    if (tag.back() == '/') continue;
    const size_t name_end = tag.find_first_of(" \n");
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes " + (open.empty() ? "nothing" : open.back());
      open.pop_back();
    } else {
      open.push_back(tag.substr(0, name_end));
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> is never closed";
}

}  // namespace

TEST_CASE("report svg ticks are round numbers covering the range", "[report]") {
  CHECK(nice_ticks(0, 4, 6) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(nice_ticks(0, 107, 6) == std::vector<double>{0, 20, 40, 60, 80, 100, 120});
  CHECK(nice_ticks(0, 109, 8) == std::vector<double>{0, 20, 40, 60, 80, 100, 120});
  const std::vector<double> small = nice_ticks(0, 0.3, 6);
  REQUIRE(small.size() == 7);
  CHECK(small[1] == Approx(0.05));
  CHECK(small.back() == Approx(0.3));
  CHECK(nice_ticks(5, 5, 4).front() <= 5);  // an empty range still gets an axis
}

TEST_CASE("report svg line chart is well formed with axes, labels, legend and shading", "[report]") {
  LineChart chart;
  chart.title = "Speedup <test> & more";
  chart.x_label = "GPUs";
  chart.y_label = "Speedup over 1 GPU";
  chart.x_ticks = {1, 2, 4};
  chart.lines.push_back({"replicated (nccl)", {{1, 1}, {2, 1.9}, {4, 3.6}}, false, true, ""});
  chart.lines.push_back({"independent", {{1, 1}, {2, 2}, {4, 4}}, false, true, ""});
  chart.lines.push_back({"ideal (y = x)", {{1, 1}, {4, 4}}, true, false, "#444"});
  chart.shaded = ShadedRange{1, 1.5, "warm-up"};
  const std::string svg = render_svg(chart);
  CHECK_THAT(svg, StartsWith("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK_THAT(svg, EndsWith("</svg>\n"));
  CHECK(xml_problem(svg) == "");
  CHECK_THAT(svg, Contains(">Speedup &lt;test&gt; &amp; more</text>"));
  CHECK_THAT(svg, Contains("class=\"axis-label\">GPUs</text>"));
  CHECK_THAT(svg, Contains(">Speedup over 1 GPU</text>"));
  for (const char* tick : {">1</text>", ">2</text>", ">4</text>", ">0</text>", ">3</text>"}) CHECK_THAT(svg, Contains(tick));
  CHECK(count_of(svg, "<polyline") == 3);
  CHECK(count_of(svg, "stroke-dasharray") == 2);  // the ideal line and its legend sample
  CHECK(count_of(svg, "<circle") == 6);
  for (const char* entry : {">replicated (nccl)</text>", ">independent</text>", ">ideal (y = x)</text>", ">warm-up</text>"})
    CHECK_THAT(svg, Contains(entry));
  CHECK(count_of(svg, "class=\"shaded\"") == 1);
}

TEST_CASE("report svg chart draws points above y_limit at the top edge and says so", "[report]") {
  LineChart chart;
  chart.title = "steps";
  chart.lines.push_back({"step time", {{0, 900}, {1, 50}, {2, 52}, {3, 51}}, false, false, ""});
  chart.y_limit = 78;
  const std::string svg = render_svg(chart);
  CHECK(xml_problem(svg) == "");
  CHECK_THAT(svg, Contains("values above 80 are drawn at the top edge"));
  CHECK_THAT(svg, Contains(">80</text>"));
  CHECK_FALSE(svg.find(">900</text>") != std::string::npos);
}

TEST_CASE("report svg chart breaks a long title after commas instead of cutting it off", "[report]") {
  LineChart chart;
  chart.title = "Step times: nmt (cudnn_lstm, bi), replicated (nccl, repacking 4, no overlap, bf16 transfer), "
                "fp16, total batch 3072 (strong scaling) [device_name=NVIDIA H100 80GB HBM3], 8 GPUs";
  chart.lines.push_back({"step time", {{0, 1}, {1, 2}}, false, false, ""});
  const std::string svg = render_svg(chart);
  CHECK(xml_problem(svg) == "");
  // Never inside brackets: the strategy and its options stay on one line.
  CHECK(count_of(svg, "class=\"title\"") == 3);
  CHECK_THAT(svg, Contains(">Step times: nmt (cudnn_lstm, bi),</text>"));
  CHECK_THAT(svg, Contains(">replicated (nccl, repacking 4, no overlap, bf16 transfer), fp16,</text>"));
  CHECK_THAT(svg, Contains(">total batch 3072 (strong scaling) [device_name=NVIDIA H100 80GB HBM3], 8 GPUs</text>"));
}

TEST_CASE("report file names from series are made of safe characters", "[report]") {
  CHECK(safe_file_stem("resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)") ==
        "resnet50_replicated_nccl_fp32_nchw_batch_64_per_gpu_weak_scaling");
  CHECK(safe_file_stem("../../etc/passwd") == "etc_passwd");
  CHECK(safe_file_stem("nmt (dynamic, bi) [device_name=NVIDIA H100 + H200]") ==
        "nmt_dynamic_bi_device_name_nvidia_h100_h200");
  CHECK(safe_file_stem("***") == "figure");
  CHECK(safe_file_stem(std::string(400, 'a')).size() == 150);
}

TEST_CASE("report plots: speedup per workload with the ideal line, step times with the warm-up", "[report]") {
  TempDir dir;
  const std::vector<std::string> replicated = {"--model=resnet50", "--variable_update=replicated"};
  const std::vector<std::string> independent = {"--model=resnet50", "--variable_update=independent"};
  const std::vector<std::string> server = {"--model=resnet50", "--variable_update=parameter_server"};
  write_fixture(dir, "r1.json", run_of(replicated, 1, 1000));
  write_fixture(dir, "r2.json", run_of(replicated, 2, 1900));
  write_fixture(dir, "r4.json", run_of(replicated, 4, 3600));
  write_fixture(dir, "i1.json", run_of(independent, 1, 1000));
  write_fixture(dir, "i2.json", run_of(independent, 2, 2000));
  write_fixture(dir, "p2.json", run_of(server, 2, 1500));  // no 1-GPU run: listed, not drawn
  const Report report = report_of({dir.path().string()});
  std::vector<std::string> notes;
  const std::vector<PlotFile> plots = build_report_plots(report, &notes);
  CHECK(notes.empty());
  std::vector<std::string> names;
  for (const PlotFile& plot : plots) names.push_back(plot.name);
  CHECK(names == std::vector<std::string>{
                     "speedup_resnet50_fp32_nchw_batch_64_per_gpu_weak_scaling.svg",
                     "steps_resnet50_independent_fp32_nchw_batch_64_per_gpu_weak_scaling_2gpu.svg",
                     "steps_resnet50_parameter_server_gpu_fp32_nchw_batch_64_per_gpu_weak_scaling_2gpu.svg",
                     "steps_resnet50_replicated_nccl_fp32_nchw_batch_64_per_gpu_weak_scaling_4gpu.svg",
                 });

  const std::string& speedup = plots[0].svg;
  CHECK(xml_problem(speedup) == "");
  CHECK_THAT(speedup, Contains(">Speedup: resnet50, fp32, NCHW, batch 64 per GPU (weak scaling)</text>"));
  CHECK_THAT(speedup, Contains("class=\"axis-label\">GPUs</text>"));
  CHECK_THAT(speedup, Contains(">Speedup over 1 GPU (same strategy)</text>"));
  CHECK(count_of(speedup, "<polyline") == 4);  // three strategies and the ideal line
  CHECK_THAT(speedup, Contains(">independent</text>"));
  CHECK_THAT(speedup, Contains(">parameter_server (gpu) (no 1-GPU run: not drawn)</text>"));
  CHECK_THAT(speedup, Contains(">replicated (nccl)</text>"));
  CHECK_THAT(speedup, Contains(">ideal (y = x)</text>"));
  CHECK_THAT(speedup, Contains("stroke-dasharray"));

  const std::string& steps = plots[3].svg;
  CHECK(xml_problem(steps) == "");
  CHECK_THAT(steps, Contains(">Step times: resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling), 4 GPUs</text>"));
  CHECK_THAT(steps, Contains("class=\"axis-label\">Step</text>"));
  CHECK_THAT(steps, Contains(">Step time (ms)</text>"));
  CHECK(count_of(steps, "class=\"shaded\"") == 1);
  CHECK_THAT(steps, Contains(">warm-up steps (10, not measured)</text>"));
  CHECK_THAT(steps, Contains(">step time (slowest device)</text>"));
  CHECK_THAT(steps, Contains(">median of the measured steps (71.11 ms)</text>"));  // 256 images at 3600/s
  CHECK(count_of(steps, "<polyline") == 2);
  // 110 steps in the step-time line.
  const size_t points_at = steps.find("points=\"");
  const std::string points = steps.substr(points_at + 8, steps.find('"', points_at + 8) - points_at - 8);
  CHECK(count_of(points, ",") == 110);
  // The step axis ends at the last step, not at a round number past it.
  CHECK_THAT(steps, Contains("text-anchor=\"middle\">109</text>"));  // steps 0 to 109
  CHECK_THAT(steps, !Contains("text-anchor=\"middle\">110</text>"));
}

TEST_CASE("report plots of reference-backend runs count devices, not GPUs", "[report]") {
  TempDir dir;
  FixtureRun one = run_of({"--model=trivial", "--variable_update=replicated"}, 1, 1000);
  FixtureRun two = run_of({"--model=trivial", "--variable_update=replicated"}, 2, 1900);
  one.backend = two.backend = "reference";
  write_fixture(dir, "one.json", one);
  write_fixture(dir, "two.json", two);
  std::vector<std::string> notes;
  const std::vector<PlotFile> plots = build_report_plots(report_of({dir.path().string()}), &notes);
  REQUIRE(plots.size() == 2);
  CHECK_THAT(plots[0].svg, Contains("class=\"axis-label\">devices</text>") &&
                               Contains(">Speedup over 1 device (same strategy)</text>"));
  CHECK_THAT(plots[1].svg, Contains(", 2 devices</text>"));
  CHECK_THAT(plots[0].svg + plots[1].svg, !Contains("GPU"));
}

TEST_CASE("report --plots writes the figures into a new folder", "[report]") {
  TempDir dir;
  write_fixture(dir, "one.json", run_of({"--model=resnet50", "--variable_update=replicated"}, 1, 1000));
  write_fixture(dir, "two.json", run_of({"--model=resnet50", "--variable_update=replicated"}, 2, 1900));
  const std::string plots = dir.file("figures/nested");
  REQUIRE(run_cli({"report", dir.file("one.json"), dir.file("two.json"), "--output=" + dir.file("report.md"),
                   "--plots=" + plots}) == 0);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(plots)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"speedup_resnet50_fp32_nchw_batch_64_per_gpu_weak_scaling.svg",
                                          "steps_resnet50_replicated_nccl_fp32_nchw_batch_64_per_gpu_weak_scaling_2gpu.svg"});
  CHECK_THAT(read_text_file(plots + "/" + names[0]), StartsWith("<svg"));
}

TEST_CASE("report svg stacked bars: one bar per category, parts stacked, negatives drawn as 0", "[report]") {
  StackedBarChart chart;
  chart.title = "Where the efficiency went";
  chart.x_label = "GPUs";
  chart.y_label = "points";
  chart.categories = {"2 GPUs (95.0%)", "4 GPUs (90.0%)"};
  chart.parts = {"exposed communication", "other"};
  chart.values = {{3.0, 2.0}, {8.0, -1.0}};
  const std::string svg = render_svg(chart);
  CHECK_THAT(svg, StartsWith("<svg xmlns="));
  CHECK_THAT(svg, EndsWith("</svg>\n"));
  CHECK(count_of(svg, "<title>2 GPUs (95.0%): ") == 2);  // both parts of the first bar
  CHECK(count_of(svg, "<title>4 GPUs (90.0%): ") == 1);  // the negative part is not drawn
  CHECK_THAT(svg, Contains("negative parts are drawn as 0"));
  CHECK_THAT(svg, Contains(">exposed communication</text>"));
  CHECK_THAT(svg, Contains(">4 GPUs (90.0%)</text>"));
}

TEST_CASE("report plots: an efficiency figure for a series whose runs carry breakdowns", "[report]") {
  TempDir dir;
  REQUIRE(run_reference_series(dir, {1, 2}));
  std::vector<std::string> notes;
  const std::vector<PlotFile> plots = build_report_plots(report_of({dir.path().string()}), &notes);
  const auto efficiency = std::find_if(plots.begin(), plots.end(), [](const PlotFile& plot) {
    return plot.name.rfind("efficiency_", 0) == 0;
  });
  REQUIRE(efficiency != plots.end());
  CHECK_THAT(efficiency->svg, Contains(">2 devices ("));
  CHECK_THAT(efficiency->svg, Contains("points of efficiency lost against 1 device"));
}
