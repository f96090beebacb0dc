// Combining a job's measurements across its processes (see run_measurements.h).
#include "engine/training/run_measurements.h"

#include <algorithm>

namespace dpbench {
namespace {

// Every process's values, process after process.
template <typename T>
std::vector<T> gather_values(const ProcessGroup& group, const std::vector<T>& mine) {
  std::vector<T> all(mine.size() * static_cast<size_t>(group.size()));
  group.all_gather_bytes(mine.data(), mine.size() * sizeof(T), all.data());
  return all;
}

}  // namespace

void combine_across_processes(const ProcessGroup& group, RunMeasurements& m) {
  const size_t steps = m.step_time_ms.size(), n = static_cast<size_t>(group.size());
  auto combine = [&](std::vector<double>& values, bool mean) {
    const std::vector<double> all = gather_values(group, values);
    for (size_t i = 0; i < values.size(); ++i) {
      double total = 0, most = all[i];
      for (size_t r = 0; r < n; ++r) {
        total += all[r * values.size() + i];
        most = std::max(most, all[r * values.size() + i]);
      }
      values[i] = mean ? total / static_cast<double>(n) : most;
    }
  };
  combine(m.step_time_ms, false);
  combine(m.step_loss, true);
  combine(m.data_wait_ms, false);
  combine(m.epoch_time_s, false);
  std::vector<double> scalars = {m.total_time_s, m.host_wait_s};
  combine(scalars, false);
  m.total_time_s = scalars[0];
  m.host_wait_s = scalars[1];
  std::vector<double> phases;
  for (const StepPhases& p : m.step_phases) {
    const auto parts = p.parts();
    phases.insert(phases.end(), parts.begin(), parts.end());
  }
  const std::vector<double> all_phases = gather_values(group, phases);
  m.step_phases.clear();
  for (size_t i = 0; i + StepPhases::kParts <= all_phases.size(); i += StepPhases::kParts)
    m.step_phases.push_back(StepPhases::from_parts(all_phases.data() + i));
  m.memory = gather_values(group, m.memory);
  if (!m.step_items.empty()) {
    const std::vector<int64_t> all = gather_values(group, m.step_items);
    for (size_t i = 0; i < steps; ++i) {
      int64_t total = 0;
      for (size_t r = 0; r < n; ++r) total += all[r * steps + i];
      m.step_items[i] = total;
    }
  }
}

}  // namespace dpbench
