// The model interface the runner drives. Models (models/) implement it; the engine never sees layers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/data/batch_source.h"  // InputBuffer
#include "engine/training/parameter_set.h"
#include "engine/training/parameter_units.h"

namespace dpbench {

// What the model calls around each use of a unit (Note [parameter units]); the runner passes the
// strategy's, or none.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_unit(int unit, UnitPass pass) = 0;
  virtual void after_unit(int unit, UnitPass pass) = 0;
};

// A use of a unit as a scope: before_unit now, after_unit at its end; nothing without hooks.
class UnitScope {
 public:
  UnitScope(UnitHooks* hooks, int unit, UnitPass pass) : hooks_(hooks), unit_(unit), pass_(pass) {
    if (hooks_ != nullptr) hooks_->before_unit(unit_, pass_);
  }
  ~UnitScope() noexcept(false) {
    if (hooks_ != nullptr) hooks_->after_unit(unit_, pass_);
  }
  UnitScope(const UnitScope&) = delete;
  UnitScope& operator=(const UnitScope&) = delete;

 private:
  UnitHooks* hooks_;
  int unit_;
  UnitPass pass_;
};

// Called by a model during backward each time a contiguous range of gradients is final.
// The runner's implementation records an event on the compute stream and hands both to the strategy.
class GradientAnnouncer {
 public:
  virtual ~GradientAnnouncer() = default;
  virtual void announce(GradientRange range) = 0;
  // The hooks backward brackets its units with (Note [parameter units]); none by default.
  virtual UnitHooks* unit_hooks() { return nullptr; }
};

// Which slice of the global batch a replica trains on: samples [replica*batch_size, (replica+1)*batch_size).
struct ReplicaShard {
  int replica = 0;
  int num_replicas = 1;
  int batch_size = 1;
  uint64_t seed = 0;
  uint64_t first_global_sample() const { return static_cast<uint64_t>(replica) * batch_size; }
};

// What a step's forward pass gets from the runner. Both pointers are device memory and stay the
// same every step, so the step can be captured once and replayed as a CUDA graph.
struct StepContext {
  float* loss_out = nullptr;      // receives the mean loss over the replica's batch
  const int32_t* step = nullptr;  // the step number (0-based, warm-up included), for dropout masks
  // fp16 loss scaling: the loss's gradient is multiplied by *loss_scale; nullptr: no scaling.
  const float* loss_scale = nullptr;
  // The hooks forward brackets its units with (Note [parameter units]); nullptr: none.
  UnitHooks* units = nullptr;
};

// An embedding table whose gradient can be exchanged sparsely (--sparse_embedding_grads): its
// range in the flat gradient buffer, (rows, dim), and the replica's token ids that index it
// (device memory, num_ids of them, the same buffer every step), so a strategy can find the rows
// a step touched without knowing the model. Rows not among the ids have a zero gradient.
struct SparseGradientSource {
  GradientRange range;  // rows * dim elements
  int rows = 0;
  int dim = 0;
  const int32_t* ids = nullptr;
  size_t num_ids = 0;
};

// Per-device state of a model: activations, workspaces and its shard of synthetic data.
class ModelReplica {
 public:
  virtual ~ModelReplica() = default;
  // Forward pass and loss on the compute stream.
  virtual void forward(const StepContext& context) = 0;
  // Backward pass into the ParameterSet's gradient buffer (overwriting it), announcing finished ranges.
  virtual void backward(GradientAnnouncer& announcer) = 0;
  // The embedding tables of this replica, for a sparse exchange; none by default.
  virtual std::vector<SparseGradientSource> sparse_gradients() const { return {}; }
  // Its data inputs, in a fixed order (models/batch_sources.h writes batches in that layout).
  virtual std::vector<InputBuffer> inputs() const = 0;
};

// Floating-point operations of a training step: the multiply-adds of convolutions
// and matrix products (LSTM gates and recurrences included), 2 FLOPs each, as MFU figures count
// them; element-wise ops, normalisation, pooling and softmax are left out.
struct StepFlops {
  double forward = 0;   // the forward pass and the loss's projection
  double backward = 0;  // the backward pass as it runs: input gradients only where something needs them
  // Forward work the backward pass runs again (--activation_checkpointing=blocks recomputes each
  // block before its backward); part of the step's work, apart from the two above.
  double recompute = 0;
  double training() const { return forward + backward + recompute; }
  StepFlops& operator+=(const StepFlops& other) {
    forward += other.forward;
    backward += other.backward;
    recompute += other.recompute;
    return *this;
  }
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  virtual const ParameterLayout& layout() const = 0;
  // What one sample counts as, e.g. "images" (throughput unit is unit() + "/s").
  virtual std::string unit() const = 0;
  // Items counted per sample (1 image; source + target words per sentence pair for nmt).
  virtual int64_t items_per_sample() const { return 1; }
  // FLOPs a training step spends on one sample (see StepFlops); every model's count is linear in
  // the batch, so a replica's step is this times its batch.
  virtual StepFlops flops_per_sample() const = 0;
  // What flops_per_sample counts, in words, for the result's summary.flops.counted.
  virtual std::string flops_counted() const {
    return "multiply-adds of convolutions and matrix products (LSTM gates included), 2 FLOPs each; the passes as "
           "they run";
  }
  // Deterministic initial values from the seed, identical for every replica and backend.
  virtual std::vector<float> initial_parameters(uint64_t seed) const = 0;
  // Its parameter units and their uses in a step (Note [parameter units]); empty: not cut into units.
  virtual ParameterUnits parameter_units() const { return {}; }
  // The activation bytes a replica keeps outside its repeated blocks (embeddings, final norm,
  // the loss's logits), counted from its shape as its replica allocates them: what stays when
  // `dpbench predict --num_layers` scales a run's blocks to another depth (ModelEntry::repeated_blocks).
  virtual uint64_t activation_bytes_outside_blocks() const { return 0; }
  virtual std::unique_ptr<ModelReplica> create_replica(Device& device, ParameterSet& parameters,
                                                       const ReplicaShard& shard) const = 0;
};

}  // namespace dpbench
