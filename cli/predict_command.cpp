// `dpbench predict` (see the header): flags, loading the base result, the system file and the
// curves, the bucket plan rebuilt from the base run's tensors, measured runs matched to
// strategies, output.
#include "cli/predict_command.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/flag_limits.h"
#include "cli/flag_parsing.h"
#include "cli/flag_reader.h"
#include "cli/flags_validation.h"
#include "cli/log.h"
#include "cli/predict_inputs.h"
#include "cli/traced_steps.h"
#include "engine/backend/step_trace.h"
#include "engine/errors.h"
#include "engine/machine/library_memory.h"
#include "engine/machine/text_content.h"
#include "engine/precision.h"
#include "reports/backward_timeline.h"
#include "reports/collective_curves.h"
#include "reports/memory_summary.h"
#include "reports/prediction_tables.h"
#include "reports/report_loader.h"
#include "reports/report_series.h"
#include "reports/system_description.h"
#include "reports/text_file.h"
#include "reports/workload_flags.h"
#include "strategies/bucketed_exchange.h"
#include "strategies/exchange_plan.h"
#include "strategies/strategy_registry.h"
#include "strategies/synchronisation_options.h"

namespace dpbench {
namespace {

constexpr int kMaxPredictedGpus = 1 << 20;

// A curve of sizes comm_bench can have measured (its --max_bytes limit, cli/flag_limits.h).
CollectiveCurve load_curve(const std::string& path) {
  CollectiveCurve curve = load_collective_curve(path);
  const double largest = curve.points.back().bytes;
  if (largest > static_cast<double>(kMaxBenchBytes))
    throw RuntimeError(escaped_value("predict: curve file '" + path + "': size_bytes " + fmt::format("{:.0f}", largest) +
                                     " is more than comm_bench measures (at most " + std::to_string(kMaxBenchBytes) +
                                     ", --max_bytes=1024G); give the file comm_bench wrote, unedited"));
  return curve;
}

}  // namespace

FlagTable predict_flag_table() {
  FlagTable table;
  table.command = "predict";
  table.takes_paths = true;
  table.flags = {
      {"system", "", "FILE", "the target system (required)"},
      {"curves", "", "FILE",
       "measured collectives (dpbench comm_bench --json files, one per collective and link kind): their busbw "
       "against size replaces the system file's formulas; every argument up to the next flag is a curve, so give "
       "MEASURED before it",
       {}, FlagKind::list},
      {"max_gpus", "", "N", "predict up to N GPUs", std::to_string(PredictOptions().max_gpus)},
      {"bucket_cap_mb", "", "X",
       "the bucket size to predict, 0 to 1048576 as dpbench run takes it (0: one exchange per tensor; default: "
       "BASE's, else run's default); the tail bucket (--tail_bucket_mb) is BASE's where it fits that size"},
      {"batch_size", "", "N",
       "the batch per device of the memory table (default: BASE's; the time table keeps BASE's batch)"},
      {"num_layers", "", "N",
       "predict the model with N blocks, scaled from BASE's blocks (a model of identical blocks, e.g. gpt: a "
       "depth too large for one GPU from a shallower BASE; default: BASE's)"},
      {"device_memory", "", "SIZE",
       "the memory of one device the largest batch must fit, e.g. 141GiB (default: BASE's --device_memory, else "
       "its GPU's memory less what its CUDA context held and 1 GiB for the libraries)"},
      {"output", "", "FILE", "write the table to FILE (atomically) instead of stdout"},
      {"format", "", "FORMAT", "markdown, csv or json", std::string("markdown"), FlagKind::value,
       report_format_choice_names(prediction_writers())},
      {"plot", "", "FILE", "also write the figure (efficiency against GPUs, SVG) to FILE"},
  };
  return table;
}

namespace {

// The base run's buckets as `bucket_cap_mb` (and `tail_bucket_mb`) cut them: the bucket planner
// of the strategies, on the base run's layout.
std::vector<GradientRange> plan_of(const ParameterLayout& layout, double bucket_cap_mb, double tail_bucket_mb) {
  StrategyOptions options;
  options.bucket_cap_mb = bucket_cap_mb;
  options.tail_bucket_mb = tail_bucket_mb;
  return plan_exchanges(layout, exchange_plan_options(options));
}

// Each planned range as a bucket: its bytes and when backward had produced it.
std::vector<BucketReady> buckets_of(const BackwardTimeline& timeline, const std::vector<GradientRange>& plan) {
  std::vector<BucketReady> buckets;
  for (const GradientRange& range : plan)
    buckets.push_back({static_cast<double>(range.count * timeline.gradient_element_bytes),
                       ready_ms_of(timeline, static_cast<int64_t>(range.offset), static_cast<int64_t>(range.count))});
  return buckets;
}

// Where compute's slowdown beside communication comes from (Note [compute beside communication]).
std::string describe_compute_slowdown(const SystemDescription& system, const std::vector<CollectiveCurve>& curves) {
  std::string measured;
  for (const CollectiveCurve& curve : curves)
    if (curve.points.front().compute_slowdown)
      measured += std::string(measured.empty() ? "" : ", ") + collective_name(curve.op) + " " +
                  link_kind_name(curve.link) + " on " + std::to_string(curve.ranks) + " ranks";
  const auto source = system.sources.find("compute_slowdown_beside_communication");
  const std::string from_file =
      source == system.sources.end()
          ? "not slowed (the system file gives no compute_slowdown_beside_communication)"
          : format_fixed(100 * system.model.compute_slowdown_beside_communication, 1) +
                "% slower (the system file's compute_slowdown_beside_communication, source: " + source->second + ")";
  if (measured.empty()) return " Compute beside a transfer: " + from_file + ".";
  return " Compute beside a transfer: slowed as comm_bench --beside_compute measured it beside " + measured +
         "; beside any other transfer " + from_file + ".";
}

std::string describe_system(const SystemDescription& system) {
  const SystemModel& m = system.model;
  return std::to_string(m.gpus_per_host) + " GPUs per host; inside a host " +
         format_fixed(m.intra_host.bandwidth_gb_per_s, 1) + " GB/s per GPU, " + format_fixed(m.intra_host.latency_us, 1) +
         " us per step; across hosts " + format_fixed(m.inter_host.bandwidth_gb_per_s, 1) + " GB/s per host, " +
         format_fixed(m.inter_host.latency_us, 1) + " us; to host memory " +
         format_fixed(m.host_copy.bandwidth_gb_per_s, 1) + " GB/s per GPU; " +
         (m.algorithm == CollectiveAlgorithm::ring ? "ring" : "tree") + " algorithm; communication " +
         (m.communication_overlaps_compute ? "overlaps compute" : "runs on the compute thread (no overlap)") +
         ". Sources: in the file.";
}

// What the curves and the system file say differently, or what BASE ran on and the curves did not.
std::vector<std::string> curve_notes(const std::vector<CollectiveCurve>& curves, const SystemModel& system,
                                     const std::string& base_backend) {
  std::vector<std::string> notes;
  for (const CollectiveCurve& curve : curves) {
    if (curve.link == LinkKind::intra_host && curve.ranks > system.gpus_per_host)
      notes.push_back("curve `" + curve.path + "` was measured on " + std::to_string(curve.ranks) +
                      " ranks inside one host, but the system file has " + std::to_string(system.gpus_per_host) +
                      " GPUs per host: past " + std::to_string(system.gpus_per_host) +
                      " GPUs the prediction takes inter_host costs");
    if (!curve.backend.empty() && !base_backend.empty() && curve.backend != base_backend)
      notes.push_back("curve `" + curve.path + "` was measured on the " + curve.backend + " backend, BASE ran on " +
                      base_backend);
  }
  return notes;
}

// Note [memory from one run]: BASE's steps' and whole-run peaks per device as one replica at its
// batch; none where it has no summary.memory (a result before schema 3). A result without the
// steps' figures has its whole-run peak as both.
std::optional<MeasuredMemory> measured_memory_of(const Result& result) {
  const nlohmann::json& memory = result.summary.memory;
  if (!memory.is_object() || !memory.contains("devices") || !memory["devices"].is_array() || memory["devices"].empty())
    return std::nullopt;
  const nlohmann::json& device = memory["devices"].front();
  if (!device.contains("at_peak") || !device["at_peak"].is_object()) return std::nullopt;
  const bool has_steps = device.contains("at_step_peak") && device["at_step_peak"].is_object();
  const nlohmann::json& steps = has_steps ? device["at_step_peak"] : device["at_peak"];
  MeasuredMemory measured;
  for (const MemoryCategoryInfo& category : memory_categories()) {
    const size_t c = static_cast<size_t>(category.category);
    measured.replica[c] = static_cast<uint64_t>(std::max(0.0, memory_number(steps, category.key)));
    measured.whole_run[c] = static_cast<uint64_t>(std::max(0.0, memory_number(device["at_peak"], category.key)));
  }
  measured.replica[static_cast<size_t>(MemoryCategory::communication)] = 0;  // its strategy's
  measured.whole_run[static_cast<size_t>(MemoryCategory::communication)] = 0;
  // Its --trace_file's stamps are the trace's, not a run's: a row of them per traced step.
  try {
    const TracedStepWindow traced =
        resolve_traced_steps(config_text(result.config, "trace_steps"), result.config.value("num_warmup_batches", 0),
                             result.config.value("num_batches", 1));
    const uint64_t stamps = sizeof(int64_t) * StepTrace::kSlotsPerStep * static_cast<uint64_t>(std::max<int64_t>(0, traced.count()));
    for (CategoryBytes* bytes : {&measured.replica, &measured.whole_run}) {
      uint64_t& trace = (*bytes)[static_cast<size_t>(MemoryCategory::trace)];
      trace = trace > stamps ? trace - stamps : 0;
    }
  } catch (const ConfigError&) {
    // A window no run has (BASE's own checks refuse it elsewhere): its trace stays as recorded.
  }
  measured.batch_size = std::max(1, result.config.value("batch_size", 1));
  return measured;
}

// The memory the largest batch must fit, and where it came from: --device_memory, else BASE's own,
// else BASE's first device's memory less what its CUDA context held when the run began.
std::pair<uint64_t, std::string> device_memory_of(const PredictOptions& options, const Result& result) {
  if (options.device_memory > 0) return {options.device_memory, "--device_memory"};
  const uint64_t recorded = result.config.value("device_memory", uint64_t{0});
  if (recorded > 0) return {recorded, "BASE's --device_memory"};
  if (result.environment.devices.empty()) return {0, "BASE records no device"};
  const DeviceRecord& device = result.environment.devices.front();
  const nlohmann::json& memory = result.summary.memory;
  double context = 0;
  if (memory.contains("devices") && memory["devices"].is_array() && !memory["devices"].empty() &&
      memory["devices"].front().contains("unaccounted"))
    context = memory_number(memory["devices"].front()["unaccounted"], "context_bytes");
  if (result.environment.backend != "cuda") return {device.memory_bytes, "BASE's " + device.name};
  const double taken = context + static_cast<double>(kLibraryMemoryReserve);
  const uint64_t usable = static_cast<double>(device.memory_bytes) > taken ? device.memory_bytes - static_cast<uint64_t>(taken) : 0;
  return {usable, "BASE's " + device.name + ", less what its CUDA context held and 1 GiB for the libraries"};
}

}  // namespace

PredictOptions parse_predict_flags(const std::vector<std::string>& args) {
  const ReadFlags flags = read_flags(predict_flag_table(), args);
  PredictOptions options;
  options.help = flags.help();
  if (options.help) return options;
  options.system_path = flags.text("system");
  options.curve_paths = flags.list("curves");
  options.output = flags.text("output");
  options.plot = flags.text("plot");
  options.format = parse_report_format(flags.text("format"), prediction_writers());
  options.max_gpus = parse_int_at_least("max_gpus", flags.text("max_gpus"), 1, "at least 1", kMaxPredictedGpus);
  if (flags.given("batch_size"))
    options.batch_size = parse_int_at_least("batch_size", flags.text("batch_size"), 1, "at least 1", kMaxBatchPerDevice);
  if (flags.given("num_layers"))
    options.num_layers = parse_int_at_least("num_layers", flags.text("num_layers"), 1, "at least 1", kMaxLayers);
  if (flags.given("device_memory")) options.device_memory = parse_memory_size("device_memory", flags.text("device_memory"));
  if (flags.given("bucket_cap_mb")) {
    // What `run` accepts (the option's record): a prediction of buckets no run can have would predict nothing.
    options.bucket_cap_mb = flags.text("bucket_cap_mb");
    StrategyOptions checked;
    parse_synchronisation_option(synchronisation_option("bucket_cap_mb"), options.bucket_cap_mb, &checked);
  }
  if (flags.paths.empty())
    throw ConfigError("predict: give a 1-GPU result as BASE; usage: dpbench predict BASE [MEASURED...] --system FILE "
                      "[--curves FILE...] (dpbench predict --help)");
  if (options.system_path.empty())
    throw ConfigError("predict: give the target system with --system FILE (systems/*.json; dpbench predict --help)");
  options.base_path = flags.paths.front();
  options.measured_paths.assign(flags.paths.begin() + 1, flags.paths.end());
  if (!find_missing_paths({options.system_path}).empty())
    throw ConfigError("predict: no such system file: '" + options.system_path +
                      "' (give one of systems/*.json, or a file in its format: systems/README.md)");
  if (const auto missing = find_missing_paths(options.curve_paths); !missing.empty())
    throw ConfigError("predict: no such curve file: " + quoted_list(missing) +
                      " (give files dpbench comm_bench --json FILE wrote)");
  std::vector<NamedPath> read = {{"--system", options.system_path}};
  for (const std::string& curve : options.curve_paths) read.push_back({"--curves", curve});
  check_offline_paths("predict", flags.paths, options.output, {{"--plot", options.plot}}, read);
  return options;
}

std::string predict_help_text() {
  return "usage: dpbench predict BASE [MEASURED...] --system FILE [--curves FILE...] [flags]\n"
         "Predicts the step time, speed, efficiency and exposed communication of each strategy on 1, 2, 4, ...\n"
         "GPUs from BASE, a 1-GPU result with summary.timeline (run it with " + std::string(kPredictTimelineFlags) + "),\n"
         "on the system FILE describes (systems/*.json: GPUs per host, bandwidths and latencies, ring or tree).\n"
         "MEASURED: result files or folders of N-GPU runs of BASE's workload (model settings, batch, precision,\n"
         "optimizer, data; any other is named in a note with the flags that differ) and the buckets predicted; each\n"
         "is put beside its prediction with the error, several of one strategy and count as their median run.\n"
         "Also each device's memory by category for every strategy and count at --batch_size (default BASE's), from\n"
         "BASE's summary.memory, and the largest batch per device that fits --device_memory (default BASE's device).\n\n" +
         flag_table_help(predict_flag_table()) + "\n" + prediction_model_text() + "\n\n" + memory_model_text() +
         "\n\nExit codes: 0 predicted; 1 an error (a BASE without a timeline or of several GPUs, a bad system file,\n"
         "a file given to --curves that comm_bench did not write, two curves of one collective and link kind);\n"
         "2 a bad command line.\n"
         "Example: dpbench predict g1.json g2.json g4.json --system systems/h200_nvlink_8x400g.json --plot predict.svg\n";
}

int run_predict_command(const std::vector<std::string>& args) {
  const PredictOptions options = parse_predict_flags(args);
  if (options.help) {
    write_text_atomically("-", predict_help_text(), "predict's help");
    return 0;
  }
  const SystemDescription system = load_system_description(options.system_path);
  std::vector<CollectiveCurve> curves;
  for (const std::string& path : options.curve_paths) curves.push_back(load_curve(path));
  const CurveMap curve_map = curves_by_collective(curves);
  const PredictBase base = load_predict_base(options.base_path, options.bucket_cap_mb, options.num_layers);
  const Result& result = base.loaded.result;
  const BackwardTimeline& timeline = base.timeline;
  const std::string& cap_text = base.cap_text;
  const double tail_bucket_mb = base.tail_bucket_mb;

  MeasuredStep measured;
  measured.step_ms = timeline.step_ms;
  measured.forward_ms = timeline.forward_ms;
  measured.backward_ms = timeline.backward_ms;
  measured.update_ms = timeline.after_backward_ms;
  const std::optional<Precision> precision = find_precision(config_text(result.config, "precision"));
  measured.update_waits_for_every_exchange =
      precision == Precision::fp16 && result.config.value("fp16_enable_auto_loss_scale", false);
  const ParameterLayout layout = gradient_layout_of(timeline);
  const std::vector<GradientRange> plan = plan_of(layout, base.bucket_cap_mb, tail_bucket_mb);
  measured.buckets = buckets_of(timeline, plan);
  // The units fully_sharded gathers: the model's, where BASE recorded them, else the plan's ranges.
  std::vector<GradientRange> unit_ranges;
  for (const ParameterUnit& unit : timeline.units.units) unit_ranges.push_back(unit.range);
  measured.units = timeline.units.empty() ? measured.buckets : buckets_of(timeline, unit_ranges);

  PredictionReport report;
  report.base_path = base.loaded.path;
  report.unit = result.summary.unit;
  report.base_items_per_sec = result.summary.items_per_sec;
  report.base_title = config_text(result.config, "model") + ", batch " + config_text(result.config, "batch_size") +
                      " per GPU, " + result.environment.backend + " backend, 1 GPU at " +
                      format_fixed(result.summary.items_per_sec, 1) + " " + result.summary.unit;
  report.timeline_text = "Its timeline (" + std::to_string(timeline.traced_steps) + " traced steps): step " +
                         format_fixed(timeline.step_ms, 3) + " ms, forward " + format_fixed(timeline.forward_ms, 3) +
                         " ms, backward " + format_fixed(timeline.backward_ms, 3) + " ms, after backward " +
                         format_fixed(timeline.after_backward_ms, 3) + " ms; " +
                         std::to_string(measured.buckets.size()) + " bucket(s) of --bucket_cap_mb=" + cap_text +
                         (tail_bucket_mb > 0 ? fmt::format(", --tail_bucket_mb={:g}", tail_bucket_mb) : std::string()) +
                         " (" + format_fixed(measured.gradient_bytes() / 1e6, 2) + " MB of gradients).";
  if (base.depth) {
    report.depth_text = base.depth->text();
    report.base_title += "; predicted for " + report.depth_text;
    error_log().info("predict: predicting " + config_text(result.config, "model") + " at " + report.depth_text +
                     " (" + std::to_string(result.summary.num_parameters) + " parameters)");
  }
  report.system_path = options.system_path;
  report.system_name = system.model.name;
  report.system_text = describe_system(system) + describe_compute_slowdown(system, curves);
  report.curves = curves;
  for (const std::string& note : curve_notes(curves, system.model, result.environment.backend))
    report.notes.push_back(note);
  if (std::optional<std::string> note = power_cap_note(result.summary.gpu_telemetry)) report.notes.push_back(*note);

  // The system file's formulas price whatever no curve covers (other collectives and links, host copies).
  const auto formulas = std::make_shared<const AlphaBetaCost>(system.model);
  const MeasuredCurveCost cost(curve_map, formulas);
  const std::optional<MeasuredMemory> memory = measured_memory_of(result);
  const auto [device_memory, device_memory_source] = device_memory_of(options, result);
  if (memory) {
    report.memory_predicted = true;
    report.base_batch_size = memory->batch_size;
    report.memory_batch_size = options.batch_size > 0 ? options.batch_size : memory->batch_size;
    report.device_memory_bytes = device_memory;
    report.device_memory_source = device_memory_source;
  } else {
    report.notes.push_back("BASE has no summary.memory (a result of an older dpbench): no memory table");
  }
  // Each configuration the strategies' table lists for predict, its schedule on each GPU count
  // priced: the exchange method the run would choose, the run's label.
  for (const PredictedVariant& variant : predicted_variants()) {
    const StrategyEntry* entry = find_strategy(variant.strategy);
    if (entry == nullptr || !entry->schedule) continue;
    StrategyOptions strategy_options = options_of(variant);
    // A 16-bit weight copy is what fully_sharded gathers (Note [what travels]).
    if (precision == Precision::fp16 || precision == Precision::bf16) strategy_options.gathered_element_bytes = 2;
    for (int gpus : predicted_gpu_counts(options.max_gpus)) {
      PredictionRow row;
      row.strategy = strategy_label(entry->name, recorded_options(entry->name, strategy_options), false);
      const StepSchedule schedule =
          gpus > 1 ? entry->schedule(strategy_options, layout, plan, shape_on(system.model, gpus), timeline.units) : StepSchedule{};
      row.step = predict_step(measured, schedule, gpus, system.model, cost);
      if (memory && entry->memory)
        row.memory = predict_memory(*memory, entry->memory(strategy_options, layout, plan, shape_on(system.model, gpus), timeline.units),
                                    report.memory_batch_size, report.device_memory_bytes);
      if (row.step.modelled && row.step.step_ms > 0) {
        // The ratio first: on 1 GPU the predicted step is the measured one, and 100 * (x / x) is exactly
        // 100 where (100 * x) / x need not be.
        const double step_ratio = measured.step_ms / row.step.step_ms;
        row.efficiency_pct = 100.0 * step_ratio;
        row.items_per_sec = result.summary.items_per_sec * gpus * step_ratio;
      }
      report.rows.push_back(row);
    }
  }
  attach_measurements(options.measured_paths, base, report);
  // Notes and tables quote files (paths, names): escaped, so no control byte of theirs reaches the terminal.
  for (const std::string& note : report.notes) error_log().warn(escaped_value("predict: " + note));

  const std::string text = render_in_format(options.format, report, prediction_writers());
  if (!options.plot.empty()) {
    write_text_atomically(options.plot, render_prediction_svg(report), "--plot");
    error_log().info("predict: figure written to " + options.plot);
  }
  write_offline_output("predict", text, options.output);
  return 0;
}

}  // namespace dpbench
