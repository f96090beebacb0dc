// Reference results: runs dpbench measured itself, kept as the result files those runs wrote
// (reference_results/ in the checkout, share/dpbench/reference_results/ installed; README, "Is my
// number normal?"), and how a run compares with the one of its workload.
//
// A reference is a run's reference when they measured one workload: the workload identity
// `dpbench compare` pairs results by (report's series key, reports/report_series.h, with every
// workload flag, reports/workload_flags.h), with the GPU count and the backend, but not the GPU
// type: a run on another GPU than every reference's is still compared, and the difference named.
// Among the references of its workload a run takes the one on its own GPU type where there is
// one, then the one whose machine differs from its own in the fewest ways, then the newest; the
// other references of that workload measured on the same machine description by the same dpbench
// build count as that reference's repeats (the mean of their speeds, as compare takes a side's).
// The speeds and their ratio are compare's (reports/speed_comparison.h): items per second over
// the measured steps, the bootstrap interval and the verdict with its noise floor.
//
// What the machines' descriptions (environment, summary.gpu_telemetry, the execution flags)
// differ in is said in words a reader can act on, "power limit 600 W (reference 700 W)": the GPU
// and its form (a PCIe card instead of SXM), its power limit and clocks, what held the clocks back
// during the run, the flags that change how a step executes, the launcher, NVLink, the driver and
// the libraries' versions, dpbench's version.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/report_loader.h"
#include "reports/speed_comparison.h"
#include "reports/strategy_catalog.h"

namespace dpbench {

// How `run`'s workload differs from `reference`'s, a difference a line: "backend (this run cuda;
// reference reference)", "devices (this run 2; reference 1)", a workload flag as compare names it,
// "batch_size (this run 32; reference 16)" (reports/workload_flags.h), and, where those agree but
// the series keys do not, the key's field ("data (this run cifar10; reference cifar10 shape
// (synthetic))"). Empty: one workload. The GPU type is no part of it.
std::vector<std::string> workload_mismatches(const Result& run, const Result& reference,
                                             const StrategyCatalog& strategies);

// How `run`'s machine and execution differ from `reference`'s, in the order a gap is most likely
// explained by them, each with both values: "another GPU: NVIDIA H100 80GB HBM3 (reference NVIDIA
// H200)", "power limit 600 W (reference 700 W)", "--cuda_graph=false (reference true)", "driver
// 570.86 (reference 580.159.04)", ... `with_conditions` adds what held this run's clocks back (a
// mean SM clock 3% or more off the reference's, thermal limits, hardware slowdowns), which
// describe a run rather than a machine. Empty where nothing recorded differs.
std::vector<std::string> machine_differences(const Result& run, const Result& reference, bool with_conditions = true);

// The reference `run` takes from `references` (see the top of this file), or why none.
struct ReferenceChoice {
  // The chosen reference and its repeats, in path order; empty: none matched.
  std::vector<const LoadedResult*> runs;
  const LoadedResult* chosen = nullptr;          // of `runs`, the one chosen: its machine is the one compared
  std::vector<std::string> machine_differences;  // run against the chosen reference, with conditions
  // None matched: the reference whose workload differs in the fewest ways (on the run's GPU type
  // before another), and how; null where there is no reference at all.
  const LoadedResult* nearest = nullptr;
  std::vector<std::string> nearest_differences;
  bool matched() const { return !runs.empty(); }
};
ReferenceChoice choose_reference(const Result& run, const std::vector<LoadedResult>& references,
                                 const StrategyCatalog& strategies);

// A reference in a few words: "H200 reference (2026-11-29, 700 W)", "4 x H200 reference
// (2026-11-28, 700 W)"; "reference-backend reference (2026-11-29)" for a run of the reference
// backend; the power limit where the result has the GPUs' telemetry.
std::string reference_label(const Result& reference);

// `path` (a file found under `folder`) relative to `folder`, as summary.reference names it; the
// file's name where `folder` is the file itself.
std::string path_in_folder(const std::string& path, const std::string& folder);

// summary.reference (README, "Is my number normal?"): `run` against the reference it takes from
// `references`, the results found in `folder`. Matched: {"matched": true, "folder", "files" (the
// reference and its repeats, relative to the folder), "label", "date", "git_sha", "version",
// "gpu", "num_devices", "power_limit_w", "driver", "unit", "reference_speed", "run_speed",
// "ratio", "ratio_low", "ratio_high", "verdict", "noise_floor_pct", "machine_differences"}; not
// matched: {"matched": false, "folder", "references", "reason", "nearest": {"file", "label",
// "differs_in"} or null}.
nlohmann::json reference_summary(const Result& run, const std::string& folder, const LoadedResults& references,
                                 const StrategyCatalog& strategies, const ComparisonSettings& settings);

// summary.reference where the references could not be read at all: {"matched": false, "folder",
// "references": 0, "reason": why, "nearest": null}.
nlohmann::json unreadable_references_summary(const std::string& folder, const std::string& why);

// The console's lines of summary.reference (the values after the "Reference:" label): matched,
// "H200 reference (2026-11-29, 700 W): 560,155 tokens/s; this run 98% (within noise)", then,
// where the machines differ, "the machines differ, which could explain a gap: power limit 600 W
// (reference 700 W); ..." (without "which could explain a gap" unless the run is slower beyond
// the noise), or, where a slower run's machine matches the reference's in every recorded way, a
// line saying so; not matched, one line: "none for this workload among 274 reference results
// (nearest: FILE, H200 reference (2026-11-28, 700 W), which differs in batch_size (this run 32;
// reference 16))". Empty for an empty `reference`.
std::vector<std::string> reference_console_lines(const nlohmann::json& reference);

// A speed with thousands separated, as the console line writes it: "560,155", "1,061", "95.3".
std::string readable_speed(double items_per_sec);

}  // namespace dpbench
