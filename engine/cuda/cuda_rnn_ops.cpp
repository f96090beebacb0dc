// CudaBackend's fused LSTM: cuDNN's v8 RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8) on a plan cached per geometry (cudnn_rnn_plans.h). Workspace and
// reserve belong to the caller (sized by lstm_workspace_bytes / lstm_reserve_bytes); the plan owns
// only what the calls cannot be given: the device array of sequence lengths, buffers standing in
// for a missing dy or dx, and, where cuDNN's weight layout is not the canonical one, its own
// packed copy of the weights and their gradients; 16-bit data is read and written by cuDNN in its
// own type, its weight gradients passing through the plan's scratch (Note [16-bit fused LSTM] in
// cudnn_rnn_plans.h). Nothing here synchronises or allocates once a plan is ready, so the calls
// can be captured in a CUDA graph. Plans of the own_persistent algorithm go to dpbench's kernels
// instead (cuda_persistent_lstm.h).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_persistent_lstm.h"
#include "engine/cuda/cuda_rnn_controls.h"
#include "engine/cuda/cudnn_rnn_plans.h"
#include "engine/cuda/stream_timing.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

// Building a plan (or a buffer of one) allocates device memory, which a stream capture forbids;
// layers prepare their geometries at set-up, so getting here during a capture is a bug to name.
void refuse_inside_capture(cudaStream_t stream, const char* what) {
  if (stream_capturing(stream)) {
    throw RuntimeError(std::string("CudaBackend: ") + what +
                       " inside a CUDA graph capture; prepare the LSTM geometry first "
                       "(lstm_workspace_bytes) and run one step eagerly");
  }
}

void require_buffers(const RnnPlan& plan, const void* workspace, const void* reserve,
                     const char* op) {
  if ((plan.workspace_bytes > 0 && workspace == nullptr) ||
      (plan.reserve_bytes > 0 && reserve == nullptr)) {
    throw RuntimeError(std::string("CudaBackend::") + op +
                       ": workspace and reserve are required (lstm_workspace_bytes = " +
                       std::to_string(plan.workspace_bytes) + ", lstm_reserve_bytes = " +
                       std::to_string(plan.reserve_bytes) + ")");
  }
}

// The weights as cuDNN reads them: the caller's (zero copy), or packed into the plan's copy. Packed
// on every call: plans are shared by layers of one geometry, so the copy may hold another layer's.
// 16-bit weights not on a 16-byte boundary are packed too (Note [16-bit fused LSTM]); fp32 ones
// go as they are, as they always have.
const void* cudnn_weights(cudaStream_t stream, MemoryLedger& memory, RnnPlan& plan, const void* weights) {
  const DataType type = plan.geometry.type;
  if (plan.zero_copy &&
      (type == DataType::f32 || reinterpret_cast<uintptr_t>(weights) % 16 == 0)) {
    return weights;
  }
  if (plan.packed_weights.data() == nullptr) {
    refuse_inside_capture(stream, "preparing the packed copy of unaligned 16-bit LSTM weights");
    plan.packed_weights =
        DeviceMemory(plan.weight_space_bytes, memory, MemoryTag{MemoryCategory::workspaces, "cuDNN LSTM plans"});
    DPB_CUDA_CHECK(cudaMemsetAsync(plan.packed_weights.data(), 0, plan.weight_space_bytes, stream));
  }
  void* packed = plan.packed_weights.data();
  cuda_kernels::launch_pack_weights(stream, type, plan.blocks.as<cuda_kernels::WeightBlock>(),
                                    plan.block_count, plan.largest_block, weights, packed);
  return packed;
}

}  // namespace

