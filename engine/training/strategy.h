// The strategy interface: how replicas synchronise. Implementations live in strategies/, one file
// each; the engine's runner calls the hooks from each device's host thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/device.h"
#include "engine/training/model.h"
#include "engine/training/optimizer.h"
#include "engine/training/parameter_set.h"

namespace dpbench {

// What a strategy sees of one replica: flat buffers and ranges, never layers.
struct Replica {
  int index = 0;
  Device* device = nullptr;
  ParameterSet* parameters = nullptr;
  Optimizer* optimizer = nullptr;
  // The replica's embedding tables (ModelReplica::sparse_gradients), for strategies that can
  // exchange them sparsely; the same tables, in the same order, on every replica.
  std::vector<SparseGradientSource> sparse;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // Strategies that shard every replica's parameters (fully_sharded): called once, before the
  // replicas' buffers exist, with the model's units (Note [parameter units] in
  // engine/training/model.h). Returns per replica of this process the chunks of the layout it
  // keeps (ParameterSet's sharded form); empty where every replica keeps the whole layout.
  // Throws ConfigError for a model it cannot shard.
  virtual std::vector<std::vector<ResidentChunk>> plan_shards(const ParameterLayout& layout,
                                                              const ParameterUnits& units, int num_replicas) {
    return {};
  }
  // Whether the sharded replicas keep a 16-bit copy of their shards under fp16/bf16 (ParameterSet);
  // false: the strategy rounds each chunk as it gathers it.
  virtual bool shards_keep_weight_copy() const { return true; }
  // The hooks replica `replica`'s model brackets its units with; nullptr: none. Valid after setup.
  virtual UnitHooks* unit_hooks(int replica) { return nullptr; }
  // Replica `replica`'s whole parameters where it keeps only a shard of them, assembled from
  // every replica's shard (blocking, every device idle, after the run); empty otherwise.
  virtual std::vector<float> assembled_parameters(int replica) const { return {}; }
  // Called once, before any step, from the main thread.
  virtual void setup(const ParameterLayout& layout, std::vector<Replica>& replicas) = 0;
  // Called from replica `replica`'s thread during backward; `ready` marks the range's completion on
  // the compute stream. May enqueue communication that waits on `ready`; must never block the host.
  virtual void on_gradients_ready(int replica, GradientRange range, const Event& ready) = 0;
  // Called from replica `replica`'s thread after backward: wait for communication and apply the
  // update (or fetch updated parameters) so that the next forward sees the new values.
  // `step` counts from 1 (Adam's bias correction uses it).
  virtual void finish_step(int replica, int64_t step) = 0;
  // True when the hooks enqueue the same device work every step and make no host decisions, so
  // a step can be captured once and replayed as a CUDA graph.
  virtual bool step_is_replayable() const { return false; }
  // Called by the runner's main thread when the measured steps begin, with every device idle:
  // counters the strategy keeps on the devices are read here, so warm-up steps do not count.
  virtual void begin_measurement() {}
  // The result's summary.comm over the measured steps (bytes, messages, bandwidths, exposed
  // communication); called once after the run, with every device idle.
  virtual nlohmann::json communication_summary(int64_t measured_steps) const {
    return nlohmann::json::object();
  }
  // Per replica, the mean time per measured step its compute stream waited for communication
  // (exposed communication), in ms; empty where nothing is exchanged. Called once after the run,
  // with every device idle.
  virtual std::vector<double> exposed_comm_ms_per_step(int64_t measured_steps) const { return {}; }
  // Work the hooks enqueue per step on one device (exchange and update: backend ops, copies,
  // collectives, host functions, as the device counts them: Device::enqueued), for the kernel
  // count of a step that is not captured as a graph; -1: not known.
  virtual int64_t launches_per_step() const { return -1; }
  // A device thread failed: hooks blocked waiting for other replicas must throw, not hang.
  // Callable from any thread.
  virtual void abort() {}
};

}  // namespace dpbench
