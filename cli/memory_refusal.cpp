// The too-little-memory line (see memory_refusal.h).
#include "cli/memory_refusal.h"

#include <algorithm>
#include <cstdio>

#include "reports/memory_summary.h"

namespace dpbench {
namespace {

// The largest batch the line will ever suggest: far past any device's memory at a byte a sample.
constexpr int64_t kLargestSuggestedBatch = int64_t{1} << 30;

std::string in_unit(double bytes, double unit_bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / unit_bytes);
  return text;
}

uint64_t available_bytes(const ReplicaMemoryFit& fit) {
  return fit.limit_bytes > fit.held_bytes ? fit.limit_bytes - fit.held_bytes : 0;
}

}  // namespace

std::string category_list(const CategoryBytes& bytes, double unit_bytes) {
  std::string text;
  for (const MemoryCategoryInfo& category : memory_categories()) {
    const uint64_t held = bytes[static_cast<size_t>(category.category)];
    if (held == 0) continue;
    text += (text.empty() ? "" : ", ") + std::string(category.console_word) + " " + in_unit(static_cast<double>(held), unit_bytes);
  }
  return text;
}

CategoryBytes refused_device_bytes(const ReplicaMemoryFit& fit, const StrategyMemory& memory, int64_t batch) {
  const int clamped = static_cast<int>(std::min<int64_t>(batch, kLargestSuggestedBatch));
  return device_bytes_under(memory, fit.need(clamped));
}

int64_t largest_fitting_batch(const ReplicaMemoryFit& fit, const StrategyMemory& memory) {
  return largest_batch_that_fits(
      available_bytes(fit), [&](int64_t batch) { return total_bytes(refused_device_bytes(fit, memory, batch)); },
      kLargestSuggestedBatch);
}

std::string too_little_memory_line(const MemoryRefusal& refusal) {
  const ReplicaMemoryFit& fit = refusal.fit;
  const std::string device = "device " + std::to_string(fit.device_index);
  const uint64_t available = available_bytes(fit);
  if (!fit.fitted)
    return "too little memory on " + device + ": " + fit.refused + ", and one replica does not fit it even at a batch "
           "of 1 or 2 (" + refusal.limit_source + "); use a device with more memory, or a smaller model";
  const CategoryBytes need = refused_device_bytes(fit, refusal.strategy, fit.batch_size);
  const MemoryUnit unit = memory_unit_for(static_cast<double>(std::max(total_bytes(need), fit.limit_bytes)));
  std::string line = "too little memory on " + device + " for --batch_size=" + std::to_string(fit.batch_size) +
                     ": it needs " + in_unit(static_cast<double>(total_bytes(need)), unit.bytes) + " " + unit.name +
                     " (" + category_list(need, unit.bytes) + "), and " +
                     in_unit(static_cast<double>(available), unit.bytes) + " " + unit.name + " is free of its " +
                     in_unit(static_cast<double>(fit.limit_bytes), unit.bytes) + " " + unit.name + " (" + refusal.limit_source + ")";
  // The fit is linear in the batch; should it ever call the refused batch fitting, the set-up's
  // own count (which refused it) is the one believed.
  const int64_t largest = refusal.largest_batch
                              ? *refusal.largest_batch
                              : std::min<int64_t>(largest_fitting_batch(fit, refusal.strategy), fit.batch_size - 1);
  line += largest > 0 ? "; the largest batch that fits is " + std::to_string(largest) + " (--batch_size=" +
                            std::to_string(largest) + ")"
                      : "; not even a batch of 1 fits with this strategy";
  for (const StrategyMemoryChoice& other : refusal.alternatives) {
    const uint64_t other_need = total_bytes(refused_device_bytes(fit, other.memory, fit.batch_size));
    if (other_need <= available && other_need < total_bytes(need)) {
      line += ", or this batch with " + other.flags + " (" + in_unit(static_cast<double>(other_need), unit.bytes) +
              " " + unit.name + ")";
      break;
    }
  }
  if (refusal.recomputing_blocks && refusal.recomputing_blocks->fitted) {
    const ReplicaMemoryFit& recomputing = *refusal.recomputing_blocks;
    const uint64_t recomputing_need = total_bytes(refused_device_bytes(recomputing, refusal.strategy, fit.batch_size));
    const int64_t recomputing_largest =
        std::min<int64_t>(largest_fitting_batch(recomputing, refusal.strategy), fit.batch_size);
    if (recomputing_need <= available) {
      line += ", or this batch with --activation_checkpointing=blocks (" +
              in_unit(static_cast<double>(recomputing_need), unit.bytes) + " " + unit.name + ")";
    } else if (recomputing_largest > largest) {
      line += ", or --batch_size=" + std::to_string(recomputing_largest) + " with --activation_checkpointing=blocks";
    }
  }
  return line;
}

}  // namespace dpbench