RnnPlan& CudaBackend::rnn_plan(const RnnGeometry& g) {
  // 16-bit data is what tensor cores are for; fp32 keeps the backend's FMA or TF32 choice.
  const cudnnMathType_t math_type = g.type == DataType::f32 ? rnn_math_type_ : CUDNN_TENSOR_OP_MATH;
  // Timing candidates could choose differently from run to run: --deterministic and
  // --cudnn_benchmark=false keep the standard algorithm (Note [LSTM algorithm]).
  const int algorithm = lstm_algorithm_ != kChooseLstmAlgorithm ? lstm_algorithm_
                        : cudnn_benchmark_ && !deterministic_ ? kChooseLstmAlgorithm
                                                              : static_cast<int>(CUDNN_RNN_ALGO_STANDARD);
  const RnnKey key = rnn_key(g, math_type, lstm_always_repack_, algorithm);
  auto found = rnn_plans_->plans.find(key);
  if (found != rnn_plans_->plans.end()) return *found->second;
  refuse_inside_capture(stream_, "building an LSTM plan");
  std::unique_ptr<RnnPlan> plan;
  if (algorithm == kOwnPersistentLstmAlgorithm) {
    if (!persistent_lstm_supports(g))
      throw RuntimeError("--lstm_algorithm=own_persistent takes fp16 or bf16 data, one direction and 32, 64 or "
                         "128 hidden units, not a " + std::string(data_type_name(g.type)) + " LSTM of " +
                         std::to_string(g.hidden_size) + " units" + (g.bidirectional ? ", bidirectional" : "") +
                         "; use --lstm_algorithm=fastest or standard");
    plan = own_persistent_rnn_plan(g);
  } else if (algorithm == kChooseLstmAlgorithm) {
    std::optional<double> cudnn_ms;
    plan = fastest_rnn_plan(cudnn_, stream_, memory_, g, math_type, lstm_always_repack_, &cudnn_ms);
    // Note [LSTM algorithm]: dpbench's kernels compete where they take the shape.
    if (cudnn_ms && persistent_lstm_supports(g)) {
      const std::optional<double> own_ms = time_own_persistent_lstm(g);
      if (own_ms && *own_ms < *cudnn_ms) plan = own_persistent_rnn_plan(g);
    }
  } else {
    plan = build_rnn_plan(cudnn_, stream_, memory_, g, math_type, lstm_always_repack_,
                          static_cast<cudnnRNNAlgo_t>(algorithm));
  }
  RnnPlan& ready = *plan;
  rnn_plans_->plans.emplace(key, std::move(plan));
  ++rnn_plans_->created;
  return ready;
}

std::optional<double> CudaBackend::time_own_persistent_lstm(const RnnGeometry& g) {
  const size_t element = data_type_bytes(g.type);
  const MemoryTag timing{MemoryCategory::scratch, "LSTM algorithm timing"};
  // Within the device's memory limit, or untimed (Note [search memory] in device_memory.h).
  const uint64_t scratch_bytes = 2 * (g.input_count() + g.output_count()) * element +
                                 g.weight_count() * (element + sizeof(float)) + persistent_lstm_reserve_bytes(g) +
                                 persistent_lstm_workspace_bytes(g);
  if (scratch_bytes > memory_.room_for_transients()) return std::nullopt;
  DeviceMemory x(g.input_count() * element, memory_, timing), dx(g.input_count() * element, memory_, timing),
      y(g.output_count() * element, memory_, timing), dy(g.output_count() * element, memory_, timing),
      weights(g.weight_count() * element, memory_, timing), dweights(g.weight_count() * sizeof(float), memory_, timing),
      reserve(persistent_lstm_reserve_bytes(g), memory_, timing),
      workspace(persistent_lstm_workspace_bytes(g), memory_, timing);
  for (const DeviceMemory* buffer : {&x, &dy, &weights})
    DPB_CUDA_CHECK(cudaMemsetAsync(buffer->data(), 0, buffer->bytes(), stream_));
  const std::optional<double> ms = time_lstm_pass(stream_, [&] {
    persistent_lstm_forward(*this, g, x.data(), nullptr, nullptr, weights.data(), y.data(), nullptr, nullptr,
                            reserve.data(), workspace.data());
    persistent_lstm_backward_data(*this, g, dy.data(), nullptr, nullptr, weights.data(), dx.data(), nullptr,
                                  nullptr, reserve.data(), workspace.data());
    persistent_lstm_backward_weights(*this, g, x.data(), nullptr, y.data(), dweights.as<float>(), reserve.data(),
                                     workspace.data());
    return true;
  });
  // The scratch buffers go when this returns: nothing may still read them.
  DPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ms;
}

