// The run's one line when its configuration does not fit its devices' memory (Note [too little
// memory] in engine/training/runner.h): what each category needs at the batch asked, what the
// device has, the largest batch that fits, a strategy that would fit where another of the
// strategies' table's configurations would, and recomputing the model's blocks where that would.
// Each strategy's share of the bytes comes from its memory rule in the strategies' table
// (StrategyEntry::memory), as `dpbench predict` takes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/machine/memory_ledger.h"
#include "engine/training/runner.h"

namespace dpbench {

// A configuration's memory rule and the flags that select it ("--variable_update=replicated").
struct StrategyMemoryChoice {
  std::string flags;
  StrategyMemory memory;
};

// fully_sharded's memory rule with its shards over `devices` devices.
struct ShardedChoice {
  int devices = 0;
  StrategyMemory memory;
};

struct MemoryRefusal {
  ReplicaMemoryFit fit;
  StrategyMemory strategy;                        // the run's
  std::vector<StrategyMemoryChoice> alternatives; // others of the table, in its order
  std::string limit_source;                       // "--device_memory=7MiB", "what the GPU had free"
  // The same replica recomputing its blocks (--activation_checkpointing=blocks), sized on the
  // same device; absent where the model cannot, or the run already does.
  std::optional<ReplicaMemoryFit> recomputing_blocks;
  // The largest batch that fits, checked by sizing the replica on the device; unset: the fit's.
  std::optional<int64_t> largest_batch;
  // Where one replica could not be sized on the device (fit.fitted false): fully_sharded's rule
  // over more devices, fewest first (2, 4, ... 64); the line names the first that leaves room
  // beside the parameters, gradients and optimizer state (kRoomForActivations).
  std::vector<ShardedChoice> fully_sharded_over;
};

// The share of the free memory a device count suggested for fully_sharded leaves beside the
// parameters, gradients and optimizer state, for the activations and workspaces that could not be
// sized: with less the suggestion would only move the refusal to the activations.
inline constexpr double kRoomForActivations = 0.1;

// One device's bytes, by category, at `batch` under `memory` (the fit's replica with the strategy's
// shares and buffers).
CategoryBytes refused_device_bytes(const ReplicaMemoryFit& fit, const StrategyMemory& memory, int64_t batch);

// The largest batch per device that fits the device under `memory`; 0: not even 1.
int64_t largest_fitting_batch(const ReplicaMemoryFit& fit, const StrategyMemory& memory);

// "too little memory on device 0 for --batch_size=65: it needs 7.2 MiB (parameters 3.0, ...), and
// 7.0 MiB is free of its 7.0 MiB (--device_memory=7MiB); the largest batch that fits is 63
// (--batch_size=63)", one line, no newline; then, where one would fit this batch, another
// strategy of the table, and --activation_checkpointing=blocks (or the larger batch it fits).
// Where one replica could not be sized (fit.fitted false): "too little memory on device 0 for
// --batch_size=1: its parameters, gradients and optimizer state alone need 138.6 GiB (parameters
// 46.2, ...) before any activation, and 138.3 GiB is free of its 138.3 GiB (...);
// --variable_update=fully_sharded over 2 devices keeps 1/2 of each on every device (72.3 GiB
// before activations), or use a smaller model", from the fit's model_state.
std::string too_little_memory_line(const MemoryRefusal& refusal);

// The parameters, gradients and optimizer state of `model_state` on one device under `memory`
// (its shares, and the slots it adds to them); the other categories left out.
CategoryBytes model_state_under(const StrategyMemory& memory, const CategoryBytes& model_state);

// "parameters 3.0, gradients 3.0, ..." in `unit`, the categories that hold anything.
std::string category_list(const CategoryBytes& bytes, double unit_bytes);

}  // namespace dpbench
