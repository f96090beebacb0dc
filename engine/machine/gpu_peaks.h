// The dense peak arithmetic throughput of the GPUs dpbench is measured on, per math mode: the
// denominator of MFU (model FLOPs utilisation). Figures are NVIDIA's datasheet values; for tensor
// cores the datasheets quote throughput with 2:4 structured sparsity, so the dense figure is half
// of it. A GPU not in the table has no peak (MFU is then left out, with the reason).
#pragma once

#include <optional>
#include <string>

#include "engine/precision.h"

namespace dpbench {

struct PeakThroughput {
  double tflops = 0;   // per GPU, dense
  std::string source;  // where the figure comes from, for the result
};

// The peak of the GPU called `gpu_name` (as the driver names it, e.g. "NVIDIA H200") for the math
// `precision` runs: fp32 (no tensor cores), tf32, bf16 or fp16 (tensor cores, fp32 accumulation).
std::optional<PeakThroughput> gpu_peak_tflops(const std::string& gpu_name, Precision precision);

}  // namespace dpbench
