// --trace_file (see the header).
#include "cli/trace_output.h"

#include "engine/communication/process_group.h"
#include "reports/chrome_trace.h"
#include "reports/text_file.h"
#include "dpbench_version.h"

namespace dpbench {

std::string write_run_trace(const RunConfig& config, const std::vector<DeviceTimeline>& timelines,
                            int devices_per_rank, int64_t warmup_steps) {
  const ProcessGroup* group = process_group();
  TraceOrigin origin;
  origin.devices_per_rank = devices_per_rank;
  if (group != nullptr) {
    origin.rank = group->rank();
    origin.num_ranks = group->size();
    origin.host = group->hostnames().at(static_cast<size_t>(group->rank()));
    const auto [shift, uncertainty] = clock_shift_to_rank0(*group);
    origin.clock_shift_ns = shift;
    origin.clock_uncertainty_ns = uncertainty;
  }
  const nlohmann::json mine = trace_events(timelines, origin);
  std::vector<nlohmann::json> events_by_rank;
  if (group == nullptr) {
    events_by_rank.push_back(mine);
  } else {
    for (const std::string& text : group->all_gather_text(mine.dump())) events_by_rank.push_back(nlohmann::json::parse(text));
    if (group->rank() != 0) return "";
  }
  size_t spans = 0;
  int64_t first = -1, last = -1;
  for (const DeviceTimeline& timeline : timelines)
    for (const TracedStep& step : timeline.steps) {
      spans += step.spans.size();
      first = first < 0 ? step.step : std::min(first, step.step);
      last = std::max(last, step.step);
    }
  auto label = [&](int64_t step) {
    return step < warmup_steps ? "w" + std::to_string(step + 1) : std::to_string(step - warmup_steps + 1);
  };
  nlohmann::json metadata = {
      {"tool", "dpbench"},
      {"version", DPBENCH_VERSION},
      {"git_sha", DPBENCH_GIT_SHA},
      {"model", config.model},
      {"variable_update", config.variable_update},
      {"num_devices", config.world_devices()},
      {"batch_size_per_device", config.batch_size},
      {"trace_steps", first < 0 ? "" : label(first) + ":" + label(last)},
      {"clock", "device timestamps written by each stream (CUDA: %globaltimer) aligned to the host's steady "
                "clock per device; under mpirun every rank aligned to rank 0's"},
  };
  write_text_atomically(config.trace_file, chrome_trace_document(events_by_rank, metadata), "trace");
  const int64_t steps = first < 0 ? 0 : last - first + 1;
  return "Trace written to " + config.trace_file + " (" + std::to_string(steps) + " steps, " +
         std::to_string(spans) + " spans on this process's devices; open it in https://ui.perfetto.dev or chrome://tracing)\n";
}

}  // namespace dpbench
