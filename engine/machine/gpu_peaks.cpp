// The peak table (see gpu_peaks.h).
#include "engine/machine/gpu_peaks.h"

#include <vector>

namespace dpbench {
namespace {

struct GpuPeaks {
  const char* name_part;  // matched against the driver's name; the first entry that matches wins
  const char* model;
  double fp32, tf32, bf16;  // dense TFLOP/s; fp16 equals bf16 on these GPUs
  const char* datasheet;
};

// More specific names first (an "H100 PCIe" also contains "H100").
const std::vector<GpuPeaks>& table() {
  static const std::vector<GpuPeaks> peaks = {
      {"GH200", "GH200", 67, 494.5, 989.5, "NVIDIA GH200 Grace Hopper Superchip datasheet"},
      {"H200", "H200 SXM", 67, 494.5, 989.5, "NVIDIA H200 Tensor Core GPU datasheet (SXM)"},
      {"H100 PCIe", "H100 PCIe", 51, 378, 756.5, "NVIDIA H100 Tensor Core GPU datasheet (PCIe)"},
      {"H100 NVL", "H100 NVL", 60, 417.5, 835.5, "NVIDIA H100 Tensor Core GPU datasheet (NVL)"},
      {"H100", "H100 SXM", 67, 494.5, 989.5, "NVIDIA H100 Tensor Core GPU datasheet (SXM)"},
      {"A100", "A100", 19.5, 156, 312, "NVIDIA A100 Tensor Core GPU datasheet"},
  };
  return peaks;
}

}  // namespace

std::optional<PeakThroughput> gpu_peak_tflops(const std::string& gpu_name, Precision precision) {
  for (const GpuPeaks& gpu : table()) {
    if (gpu_name.find(gpu.name_part) == std::string::npos) continue;
    const std::string sheet = std::string(gpu.datasheet);
    switch (precision) {
      case Precision::fp32:
        return PeakThroughput{gpu.fp32, std::string(gpu.model) + " FP32 (no tensor cores), " + sheet};
      case Precision::tf32:
        return PeakThroughput{gpu.tf32, std::string(gpu.model) + " TF32 tensor cores, dense (half the sparsity figure), " + sheet};
      case Precision::bf16:
      case Precision::fp16:
        return PeakThroughput{gpu.bf16, std::string(gpu.model) + " " + (precision == Precision::bf16 ? "BF16" : "FP16") +
                                            " tensor cores, dense (half the sparsity figure), " + sheet};
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace dpbench
