// What `dpbench predict` writes: the predictions of every strategy at 1, 2, 4, ... GPUs with the
// measured runs beside them (markdown, CSV, JSON) and the figure of efficiency against GPU count
// (SVG). Plain data in, text out; cli/predict_command.cpp fills it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "reports/report_format.h"
#include "reports/collective_curves.h"
#include "reports/step_prediction.h"

namespace dpbench {

struct PredictionRow {
  std::string strategy;  // strategy_label()
  StepPrediction step;
  double items_per_sec = 0;  // predicted
  double efficiency_pct = 0;
  // The measured runs of this strategy and GPU count: the median run by speed (of an even count
  // the slower middle one, as `report` picks) and its file; every run's speed, slowest first,
  // and file, so repeats give the spread and the order they were given in changes nothing.
  std::optional<double> measured_items_per_sec;
  std::string measured_path;
  std::vector<double> measured_speeds;
  std::vector<std::string> measured_paths;
  // Points of the median run's step lost to a lower mean GPU clock than BASE's
  // (clock_loss_points); the prediction leaves that term out. None without telemetry in both.
  std::optional<double> measured_clock_loss_pct;
  // One device's memory at the report's memory batch (Note [memory from one run]); none where
  // BASE has no summary.memory. The median run's peak beside it (its fullest device's, set-up
  // included), where it ran that batch.
  std::optional<MemoryPrediction> memory;
  std::optional<double> measured_memory_peak_bytes;
  std::optional<double> memory_error_pct() const {  // 100 x (predicted - measured) / measured
    if (!memory || !measured_memory_peak_bytes || *measured_memory_peak_bytes <= 0) return std::nullopt;
    return 100.0 * (static_cast<double>(memory->peak_bytes()) - *measured_memory_peak_bytes) / *measured_memory_peak_bytes;
  }
  std::optional<double> error_pct() const {  // 100 x (predicted - measured) / measured
    if (!measured_items_per_sec || *measured_items_per_sec <= 0) return std::nullopt;
    return 100.0 * (items_per_sec - *measured_items_per_sec) / *measured_items_per_sec;
  }
  // The error against the measured speed at BASE's clock: its step without the clock loss,
  // measured / (1 - loss / 100).
  std::optional<double> error_at_equal_clocks_pct() const {
    if (!measured_items_per_sec || *measured_items_per_sec <= 0 || !measured_clock_loss_pct ||
        *measured_clock_loss_pct >= 100)
      return std::nullopt;
    const double at_base_clock = *measured_items_per_sec / (1.0 - *measured_clock_loss_pct / 100.0);
    return 100.0 * (items_per_sec - at_base_clock) / at_base_clock;
  }
};

struct PredictionReport {
  std::string base_path, base_title;  // the 1-GPU result and what it is in words
  std::string unit;                   // "images/s"
  double base_items_per_sec = 0;      // the 1-GPU run's measured speed, the base of efficiency
  std::string system_path, system_name, system_text;  // the system file, its values in words
  std::vector<CollectiveCurve> curves;                 // --curves: the costs they give; the system file the rest
  std::string timeline_text;                           // the 1-GPU timeline and its buckets in words
  // --num_layers: what the prediction is for ("--num_layers=40, scaled from BASE's 4 blocks");
  // "" for BASE's own model. The time and memory tables are then the deeper model's.
  std::string depth_text;
  bool measurements_given = false;                     // measured results were given (error columns)
  std::vector<PredictionRow> rows;                     // by strategy, then GPU count
  std::vector<std::string> notes;                      // measured results not used, and why
  // The memory table: the batch per device it predicts (BASE's unless --batch_size), BASE's own,
  // and the device memory its largest batches fit (--device_memory, else BASE's), in words.
  bool memory_predicted = false;
  int memory_batch_size = 0, base_batch_size = 0;
  uint64_t device_memory_bytes = 0;
  std::string device_memory_source;
};

std::string render_prediction_markdown(const PredictionReport& report);
std::string render_prediction_csv(const PredictionReport& report);
std::string render_prediction_json(const PredictionReport& report);
// The formats `dpbench predict` writes (--format), each by its writer above.
const ReportWriters<PredictionReport>& prediction_writers();
// Efficiency % against log2(GPUs): a line per strategy, the measured runs as dots of their own.
std::string render_prediction_svg(const PredictionReport& report);

// How the memory table is predicted, in one paragraph (README, "What fits").
std::string memory_model_text();
// How --num_layers scales BASE's blocks' time and memory, in one paragraph (README, "Predicting
// scaling"; Note [deeper model from its blocks] in cli/predict_deeper_model.h).
std::string depth_model_text();

// What is and is not modelled, in one paragraph (the README says the same at length).
std::string prediction_model_text();

// A warning where BASE's GPUs sat at their power limit in at least half their telemetry samples
// (`gpu_telemetry` as a result's summary holds it): more GPUs add the exchange's power and can
// lower the clocks further, a loss the prediction leaves out. None otherwise.
std::optional<std::string> power_cap_note(const nlohmann::json& gpu_telemetry);

// Which costs came from measured curves and which from the system file, in a few markdown lines.
std::string prediction_costs_text(const std::vector<CollectiveCurve>& curves);

}  // namespace dpbench