size_t CudaBackend::lstm_plans_created() const { return rnn_plans_->created; }

std::string CudaBackend::lstm_algorithm(const RnnGeometry& g) { return rnn_algorithm_name(rnn_plan(g)); }

bool CudaBackend::lstm_weights_zero_copy(const RnnGeometry& g) { return rnn_plan(g).zero_copy; }

size_t CudaBackend::lstm_workspace_bytes(const RnnGeometry& g) {
  return rnn_plan(g).workspace_bytes;
}

size_t CudaBackend::lstm_reserve_bytes(const RnnGeometry& g) { return rnn_plan(g).reserve_bytes; }

void CudaBackend::lstm_forward(const RnnGeometry& g, const void* x, const void* hx, const void* cx,
                               const void* weights, void* y, void* hy, void* cy, void* reserve,
                               void* workspace) {
  RnnPlan& plan = rnn_plan(g);
  if (plan.own_persistent)
    return persistent_lstm_forward(*this, g, x, hx, cx, weights, y, hy, cy, reserve, workspace);
  require_buffers(plan, workspace, reserve, "lstm_forward");
  const void* cudnn_w = cudnn_weights(stream_, memory_, plan, weights);
  // hx, cx == nullptr: zero initial state; hy, cy == nullptr: not written (cuDNN's own rules).
  DPB_CUDNN_CHECK(cudnnRNNForward(
      cudnn_, plan.rnn.get(), CUDNN_FWD_MODE_TRAINING, plan.sequence_lengths.as<int32_t>(),
      plan.x.get(), x, plan.y.get(), y, plan.state.get(), hx, hy, plan.state.get(), cx, cy,
      plan.weight_space_bytes, cudnn_w, plan.workspace_bytes, workspace, plan.reserve_bytes,
      reserve));
}

void CudaBackend::lstm_backward_data(const RnnGeometry& g, const void* y, const void* dy,
                                     const void* dhy, const void* dcy, const void* weights,
                                     const void* hx, const void* cx, void* dx, void* dhx,
                                     void* dcx, void* reserve, void* workspace) {
  RnnPlan& plan = rnn_plan(g);
  if (plan.own_persistent)
    return persistent_lstm_backward_data(*this, g, dy, dhy, dcy, weights, dx, dhx, dcx, reserve, workspace);
  require_buffers(plan, workspace, reserve, "lstm_backward_data");
  // cuDNN takes no nullptr for dy or dx: stand-ins of g.type (all-zero bytes are zeros in every
  // type), made once per plan on first need.
  const size_t element_bytes = data_type_bytes(g.type);
  if (dy == nullptr) {
    if (plan.zero_dy.data() == nullptr) {
      refuse_inside_capture(stream_, "preparing lstm_backward_data without dy");
      plan.zero_dy = DeviceMemory(g.output_count() * element_bytes, memory_,
                                  MemoryTag{MemoryCategory::workspaces, "cuDNN LSTM plans"});
      DPB_CUDA_CHECK(cudaMemsetAsync(plan.zero_dy.data(), 0, plan.zero_dy.bytes(), stream_));
    }
    dy = plan.zero_dy.data();
  }
  if (dx == nullptr) {
    if (plan.dx_scratch.data() == nullptr) {
      refuse_inside_capture(stream_, "preparing lstm_backward_data without dx");
      plan.dx_scratch = DeviceMemory(g.input_count() * element_bytes, memory_,
                                     MemoryTag{MemoryCategory::workspaces, "cuDNN LSTM plans"});
    }
    dx = plan.dx_scratch.data();
  }
  const void* cudnn_w = cudnn_weights(stream_, memory_, plan, weights);
  // hx, cx, dhy, dcy == nullptr: zeros; dhx, dcx == nullptr: not written.
  DPB_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      cudnn_, plan.rnn.get(), plan.sequence_lengths.as<int32_t>(), plan.y.get(), y, dy,
      plan.x.get(), dx, plan.state.get(), hx, dhy, dhx, plan.state.get(), cx, dcy, dcx,
      plan.weight_space_bytes, cudnn_w, plan.workspace_bytes, workspace, plan.reserve_bytes,
      reserve));
}

