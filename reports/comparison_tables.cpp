// Markdown, CSV and JSON writers of `dpbench compare` (see comparison_tables.h).
#include "reports/comparison_tables.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "reports/report_tables.h"
#include "reports/table_cells.h"

namespace dpbench {
namespace {

using nlohmann::json;

std::string speed_cell(const std::optional<double>& speed, const std::string& unit) {
  return speed ? format_fixed(*speed, 1) + " " + unit : "n/a";
}

std::string change_cell(const SpeedComparison& speeds) {
  const std::optional<double> change = speeds.change_pct();
  if (!change) return "n/a";
  return (*change > 0 ? "+" : "") + format_fixed(*change, 1) + "%";
}

// What a series refused for differing workloads says where a verdict would be.
const char* const kRefusedVerdict = "refused: workloads differ";

std::string verdict_cell(const ResultComparison& comparison, const ComparedSeries& entry) {
  if (entry.refused()) return kRefusedVerdict;
  std::string verdict = verdict_name(entry.speeds.verdict);
  if (entry.over_fail_above(comparison.fail_above_pct)) verdict += ", over --fail_above";
  return verdict;
}

// Whether the series is over the gate; none without a gate, for a series on one side only, or
// for one refused.
std::optional<bool> over_gate(const ResultComparison& comparison, const ComparedSeries& entry) {
  if (!comparison.fail_above_pct || !entry.compared()) return std::nullopt;
  return entry.over_fail_above(comparison.fail_above_pct);
}

std::string interval_cell(const SpeedComparison& speeds) {
  if (!speeds.ratio_low) return "n/a";
  return "[" + format_fixed(*speeds.ratio_low, 3) + ", " + format_fixed(*speeds.ratio_high, 3) + "]";
}

// The settings in the words the markdown's header uses.
std::string method_text(const ResultComparison& comparison) {
  const ComparisonSettings& settings = comparison.settings;
  return "Speed: items per second over each run's measured steps (warm-up and untimed steps left out); the mean "
         "over a series' runs where a side has several. Ratio: NEW speed / BASE speed. " +
         percent_text(100.0 * settings.confidence) + " CI: bootstrap interval of the ratio (" +
         std::to_string(settings.resamples) + " resamples of the runs and of blocks of consecutive steps within "
         "them; fixed seed). Verdict: faster or slower when the whole interval lies above or below 1 and the speed "
         "changed by at least " + percent_text(settings.noise_floor_pct) + " (--noise_floor), else within noise.\n";
}

std::string gate_text(const ResultComparison& comparison) {
  if (!comparison.fail_above_pct) return "";
  const std::string limit = percent_text(*comparison.fail_above_pct);
  const size_t failing = comparison.over_fail_above_count();
  const std::string gate = "\nGate (--fail_above=" + limit + "): ";
  if (const size_t refused = comparison.refused_count(); refused > 0)
    return gate + "not judged; " + count_of(refused, "series", "series") +
           " refused (workloads differ), which compare reports as an error.\n";
  if (failing == 0) return gate + "passed; no series is slower by more than " + limit + ".\n";
  return gate + "failed; " + count_of(failing, "series", "series") + " slower by more than " + limit +
         " (marked over --fail_above).\n";
}

// "no reference; nearest: FILE, LABEL, which differs in batch_size (this run 32; reference 16)".
std::string no_reference_text(const ReferenceNote& note) {
  if (note.nearest.empty()) return "no reference (the folder has no reference results)";
  return "no reference; nearest: " + note.nearest + ", which differs in " + join_parts(note.nearest_differences, ", ");
}

std::string machines_text(const ReferenceNote& note) {
  if (note.machine_differences.empty())
    return "the machines' descriptions agree (GPU, power limit, clocks, execution flags, driver, libraries)";
  return "the machines differ: " + join_parts(note.machine_differences, "; ");
}

json reference_json(const ReferenceNote& note) {
  if (!note.label.empty()) return {{"label", note.label}, {"machine_differences", note.machine_differences}};
  return {{"label", nullptr},
          {"nearest", note.nearest.empty() ? json() : json(note.nearest)},
          {"differs_in", note.nearest_differences}};
}

std::string matched_table(const ResultComparison& comparison) {
  const std::vector<std::string> header = {"Series", "GPUs", "BASE runs", "NEW runs", "BASE speed", "NEW speed",
                                           "Ratio", percent_text(100.0 * comparison.settings.confidence) + " CI",
                                           "Change", "Verdict"};
  std::string rows;
  for (const ComparedSeries& entry : comparison.series) {
    if (!entry.matched()) continue;
    const SpeedComparison& speeds = entry.speeds;
    rows += markdown_row({entry.title, std::to_string(entry.num_devices),
                          std::to_string(entry.base_runs->runs_used()), std::to_string(entry.new_runs->runs_used()),
                          speed_cell(speeds.base_speed, entry.key.unit), speed_cell(speeds.new_speed, entry.key.unit),
                          speeds.ratio ? format_fixed(*speeds.ratio, 3) : "n/a", interval_cell(speeds),
                          change_cell(speeds), verdict_cell(comparison, entry)});
  }
  if (rows.empty()) return "\nNo series is in both BASE and NEW.\n";
  return "\n" + markdown_row(header) + alignment_rule("lrrrrrrrrl") + rows;
}

std::string files_text(const std::vector<std::string>& files) {
  std::string text;
  for (const std::string& file : files) text += (text.empty() ? "`" : ", `") + file + "`";
  return text;
}

std::string unmatched_list(const ResultComparison& comparison, bool in_base) {
  std::string text;
  for (const ComparedSeries& entry : comparison.series) {
    const std::optional<ComparedRuns>& runs = in_base ? entry.base_runs : entry.new_runs;
    if (entry.matched() || !runs) continue;
    const std::optional<double>& speed = in_base ? entry.speeds.base_speed : entry.speeds.new_speed;
    text += "- " + entry.label() + ": " + speed_cell(speed, entry.key.unit) + " (" + files_text(runs->files) + ")";
    if (entry.reference) text += "; " + no_reference_text(*entry.reference);
    text += "\n";
  }
  if (text.empty()) return "";
  if (comparison.against_references && !in_base)
    return "\n## No reference\n\nNo reference result measured these series' workload; each names the nearest "
           "reference and how its workload differs.\n\n" + text;
  return std::string("\n## Only in ") + (in_base ? "BASE" : "NEW") + "\n\n" + text;
}

// --reference: each compared series' reference and how the machines differ.
std::string references_list(const ResultComparison& comparison) {
  if (!comparison.against_references) return "";
  std::string text;
  for (const ComparedSeries& entry : comparison.series) {
    if (!entry.matched() || !entry.reference) continue;
    text += "- " + entry.label() + ": " + entry.reference->label + " (" + files_text(entry.base_runs->files) + "); " +
            machines_text(*entry.reference) + "\n";
  }
  if (text.empty()) return "";
  return "\n## References\n\n" + text;
}

std::string refused_list(const ResultComparison& comparison) {
  std::string text;
  for (const ComparedSeries& entry : comparison.series) {
    if (!entry.refused()) continue;
    text += "- " + entry.label() + ": the runs differ in " + join_parts(entry.workload_differences, ", ") + " (BASE " +
            files_text(entry.base_runs->files) + "; NEW " + files_text(entry.new_runs->files) + ")\n";
  }
  if (text.empty()) return "";
  return "\n## Refused: the runs differ in their workload\n\nOnly runs of one workload (model settings, batch, "
         "precision, optimizer, data, strategy options) are compared; rerun one side with the other's flags.\n\n" +
         text;
}

std::string left_out_list(const ResultComparison& comparison) {
  std::string text;
  for (const ComparedSeries& entry : comparison.series) {
    const std::string heading = "- " + entry.label() + ": ";
    for (const auto& [side, runs] :
         {std::make_pair("BASE", &entry.base_runs), std::make_pair("NEW", &entry.new_runs)}) {
      if (!*runs) continue;
      for (const SkippedFile& run : (*runs)->left_out)
        text += heading + side + " `" + run.path + "`: " + run.reason + "\n";
    }
  }
  if (text.empty()) return "";
  return "\n## Runs left out of the verdict\n\n" + text;
}

std::string skipped_list(const ResultComparison& comparison) {
  std::string text;
  for (const auto& [side, input] :
       {std::make_pair("BASE", &comparison.base), std::make_pair("NEW", &comparison.changed)})
    for (const SkippedFile& skipped : input->skipped)
      text += std::string("- ") + side + " `" + skipped.path + "`: " + skipped.reason + "\n";
  if (text.empty()) return "";
  return "\n## Skipped files\n\n" + text;
}

std::string input_text(const char* side, const ComparedInput& input) {
  std::string text = std::string(side) + ": `" + input.path + "`, " + count_of(input.results, "result") + " from " +
                     count_of(input.files_examined, "file");
  if (!input.skipped.empty()) text += " (" + std::to_string(input.skipped.size()) + " skipped)";
  return text;
}

json runs_json(const std::optional<ComparedRuns>& runs, const std::optional<double>& speed) {
  if (!runs) return nullptr;
  json left_out = json::array();
  for (const SkippedFile& run : runs->left_out) left_out.push_back({{"path", run.path}, {"reason", run.reason}});
  return {{"speed", json_number(speed)}, {"runs", runs->runs_used()}, {"files", runs->files}, {"left_out", left_out}};
}

json input_json(const ComparedInput& input) {
  json skipped = json::array();
  for (const SkippedFile& file : input.skipped) skipped.push_back({{"path", file.path}, {"reason", file.reason}});
  return {{"path", input.path}, {"results", input.results}, {"files_examined", input.files_examined},
          {"skipped", skipped}};
}

json series_json(const ResultComparison& comparison, const ComparedSeries& entry) {
  json object = {{"title", entry.title},
                 {"key", series_key_json(entry.key)},
                 {"gpu_number", entry.num_devices},
                 {"unit", entry.key.unit},
                 {"base", runs_json(entry.base_runs, entry.speeds.base_speed)},
                 {"new", runs_json(entry.new_runs, entry.speeds.new_speed)}};
  if (entry.reference) object["reference"] = reference_json(*entry.reference);
  if (!entry.matched()) return object;
  if (entry.refused()) {
    object["verdict"] = kRefusedVerdict;
    object["workload_differences"] = entry.workload_differences;
    object["over_fail_above"] = nullptr;
    return object;
  }
  object["ratio"] = json_number(entry.speeds.ratio);
  object["ratio_low"] = json_number(entry.speeds.ratio_low);
  object["ratio_high"] = json_number(entry.speeds.ratio_high);
  object["change_pct"] = json_number(entry.speeds.change_pct());
  object["verdict"] = verdict_name(entry.speeds.verdict);
  const std::optional<bool> over = over_gate(comparison, entry);
  object["over_fail_above"] = over ? json(*over) : json();
  return object;
}

std::string runs_used_csv(const std::optional<ComparedRuns>& runs) {
  return runs ? std::to_string(runs->runs_used()) : "";
}

// A side's files in one field, separated by ';' (paths hold commas more often than semicolons).
std::string files_csv(const std::optional<ComparedRuns>& runs) {
  std::string joined;
  if (runs)
    for (const std::string& file : runs->files) joined += (joined.empty() ? "" : ";") + file;
  return csv_field(joined);
}

std::string left_out_csv(const ComparedSeries& entry) {
  std::string joined;
  for (const std::optional<ComparedRuns>* runs : {&entry.base_runs, &entry.new_runs}) {
    if (!*runs) continue;
    for (const SkippedFile& run : (*runs)->left_out)
      joined += (joined.empty() ? "" : "; ") + run.path + ": " + run.reason;
  }
  return csv_field(joined);
}

std::string csv_row(const ResultComparison& comparison, const ComparedSeries& entry) {
  const SpeedComparison& speeds = entry.speeds;
  std::string row = csv_field(entry.title);
  for (const auto& field : entry.key.fields()) row += "," + csv_field(field.second);
  const std::string found_in = entry.matched() ? "both" : entry.base_runs ? "base only" : "new only";
  const std::string verdict = entry.refused() ? kRefusedVerdict : entry.matched() ? verdict_name(speeds.verdict) : "";
  const std::optional<bool> over = over_gate(comparison, entry);
  for (const std::string& cell :
       {std::to_string(entry.num_devices), found_in, runs_used_csv(entry.base_runs), runs_used_csv(entry.new_runs),
        csv_number(speeds.base_speed), csv_number(speeds.new_speed), csv_number(speeds.ratio),
        csv_number(speeds.ratio_low), csv_number(speeds.ratio_high), csv_number(speeds.change_pct()),
        csv_field(verdict), std::string(over ? (*over ? "true" : "false") : ""), files_csv(entry.base_runs),
        files_csv(entry.new_runs), left_out_csv(entry), csv_field(join_parts(entry.workload_differences, "; "))})
    row += "," + cell;
  if (comparison.against_references) {
    const ReferenceNote note = entry.reference.value_or(ReferenceNote());
    row += "," + csv_field(note.label.empty() ? no_reference_text(note) : note.label) + "," +
           csv_field(join_parts(note.machine_differences, "; "));
  }
  return row + "\n";
}

}  // namespace

std::string render_comparison_markdown(const ResultComparison& comparison) {
  size_t only_base = 0, only_new = 0;
  for (const ComparedSeries& entry : comparison.series) {
    only_base += !entry.matched() && entry.base_runs ? 1 : 0;
    only_new += !entry.matched() && entry.new_runs ? 1 : 0;
  }
  const bool references = comparison.against_references;
  std::string text = std::string(references ? "# dpbench compare --reference" : "# dpbench compare") + "\n\n" +
                     input_text(references ? "BASE (reference results)" : "BASE", comparison.base) + "; " +
                     input_text("NEW", comparison.changed) + ".\n" +
                     count_of(comparison.matched_count(), "series", "series") + " in both" +
                     (comparison.refused_count() > 0
                          ? " (" + std::to_string(comparison.refused_count()) + " refused: workloads differ)"
                          : "") +
                     ", " +
                     std::to_string(only_base) + " only in BASE, " + std::to_string(only_new) + " only in NEW.\n\n" +
                     method_text(comparison);
  if (references)
    text += "\nBASE of each NEW series: the reference result of its workload (model and its settings, strategy and "
            "its options, precision, batch, data, backend, GPU count: what compare pairs runs by, but the GPU type), the "
            "one on the same GPU type first, its repeats (the same build on the same machine) with it; how the "
            "machines differ is listed under References.\n";
  return text + matched_table(comparison) + gate_text(comparison) + references_list(comparison) +
         refused_list(comparison) +
         unmatched_list(comparison, true) + unmatched_list(comparison, false) + left_out_list(comparison) +
         skipped_list(comparison);
}

std::string render_comparison_csv(const ResultComparison& comparison) {
  std::vector<std::string> header = {"series"};
  for (const auto& field : SeriesKey().fields()) header.push_back(field.first);
  for (const char* column : {"gpu_number", "found_in", "base_runs", "new_runs", "base_speed", "new_speed", "ratio",
                             "ratio_low", "ratio_high", "change_pct", "verdict", "over_fail_above", "base_files",
                             "new_files", "left_out", "workload_differences"})
    header.push_back(column);
  if (comparison.against_references)
    for (const char* column : {"reference", "machine_differences"}) header.push_back(column);
  std::string text;
  for (size_t i = 0; i < header.size(); ++i) text += (i ? "," : "") + header[i];
  text += "\n";
  for (const ComparedSeries& entry : comparison.series) text += csv_row(comparison, entry);
  return text;
}

std::string render_comparison_json(const ResultComparison& comparison) {
  const ComparisonSettings& settings = comparison.settings;
  json matched = json::array(), only_base = json::array(), only_new = json::array();
  for (const ComparedSeries& entry : comparison.series) {
    json& list = entry.matched() ? matched : entry.base_runs ? only_base : only_new;
    list.push_back(series_json(comparison, entry));
  }
  json document = {
      {"base", input_json(comparison.base)},
      {"new", input_json(comparison.changed)},
      {"method", {{"speed", "items / time over each run's measured steps; mean over a side's runs"},
                  {"interval", "percentile bootstrap of NEW / BASE, resampling runs and circular blocks of steps"},
                  {"confidence", settings.confidence},
                  {"resamples", settings.resamples},
                  {"seed", settings.seed},
                  {"noise_floor_pct", settings.noise_floor_pct},
                  {"fail_above_pct", json_number(comparison.fail_above_pct)}}},
      {"series", matched},
      {"only_in_base", only_base},
      {"only_in_new", only_new},
      {"over_fail_above", comparison.fail_above_pct ? json(comparison.over_fail_above_count()) : json()}};
  if (comparison.against_references) document["against_references"] = true;
  // ASCII only: a control byte of a value (U+009B too) reaches no terminal.
  return document.dump(2, ' ', true, json::error_handler_t::replace) + "\n";
}

const ReportWriters<ResultComparison>& comparison_writers() {
  static const ReportWriters<ResultComparison> writers = {{ReportFormat::markdown, render_comparison_markdown},
                                                          {ReportFormat::csv, render_comparison_csv},
                                                          {ReportFormat::json, render_comparison_json, true}};
  return writers;
}

}  // namespace dpbench
