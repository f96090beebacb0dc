// What `dpbench predict` reads of its results, each number checked before it is used, with the
// limits `run` applies where `run` set the value: BASE, a 1-GPU training run with summary.timeline
// (its timeline consistent with its summary, its bucket sizes ones `run` accepts), refused with one
// line naming the file and the field; the MEASURED runs, each put beside the prediction of its
// strategy and GPU count where it ran BASE's workload and the buckets predicted (else named in a
// note with the flags that differ), every run of one row used: the median by speed, with the
// spread, whatever order they were given in.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/predict_deeper_model.h"
#include "engine/training/parameter_set.h"
#include "reports/backward_timeline.h"
#include "reports/prediction_tables.h"
#include "reports/report_loader.h"
#include "reports/step_prediction.h"

namespace dpbench {

// What makes a run a BASE: the flags that record its backward timeline.
inline constexpr const char* kPredictTimelineFlags = "--trace_file=FILE (and --trace_steps=1:20 to average more steps)";

struct PredictBase {
  LoadedResult loaded;
  BackwardTimeline timeline;
  double bucket_cap_mb = 0;   // predicted: --bucket_cap_mb, else BASE's, else `run`'s default
  std::string cap_text;       // that cap as given, recorded or defaulted
  double tail_bucket_mb = 0;  // BASE's tail bucket where it fits the cap predicted, else 0
  // --num_layers: `loaded` and `timeline` are those of BASE's model at that depth (Note [deeper
  // model from its blocks] in cli/predict_deeper_model.h); none: BASE's own.
  std::optional<DepthScaling> depth;
};

// `bucket_cap_flag`: --bucket_cap_mb as given (already checked), "" where it was not.
// `num_layers`: --num_layers as given (at least 1), 0 where it was not: BASE scaled to that many
// blocks (scale_base_to_layers). Throws RuntimeError "predict: BASE '<path>': <why>; <the fix>":
// not one usable result (the loader's reason), not 1 GPU, a forward-only run (no backward to
// predict from), no timeline, a timeline or bucket size no run writes (the field named), a model
// --num_layers does not scale.
PredictBase load_predict_base(const std::string& path, const std::string& bucket_cap_flag, int num_layers = 0);

// The base run's tensors as a layout (in gradient-buffer order), as the strategies lay them out.
ParameterLayout gradient_layout_of(const BackwardTimeline& timeline);

// The labels of the rows a measured run may belong with, in preference order: its strategy's, as
// the strategies' table labels it (strategy_label), from the options it recorded (the default
// where it lacks one), its bucket sizes left out (they are checked against those predicted apart);
// then, for a multi-process strategy, that of the one-process entry issuing the same schedule
// (StrategyEntry::predicted_as). None for a strategy this build does not know.
std::vector<std::string> predicted_labels_of(const nlohmann::json& config);

// The results at `paths` (files or folders), each matched to the row of `report` of its strategy
// and GPU count and set there (see PredictionRow), or named in report.notes with why not: skipped
// by the loader, another workload than BASE's (the flags named), other buckets than predicted, a
// strategy or GPU count not predicted.
void attach_measurements(const std::vector<std::string>& paths, const PredictBase& base, PredictionReport& report);

}  // namespace dpbench