// In 16-bit cuDNN writes 16-bit weight gradients: into the plan's scratch, whose values are then
// widened and added to the fp32 dweights.
void CudaBackend::lstm_backward_weights(const RnnGeometry& g, const void* x, const void* hx,
                                        const void* y, float* dweights, void* reserve,
                                        void* workspace) {
  RnnPlan& plan = rnn_plan(g);
  if (plan.own_persistent)
    return persistent_lstm_backward_weights(*this, g, x, hx, y, dweights, reserve, workspace);
  require_buffers(plan, workspace, reserve, "lstm_backward_weights");
  // CUDNN_WGRAD_MODE_ADD adds into the weight gradients: the op's contract. Through the scratch,
  // cuDNN adds to zeros and the kernel after it adds the sum (widened from 16-bit) to dweights.
  void* cudnn_dw = dweights;
  if (plan.gradients_through_scratch) {
    cudnn_dw = plan.packed_dweights.data();
    DPB_CUDA_CHECK(cudaMemsetAsync(cudnn_dw, 0, plan.weight_space_bytes, stream_));
  }
  DPB_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
      cudnn_, plan.rnn.get(), CUDNN_WGRAD_MODE_ADD, plan.sequence_lengths.as<int32_t>(),
      plan.x.get(), x, plan.state.get(), hx, plan.y.get(), y, plan.weight_space_bytes, cudnn_dw,
      plan.workspace_bytes, workspace, plan.reserve_bytes, reserve));
  if (plan.gradients_through_scratch) {
    cuda_kernels::launch_add_unpacked_weights(stream_, g.type,
                                              plan.blocks.as<cuda_kernels::WeightBlock>(),
                                              plan.block_count, plan.largest_block, cudnn_dw,
                                              dweights);
  }
}

size_t lstm_plans_created(const Backend& backend) {
  const auto* cuda_backend = dynamic_cast<const CudaBackend*>(&backend.implementation());
  if (cuda_backend == nullptr) throw RuntimeError("lstm_plans_created: not a CUDA backend");
  return cuda_backend->lstm_plans_created();
}

bool lstm_weights_zero_copy(Backend& backend, const RnnGeometry& g) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend.implementation());
  if (cuda_backend == nullptr) throw RuntimeError("lstm_weights_zero_copy: not a CUDA backend");
  return cuda_backend->lstm_weights_zero_copy(g);
}

std::string lstm_algorithm(Backend& backend, const RnnGeometry& g) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend.implementation());
  if (cuda_backend == nullptr) throw RuntimeError("lstm_algorithm: not a CUDA backend");
  return cuda_backend->lstm_algorithm(g);
}

void set_lstm_algorithm(Backend& backend, const std::string& name) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend.implementation());
  if (cuda_backend == nullptr) throw RuntimeError("set_lstm_algorithm: not a CUDA backend");
  cuda_backend->set_lstm_algorithm(rnn_algorithm_from_name(name));
}

void set_lstm_always_repack(Backend& backend, bool always) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend.implementation());
  if (cuda_backend == nullptr) throw RuntimeError("set_lstm_always_repack: not a CUDA backend");
  cuda_backend->set_lstm_always_repack(always);
}

}  // namespace dpbench
