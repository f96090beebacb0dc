// The output of `dpbench predict` (see prediction_tables.h).
#include "reports/prediction_tables.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include <nlohmann/json.hpp>

#include "reports/memory_summary.h"
#include "reports/report_series.h"
#include "reports/svg_chart.h"
#include "reports/table_cells.h"

namespace dpbench {
namespace {

// The median measured speed; of several runs with their spread: "1234.5 (median of 3: 1200.0 to 1300.0)".
std::string measured_cell(const PredictionRow& row) {
  if (!row.measured_items_per_sec) return "-";
  std::string cell = format_fixed(*row.measured_items_per_sec, 1);
  if (row.measured_speeds.size() > 1)
    cell += " (median of " + std::to_string(row.measured_speeds.size()) + ": " +
            format_fixed(row.measured_speeds.front(), 1) + " to " + format_fixed(row.measured_speeds.back(), 1) + ")";
  return cell;
}

std::optional<double> slowest(const PredictionRow& row) {
  return row.measured_speeds.empty() ? std::nullopt : std::optional<double>(row.measured_speeds.front());
}

std::optional<double> fastest(const PredictionRow& row) {
  return row.measured_speeds.empty() ? std::nullopt : std::optional<double>(row.measured_speeds.back());
}

std::string signed_percent(std::optional<double> pct) {
  if (!pct) return "-";
  return (*pct >= 0 ? "+" : "") + format_fixed(*pct, 1) + "%";
}

// The memory table (Note [memory from one run]), markdown: a row per strategy and GPU count.
std::string memory_markdown(const PredictionReport& report) {
  if (!report.memory_predicted) return "";
  uint64_t fullest = report.device_memory_bytes;
  for (const PredictionRow& row : report.rows)
    if (row.memory) fullest = std::max(fullest, row.memory->peak_bytes());
  const MemoryUnit unit = memory_unit_for(static_cast<double>(fullest));
  auto in_unit = [&](double bytes) { return format_fixed(bytes / unit.bytes, 2); };
  const std::string depth = report.depth_text.empty()
                                ? std::string()
                                : " For " + report.depth_text + ": its parameters, gradients and optimizer state "
                                  "are the deeper model's count's, its activations BASE's outside the blocks "
                                  "plus the number of blocks times BASE's per block (the depth rule above the time table).";
  std::string text = "\n## Memory per device\n\n" + memory_model_text() + depth + "\n\nAt --batch_size=" +
                     std::to_string(report.memory_batch_size) + " per device (BASE ran " +
                     std::to_string(report.base_batch_size) + "); the largest batch that fits " +
                     in_unit(static_cast<double>(report.device_memory_bytes)) + " " + unit.name + " (" +
                     report.device_memory_source + ").\n\n";
  std::vector<std::string> header = {"Strategy", "GPUs", std::string("Peak (") + unit.name + ")"};
  std::string alignment = "lrr";
  for (const MemoryCategoryInfo& category : memory_categories()) {
    header.push_back(category.console_word);
    alignment += "r";
  }
  header.push_back("Largest batch that fits");
  alignment += "r";
  if (report.measurements_given) {
    header.insert(header.end(), {std::string("Measured peak (") + unit.name + ")", "Memory error"});
    alignment += "rr";
  }
  text += markdown_row(header) + alignment_rule(alignment);
  std::vector<std::string> rules;  // "strategy: rule", once per strategy
  for (const PredictionRow& row : report.rows) {
    if (!row.memory) continue;
    const MemoryPrediction& memory = *row.memory;
    std::vector<std::string> cells = {row.strategy, std::to_string(row.step.gpus),
                                      in_unit(static_cast<double>(memory.peak_bytes()))};
    for (const MemoryCategoryInfo& category : memory_categories())
      cells.push_back(in_unit(static_cast<double>(memory.bytes[static_cast<size_t>(category.category)])));
    // 0 would read as a batch: say that nothing fits.
    cells.push_back(memory.largest_batch > 0 ? std::to_string(memory.largest_batch) : "none (not even 1)");
    if (report.measurements_given)
      cells.insert(cells.end(), {row.measured_memory_peak_bytes ? in_unit(*row.measured_memory_peak_bytes) : "-",
                                 signed_percent(row.memory_error_pct())});
    text += markdown_row(cells);
    const std::string rule = "`" + row.strategy + "`: " + memory.rule +
                             (memory.pinned_host_bytes > 0
                                  ? " (" + in_unit(static_cast<double>(memory.pinned_host_bytes)) + " " + unit.name +
                                        " of page-locked host memory beside the fullest device)"
                                  : "");
    if (std::find(rules.begin(), rules.end(), rule) == rules.end()) rules.push_back(rule);
  }
  text += "\nEach strategy's memory rule (its entry in the strategies' table):\n";
  for (const std::string& rule : rules) text += "- " + rule + "\n";
  return text;
}

nlohmann::json memory_json(const MemoryPrediction& memory) {
  nlohmann::json categories = nlohmann::json::object();
  for (const MemoryCategoryInfo& category : memory_categories())
    categories[category.key] = memory.bytes[static_cast<size_t>(category.category)];
  return {{"batch_size", memory.batch_size},
          {"peak_bytes", memory.peak_bytes()},
          {"step_peak_bytes", memory.step_peak_bytes()},
          {"set_up_excess_bytes", memory.set_up_excess_bytes},
          {"categories", categories},
          {"pinned_host_bytes", memory.pinned_host_bytes},
          {"largest_batch_that_fits", memory.largest_batch},
          {"rule", memory.rule}};
}

}  // namespace

std::string memory_model_text() {
  return "Memory: BASE's measured steps' peak per device (summary.memory's at_step_peak) without its exchange "
         "buffers is one replica; the categories that grow with the batch (activations, scratch, workspaces, "
         "data) are scaled in proportion to the batch, the others kept; each strategy's memory rule (the "
         "strategies' table) then keeps each category whole or a 1/N share on every device and adds its "
         "exchange buffers for the largest bucket at that GPU count (fully_sharded: the parameter and gradient slots "
         "its unit plan allocates for BASE's units at that count). Peak is the whole run's: BASE's "
         "whole-run peak (at_peak: its set-up's searches, its warm-up's timings) scaled the same way, but for "
         "the workspaces it held past its steps' (a search's), which stay; at least the steps' categories. "
         "The largest batch that fits is the largest whose steps' bytes are at most the device memory "
         "(the set-up's searches take only the room the memory limit leaves).";
}

std::string depth_model_text() {
  return "--num_layers: BASE's blocks are identical, so each costs what BASE's cost on average and the rest "
         "(embeddings, final norm, loss) is kept. Time: a block's backward is the mean spacing of BASE's blocks' "
         "gradients, its forward BASE's forward times the block's share of BASE's forward FLOPs (the model's "
         "count; a 1-GPU run records no forward time per block); the step is BASE's plus that for each block more; the "
         "update is scaled by the parameter count; the gradients are the deeper model's tensors and units, each "
         "block produced at BASE's spacing. Memory: parameters (with the 16-bit copy), gradients and optimizer "
         "state are counted from the deeper model's parameters; activations are the part outside the blocks "
         "(the embeddings' and final norm's outputs and the loss's logits chunk, counted from the model's shape) "
         "plus the number of blocks times BASE's per-block part ((BASE's activations - that part) / BASE's "
         "blocks); scratch, workspaces, data and trace are kept (the blocks share them: one block runs at a "
         "time; on a GPU each layer norm's own backward workspace, up to 2 x 256 x width fp32, is left out for "
         "the blocks added). Then every strategy's rules apply as above.";
}

std::string prediction_model_text() {
  return "Model: one step per strategy, simulated from the 1-GPU run's backward timeline. Each gradient bucket "
         "(--bucket_cap_mb of the base run) enters the communication stream when backward has produced it and "
         "costs its collective at that size and GPU count (from measured comm_bench curves where given, else "
         "alpha-beta: ring 2(n-1) steps, tree 2 log2 n; across hosts a collective has the host's whole network, "
         "and the hierarchical all-reduce's step across hosts is priced as the whole bucket's all-reduce over "
         "the hosts); what ends after backward is exposed, less what the replicated strategies hide behind "
         "updating each bucket once its own exchange is done (each bucket's share of the 1-GPU update, by "
         "bytes). fully_sharded is simulated unit by unit as its slot plan runs it (with "
         "--prefetch_units and --reshard_after_forward as the row has them: the default, kept for backward, prefetch 2): "
         "a unit's all-gather starts when the use that prefetches it begins (after its slot's previous unit's "
         "compute) and the unit's compute waits for it, so only the part of a gather not done by then is "
         "charged; each unit's reduce-scatter follows its last backward use; the update waits for all of them. "
         "Backward's time per unit is read off when backward produced the unit's gradients; the base run has no "
         "forward time per unit, so forward is split over the units in proportion to their backward times. "
         "The units are those BASE recorded (summary.timeline.units), else the buckets. Forward, "
         "backward and the update keep their 1-GPU times (the sharded update splits the update N ways, the "
         "parameter server on the GPUs into its owners' shares, the largest setting the pace), except that "
         "forward and backward progress at 1 / (1 + s) of their pace while a transfer that slows compute by s "
         "runs beside them (s from curves measured with comm_bench --beside_compute, else the system file's "
         "compute_slowdown_beside_communication, else 0), and the transfer at 1 / (1 + c) of its own pace while "
         "compute runs beside it (c from the same curves, else 0): both streams are simulated together, so a "
         "slowed backward produces its later buckets later. Not modelled: clock loss under the power cap, the "
         "host's gaps between launches where one process drives several GPUs, stragglers, congestion beyond the stated bandwidths, host-side arithmetic of the host parameter server "
         "beyond the 1-GPU update, data loading. "
         "Efficiency % = 100 x predicted speed / (N x the 1-GPU run's speed).";
}

std::optional<std::string> power_cap_note(const nlohmann::json& gpu_telemetry) {
  // Telemetry fields are null or absent where the GPU did not report them.
  auto number = [&](const char* key) -> std::optional<double> {
    if (!gpu_telemetry.is_object() || !gpu_telemetry.contains(key) || !gpu_telemetry[key].is_number())
      return std::nullopt;
    return gpu_telemetry[key].get<double>();
  };
  const std::optional<double> share = number("power_capped_share");
  if (!share || !(*share >= 0.5)) return std::nullopt;
  std::string text =
      "BASE ran at its GPU's power limit in " + format_fixed(100.0 * *share, 0) + "% of its telemetry samples";
  const std::optional<double> clock = number("sm_clock_mhz_mean"), power = number("power_w_mean"),
                              limit = number("power_limit_w_mean");
  if (clock && power && limit)
    text += " (mean SM clock " + format_fixed(*clock, 0) + " MHz, " + format_fixed(*power, 0) + " W of a " +
            format_fixed(*limit, 0) + " W limit)";
  return text + ": with more GPUs the exchange's kernels and links add power and the clocks can fall "
                "further, a loss the prediction leaves out, so measured runs will likely fall short of it (they "
                "show the loss as `Clock loss`).";
}

std::string prediction_costs_text(const std::vector<CollectiveCurve>& curves) {
  if (curves.empty()) return "Costs: every collective and host copy from the system file (alpha-beta).\n";
  std::string text =
      "Costs from measured curves (busbw against size; a curve serves every rank count through its bus bandwidth, "
      "below its smallest size the smallest's time, above its largest the largest's busbw):\n";
  for (const CollectiveCurve& curve : curves) text += "- " + describe_curve(curve) + "\n";
  std::string rest;
  for (const std::string& cost : costs_from_system_file(curves)) rest += (rest.empty() ? "" : ", ") + cost;
  return text + "\nCosts from the system file (alpha-beta): " + rest + ".\n";
}

std::string render_prediction_markdown(const PredictionReport& report) {
  std::string text = "# dpbench predict\n\n";
  text += "Base: `" + report.base_path + "`, " + report.base_title + ".\n";
  text += report.timeline_text + "\n";
  if (!report.depth_text.empty())
    text += "\n**Predicted for " + report.depth_text + "**: every row, time and memory, is the model at that depth. " +
            depth_model_text() + "\n\n";
  text += "System: " + report.system_name + " (`" + report.system_path + "`): " + report.system_text + "\n\n";
  text += prediction_costs_text(report.curves) + "\n";
  text += prediction_model_text() + "\n\n";
  std::vector<std::string> header = {"Strategy", "GPUs", "Step (ms)", "Speed (" + report.unit + ")", "Efficiency %",
                                     "Exposed comm (ms)", "Comm (ms)"};
  std::string alignment = "lrrrrrr";
  if (report.measurements_given) {
    header.insert(header.end(), {"Measured (" + report.unit + ")", "Error", "Clock loss", "Error at equal clocks"});
    alignment += "rrrr";
  }
  text += markdown_row(header) + alignment_rule(alignment);
  for (const PredictionRow& row : report.rows) {
    std::vector<std::string> cells = {row.strategy, std::to_string(row.step.gpus)};
    if (!row.step.modelled) {
      cells.insert(cells.end(), {"n/a", "n/a", "n/a", "n/a", "n/a"});
    } else {
      cells.insert(cells.end(), {format_fixed(row.step.step_ms, 3), format_fixed(row.items_per_sec, 1),
                                 format_fixed(row.efficiency_pct, 1), format_fixed(row.step.exposed_comm_ms, 3),
                                 format_fixed(row.step.comm_ms, 3)});
    }
    if (report.measurements_given)
      cells.insert(cells.end(), {measured_cell(row), signed_percent(row.error_pct()),
                                 row.measured_clock_loss_pct ? format_fixed(*row.measured_clock_loss_pct, 1) + "%" : "-",
                                 signed_percent(row.error_at_equal_clocks_pct())});
    text += markdown_row(cells);
  }
  std::vector<std::string> notes = report.notes;
  if (report.measurements_given)
    notes.push_back("Clock loss: the points of the measured run's step spent computing below BASE's mean SM clock "
                    "(GPU telemetry; a GPU at its power cap slows down). The prediction leaves it out; `Error at "
                    "equal clocks` compares with the measured speed without it (-: a run without telemetry).");
  for (const PredictionRow& row : report.rows)
    if (!row.step.modelled && row.step.gpus > 1)
      notes.push_back(row.strategy + ", " + std::to_string(row.step.gpus) + " GPUs: not modelled: " + row.step.why_not);
  if (!notes.empty()) {
    text += "\n";
    for (const std::string& note : notes) text += "- " + note + "\n";
  }
  return text + memory_markdown(report);
}

std::string render_prediction_csv(const PredictionReport& report) {
  std::string text =
      "strategy,gpu_number,modelled,step_ms,items_per_sec,efficiency_pct,exposed_comm_ms,comm_ms,"
      "measured_items_per_sec,error_pct,clock_loss_pct,error_at_equal_clocks_pct,measured_file,unit,base_file,"
      "system_file,curve_files,measured_runs,measured_min_items_per_sec,measured_max_items_per_sec,"
      "memory_batch_size,memory_peak_bytes";
  for (const MemoryCategoryInfo& category : memory_categories()) text += ",memory_" + std::string(category.key) + "_bytes";
  text += ",largest_batch_that_fits,device_memory_bytes,measured_memory_peak_bytes,memory_error_pct,"
          "memory_set_up_excess_bytes\n";
  std::string curve_files;  // ';' between them
  for (const CollectiveCurve& curve : report.curves) curve_files += (curve_files.empty() ? "" : ";") + curve.path;
  for (const PredictionRow& row : report.rows) {
    const bool modelled = row.step.modelled;
    auto number = [&](double value) { return csv_number(modelled ? std::optional<double>(value) : std::nullopt); };
    text += csv_field(row.strategy) + "," + std::to_string(row.step.gpus) + "," + (modelled ? "true" : "false") + "," +
            number(row.step.step_ms) + "," + number(row.items_per_sec) + "," + number(row.efficiency_pct) + "," +
            number(row.step.exposed_comm_ms) + "," + number(row.step.comm_ms) + "," +
            csv_number(row.measured_items_per_sec) + "," + csv_number(row.error_pct()) + "," +
            csv_number(row.measured_clock_loss_pct) + "," + csv_number(row.error_at_equal_clocks_pct()) + "," +
            csv_field(row.measured_path) + "," + csv_field(report.unit) + "," + csv_field(report.base_path) + "," +
            csv_field(report.system_path) + "," + csv_field(curve_files) + "," +
            std::to_string(row.measured_speeds.size()) + "," + csv_number(slowest(row)) + "," +
            csv_number(fastest(row));
    if (row.memory) {
      text += "," + std::to_string(row.memory->batch_size) + "," + std::to_string(row.memory->peak_bytes());
      for (const MemoryCategoryInfo& category : memory_categories())
        text += "," + std::to_string(row.memory->bytes[static_cast<size_t>(category.category)]);
      text += "," + std::to_string(row.memory->largest_batch) + "," + std::to_string(report.device_memory_bytes);
    } else {
      text += std::string(",,") + std::string(memory_categories().size(), ',') + ",,";
    }
    text += "," + csv_number(row.measured_memory_peak_bytes) + "," + csv_number(row.memory_error_pct()) + "," +
            (row.memory ? std::to_string(row.memory->set_up_excess_bytes) : std::string()) + "\n";
  }
  return text;
}

std::string render_prediction_json(const PredictionReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const PredictionRow& row : report.rows) {
    const bool modelled = row.step.modelled;
    auto number = [&](double value) { return json_number(modelled ? std::optional<double>(value) : std::nullopt); };
    nlohmann::json entry = {{"strategy", row.strategy},
                            {"gpu_number", row.step.gpus},
                            {"modelled", modelled},
                            {"step_ms", number(row.step.step_ms)},
                            {"items_per_sec", number(row.items_per_sec)},
                            {"efficiency_pct", number(row.efficiency_pct)},
                            {"exposed_comm_ms", number(row.step.exposed_comm_ms)},
                            {"comm_ms", number(row.step.comm_ms)},
                            {"measured_items_per_sec", json_number(row.measured_items_per_sec)},
                            {"error_pct", json_number(row.error_pct())},
                            {"clock_loss_pct", json_number(row.measured_clock_loss_pct)},
                            {"error_at_equal_clocks_pct", json_number(row.error_at_equal_clocks_pct())}};
    if (!modelled) entry["why_not"] = row.step.why_not;
    if (!row.measured_path.empty()) {
      entry["measured_file"] = row.measured_path;
      entry["measured_files"] = row.measured_paths;
    }
    entry["measured_runs"] = row.measured_speeds.size();
    entry["measured_min_items_per_sec"] = json_number(slowest(row));
    entry["measured_max_items_per_sec"] = json_number(fastest(row));
    if (row.memory) {
      entry["memory"] = memory_json(*row.memory);
      entry["measured_memory_peak_bytes"] = json_number(row.measured_memory_peak_bytes);
      entry["memory_error_pct"] = json_number(row.memory_error_pct());
    }
    rows.push_back(entry);
  }
  nlohmann::json curves = nlohmann::json::array();
  for (const CollectiveCurve& curve : report.curves)
    curves.push_back({{"path", curve.path},
                      {"op", collective_name(curve.op)},
                      {"link", link_kind_name(curve.link)},
                      {"link_recorded", curve.link_recorded},
                      {"ranks", curve.ranks},
                      {"hosts", curve.hosts},
                      {"backend", curve.backend},
                      {"communicator", curve.communicator},
                      {"data_type", curve.data_type},
                      {"min_bytes", static_cast<int64_t>(curve.points.front().bytes)},
                      {"max_bytes", static_cast<int64_t>(curve.points.back().bytes)},
                      {"sizes", curve.points.size()}});
  const nlohmann::json costs = {{"curves", curves}, {"system_file", costs_from_system_file(report.curves)}};
  nlohmann::json document = {{"base", {{"path", report.base_path}, {"title", report.base_title},
                                             {"items_per_sec", report.base_items_per_sec}, {"unit", report.unit},
                                             {"timeline", report.timeline_text}}},
                                   {"depth", report.depth_text.empty() ? nlohmann::json()
                                                                       : nlohmann::json{{"scaled", report.depth_text},
                                                                                        {"model", depth_model_text()}}},
                                   {"system", {{"path", report.system_path}, {"name", report.system_name},
                                               {"values", report.system_text}}},
                                   {"costs", costs},
                                   {"model", prediction_model_text()},
                                   {"rows", rows},
                                   {"notes", report.notes}};
  if (report.memory_predicted) {
    nlohmann::json scaling = nlohmann::json::array();
    for (const MemoryCategoryInfo& category : memory_categories())
      if (category.scales_with_batch) scaling.push_back(category.key);
    document["memory"] = {{"batch_size", report.memory_batch_size},
                          {"base_batch_size", report.base_batch_size},
                          {"device_memory_bytes", report.device_memory_bytes},
                          {"device_memory_source", report.device_memory_source},
                          {"scales_with_batch", scaling},
                          {"model", memory_model_text()}};
  }
  // ASCII only (a control byte of a path or name reaches no terminal); a path that is no UTF-8 replaced.
  return document.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string render_prediction_svg(const PredictionReport& report) {
  LineChart chart;
  chart.title = "Predicted efficiency: " + report.base_title + " on " + report.system_name +
                (report.curves.empty() ? "" : " with measured collective curves");
  chart.x_label = "GPUs, log2 scale (0 = 1 GPU, 3 = 8, 10 = 1024)";
  chart.y_label = "efficiency %";
  std::map<std::string, size_t> predicted_line, measured_line;  // by strategy, into chart.lines
  for (const PredictionRow& row : report.rows) {
    const double x = std::log2(static_cast<double>(row.step.gpus));
    if (row.step.modelled) {
      if (!predicted_line.count(row.strategy)) {
        predicted_line[row.strategy] = chart.lines.size();
        chart.lines.push_back({row.strategy + " (predicted)", {}, false, true, ""});
      }
      chart.lines[predicted_line[row.strategy]].points.push_back({x, row.efficiency_pct});
    }
    if (row.measured_items_per_sec && report.base_items_per_sec > 0) {
      if (!measured_line.count(row.strategy)) {
        measured_line[row.strategy] = chart.lines.size();
        chart.lines.push_back({row.strategy + " (measured)", {}, true, true, ""});
      }
      const double efficiency = 100.0 * *row.measured_items_per_sec / (row.step.gpus * report.base_items_per_sec);
      chart.lines[measured_line[row.strategy]].points.push_back({x, efficiency});
    }
  }
  return render_svg(chart);
}

const ReportWriters<PredictionReport>& prediction_writers() {
  static const ReportWriters<PredictionReport> writers = {{ReportFormat::markdown, render_prediction_markdown},
                                                          {ReportFormat::csv, render_prediction_csv},
                                                          {ReportFormat::json, render_prediction_json, true}};
  return writers;
}

}  // namespace dpbench
