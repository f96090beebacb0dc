// The too-little-memory line (see memory_refusal.h).
#include "cli/memory_refusal.h"

#include <algorithm>
#include <cmath>
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

std::string in_unit_named(uint64_t bytes, const MemoryUnit& unit) {
  return in_unit(static_cast<double>(bytes), unit.bytes) + " " + unit.name;
}

// Note [too little memory]: nothing of the replica could be measured on the device (it is larger
// than the device itself), so the line says what it can count without allocating, the parameters,
// gradients and optimizer state, and over how many devices fully_sharded leaves room beside them.
// A smaller batch is no remedy here: these do not depend on it.
std::string unsized_replica_line(const MemoryRefusal& refusal) {
  const ReplicaMemoryFit& fit = refusal.fit;
  const uint64_t available = available_bytes(fit);
  const CategoryBytes need = model_state_under(refusal.strategy, fit.model_state);
  const MemoryUnit unit = memory_unit_for(static_cast<double>(std::max(total_bytes(need), fit.limit_bytes)));
  std::string line = "too little memory on device " + std::to_string(fit.device_index) + " for --batch_size=" +
                     std::to_string(fit.batch_size) + ": its parameters, gradients and optimizer state alone need " +
                     in_unit_named(total_bytes(need), unit) + " (" + category_list(need, unit.bytes) +
                     ") before any activation, and " + in_unit_named(available, unit) + " is free of its " +
                     in_unit_named(fit.limit_bytes, unit) + " (" + refusal.limit_source + ")";
  const auto leaves_room = [&](const CategoryBytes& bytes) {
    return static_cast<double>(total_bytes(bytes)) <= (1.0 - kRoomForActivations) * static_cast<double>(available);
  };
  if (leaves_room(need)) line += "; with its activations one replica does not fit it even at a batch of 1";
  for (const ShardedChoice& choice : refusal.fully_sharded_over) {
    const CategoryBytes sharded = model_state_under(choice.memory, fit.model_state);
    if (!leaves_room(sharded)) continue;
    const double kept = choice.memory.kept[static_cast<size_t>(MemoryCategory::gradients)];
    const long long shards = kept > 0 ? std::llround(1.0 / kept) : 1;
    return line + "; --variable_update=fully_sharded over " + std::to_string(choice.devices) + " devices keeps 1/" +
           std::to_string(shards) + " of each on every device (" + in_unit_named(total_bytes(sharded), unit) +
           " before activations), or use a smaller model";
  }
  if (refusal.fully_sharded_over.empty()) return line + "; use a device with more memory, or a smaller model";
  const ShardedChoice& most = refusal.fully_sharded_over.back();
  return line + "; even --variable_update=fully_sharded over " + std::to_string(most.devices) +
         " devices leaves less than " + std::to_string(std::lround(kRoomForActivations * 100)) + "% of it beside them (" +
         in_unit_named(total_bytes(model_state_under(most.memory, fit.model_state)), unit) +
         " before activations): use a smaller model";
}

}  // namespace

CategoryBytes model_state_under(const StrategyMemory& memory, const CategoryBytes& model_state) {
  const CategoryBytes under = device_bytes_under(memory, model_state);
  CategoryBytes kept{};
  for (MemoryCategory category : {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::optimizer_state})
    kept[static_cast<size_t>(category)] = under[static_cast<size_t>(category)];
  return kept;
}

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
  // The refused allocation's own message (fit.refused) is not repeated: it begins with this
  // line's "too little memory on device N" and says to reduce the batch.
  if (!fit.fitted) return unsized_replica_line(refusal);
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
