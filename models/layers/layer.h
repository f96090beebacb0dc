// Layer: one node op of a CNN graph (models/network.h), shared by all replicas. A layer holds only
// what every replica shares (shapes, parameter ids); anything per device lives in a LayerState
// the replica owns, and the replica hands each pass its buffers through a LayerPass.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cnn_geometry.h"
#include "engine/backend/device.h"
#include "engine/training/model.h"
#include "engine/training/parameter_set.h"

namespace dpbench {

// Per-device buffers of one layer (batch-norm statistics, a dropout seed, ...).
class LayerState {
 public:
  virtual ~LayerState() = default;
};

// The buffers of one node on one replica, fixed when the replica is set up (nothing per step).
struct LayerPass {
  Backend* ops = nullptr;
  const ParameterSet* params = nullptr;
  // Activations and their gradients hold their tensor's type (Tensor4::type): fp32, or 16-bit
  // under --precision=fp16|bf16.
  std::vector<const void*> x;  // one per input, each of that input's shape
  // Input gradients, overwritten by backward (added to where accumulate_dx says so); nullptr
  // where none is wanted (the images).
  std::vector<void*> dx;
  std::vector<bool> accumulate_dx;  // per input; only for layers that can_accumulate_input_gradient
  void* y = nullptr;   // output
  void* dy = nullptr;  // output gradient
  // Batch norm's statistics made with the output (2 * channels fp32: sums, then sums of squares,
  // Backend::conv2d_forward_statistics) for the batch norm reading it; nullptr: none wanted.
  float* y_statistics = nullptr;
  // Per input, those statistics where its producer made them (else nullptr; may be empty).
  std::vector<const float*> x_statistics;
  const float* input_statistics(size_t input) const {
    return input < x_statistics.size() ? x_statistics[input] : nullptr;
  }
  LayerState* state = nullptr;
  void* workspace = nullptr;  // shared by all layers of the replica
  // false in inference (--forward_only): batch norm uses its running statistics, dropout passes
  // its input through, and backward is never called.
  bool training = true;
  size_t workspace_bytes = 0;
};

class Layer {
 public:
  Layer(std::string name, Tensor4 output_shape) : name_(std::move(name)), output_(output_shape) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const Tensor4& output_shape() const { return output_; }

  bool has_parameters() const { return first_parameter_id_ >= 0; }
  // Tensors [first, last] were declared consecutively, so their gradients form one range.
  GradientRange gradient_range(const ParameterLayout& layout) const {
    return layout.range_of(first_parameter_id_, last_parameter_id_);
  }
  // Writes this layer's initial values into the flat host vector (the model's layout).
  virtual void initialize(const ParameterLayout& layout, uint64_t seed,
                          std::vector<float>& host_params) const {}

  virtual std::unique_ptr<LayerState> create_state(Device& device, const ReplicaShard& shard) const {
    return nullptr;
  }
  // FLOPs of this layer's passes over its whole batch (engine/training/model.h's StepFlops: convolutions
  // and matrix products only); `input_gradient`: backward computes the input's gradient.
  virtual StepFlops flops(bool input_gradient) const { return {}; }
  // Scratch the passes need; the replica allocates the maximum over its layers once.
  virtual size_t workspace_bytes(Backend& ops) const { return 0; }

  // In place: the output may share the input's buffer and dx may share dy's (ReLU).
  virtual bool can_run_in_place() const { return false; }
  // Backward reads the forward output (ReLU, pooling), so nothing may overwrite it in place.
  virtual bool backward_reads_output() const { return false; }
  // Backward reads the values of input `input` (a convolution's filter gradient does; ReLU, an
  // add, a concatenation do not): the network keeps them until then, and no longer
  // (Note [one arena for activations and their gradients] in models/network_arena.cpp).
  virtual bool backward_reads_input(size_t input) const { return true; }
  // Backward can add its input gradient to what dx holds (LayerPass::accumulate_dx), so a tensor
  // read by several layers needs no scratch buffer and no separate addition for this reader.
  virtual bool can_accumulate_input_gradient() const { return false; }
  // Backward may write input `input`'s gradient over dy (each element of dy read before it is
  // overwritten, and not read after): where this layer writes that gradient rather than adding to
  // it, the network gives it dy's buffer, as autograd hands an add's one gradient to both inputs.
  virtual bool input_gradient_may_overwrite_output_gradient(size_t input) const { return false; }

  // `step` is the device-side step number (the same pointer every step).
  virtual void forward(const LayerPass& pass, const int32_t* step) const = 0;
  virtual void backward(const LayerPass& pass, const int32_t* step) const = 0;

 protected:
  // Declares a parameter tensor; layers declare theirs in forward order from their constructor.
  int declare_parameter(ParameterLayout& layout, const std::string& suffix,
                        std::vector<int64_t> shape) {
    const int id = layout.declare(name_ + "/" + suffix, std::move(shape));
    if (first_parameter_id_ < 0) first_parameter_id_ = id;
    last_parameter_id_ = id;
    return id;
  }
  // For parameters a wrapped layer declared itself (consecutively, in forward order).
  void claim_parameters(int first_id, int last_id) {
    first_parameter_id_ = first_id;
    last_parameter_id_ = last_id;
  }

 private:
  std::string name_;
  Tensor4 output_;
  int first_parameter_id_ = -1, last_parameter_id_ = -1;
};

// He-uniform values (limit sqrt(6 / fan_in)) for logical index i of parameter tensor `id`,
// so the draw never depends on how the tensor is stored.
float he_uniform(uint64_t seed, int tensor_id, uint64_t logical_index, int64_t fan_in);

}  // namespace dpbench
