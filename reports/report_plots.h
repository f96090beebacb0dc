// The figures of `dpbench report --plots DIR`, built on reports/svg_chart.*: per workload, speedup
// against GPU count with one line per strategy and the ideal y = x, and where its runs measured
// memory, each strategy's and GPU count's bytes per category (memory_report.h); per series, the
// step times of its largest run with the warm-up steps shaded, and where the efficiency went.
#pragma once

#include <string>
#include <vector>

#include "reports/report_series.h"

namespace dpbench {

struct PlotFile {
  std::string name;  // file name only, from [a-z0-9_.-]
  std::string svg;
};

// Figures for every comparison and series of `report`; `notes` receives one line per figure that
// could not be drawn (e.g. a run without step records).
std::vector<PlotFile> build_report_plots(const Report& report, std::vector<std::string>* notes);

// Creates `directory` (and its parents) if needed and writes each figure atomically. Throws
// std::runtime_error naming what could not be created or written.
void write_report_plots(const std::vector<PlotFile>& plots, const std::string& directory);

// "resnet50, replicated (nccl), fp32" -> "resnet50_replicated_nccl_fp32": lower case letters,
// digits and '-' kept, every other run of characters one '_', at most 150 characters.
std::string safe_file_stem(const std::string& text);

}  // namespace dpbench
