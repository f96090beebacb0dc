// The timeline of a run's traced steps as Holistic Trace Analysis (HTA, the analyser PyTorch users
// run on multi-rank profiler traces) reads it: one Kineto-style Chrome Trace Event document per
// device, each a rank of its own ("distributedInfo": rank and world_size; HTA has one trace per
// rank, and a threads-as-devices run has one process for all its devices). Its GPU work is what HTA
// takes for kernels: each device stream's time, cut where its spans nest, goes to the innermost
// span (Note [HTA kernels from nested spans]); exchanges are named so that HTA counts them as
// communication kernels. The spans themselves are there too, as GPU user annotations (HTA's user
// annotation breakdown attributes kernels to them), and the host's spans as CPU user annotations,
// so the same file opens in ui.perfetto.dev with the nesting the Chrome trace shows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/device_timeline.h"
#include "reports/chrome_trace.h"

namespace dpbench {

// Who recorded a device's timeline, as HTA numbers it.
struct HtaRank {
  int rank = 0;            // the device's position in the job: process rank x devices per process + position
  int world_size = 1;      // devices in the job
  int host_process_id = 0; // the pid of the host's tracks (the recording process's, as PyTorch traces have)
};

// A kernel as HTA sees it: a stretch of one stream's time owned by one span.
struct HtaKernel {
  std::string name;
  std::string category;  // "kernel" or "gpu_memcpy"
  int track = 0;         // a StreamKind value
  int64_t begin_ns = 0, end_ns = 0;
  int64_t run_step = 0;
  nlohmann::json args;  // the owning span's
};

// A device's kernels in time order, per stream; times as the timeline holds them.
std::vector<HtaKernel> hta_kernels(const DeviceTimeline& timeline);

// How an exchange's kernel name begins: HTA counts a kernel as communication by its name
// (`^nccl.*Kernel` in HTA 0.5, `^nccl` or `ncclKernel` later), as NCCL names its kernels.
inline constexpr char kHtaCommunicationPrefix[] = "ncclKernel: ";

// One device's document. `origin`'s clock shift puts every rank on rank 0's clock; times are whole
// microseconds of that clock (see the note). `metadata` becomes its otherData.
std::string hta_trace_document(const DeviceTimeline& timeline, const HtaRank& rank, const TraceOrigin& origin,
                               const nlohmann::json& metadata);

// The file of `rank` in the folder --trace_file names ("rank3.json").
std::string hta_trace_file_name(int rank);

}  // namespace dpbench
