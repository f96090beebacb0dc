// Set-up of the fused LSTM's cuDNN plans (see cudnn_rnn_plans.h): descriptors, sizes, and the map
// from the canonical weight layout to cuDNN's weight space, which decides between handing cuDNN
// the caller's weights as they are (zero copy) and repacking them through the plan's own copy.
#include "engine/cuda/cudnn_rnn_plans.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_persistent_lstm.h"
#include "engine/cuda/cudnn_plans.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

std::string describe(const RnnGeometry& g) {
  return std::string(data_type_name(g.type)) + " LSTM T=" + std::to_string(g.seq_len) +
         " B=" + std::to_string(g.batch) + " in=" + std::to_string(g.input_size) +
         " H=" + std::to_string(g.hidden_size) + " layers=" + std::to_string(g.num_layers) +
         (g.bidirectional ? " bidirectional" : "");
}

// cudnnGetVersion's number (major * 10000 + minor * 100 + patch since cuDNN 9) as 9.14.0.
std::string cudnn_version_text() {
  const size_t version = cudnnGetVersion();
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

// The check of the set-up calls that a cuDNN without bf16 RNNs refuses: for bf16, that is what a
// refusal means, and the message says what to do instead; anything else is reported as
// DPB_CUDNN_CHECK reports it.
void check_rnn_setup(cudnnStatus_t status, const RnnGeometry& g, const char* call, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  if (g.type == DataType::bf16) {
    throw RuntimeError("cuDNN " + cudnn_version_text() +
                       " has no bf16 LSTM (needs 9.13 or later); use --precision=fp16 or "
                       "--encoder_type=dynamic (" + call + " refused " + describe(g) + ": " +
                       cudnnGetErrorString(status) + ")");
  }
  cuda_detail::throw_library_error("cuDNN", call, static_cast<int>(status),
                                   cudnnGetErrorString(status), __FILE__, line);
}

size_t tensor_elements(const CudnnTensorDescriptor& descriptor) {
  cudnnDataType_t type;
  int dims = 0;
  int sizes[8] = {}, strides[8] = {};
  DPB_CUDNN_CHECK(cudnnGetTensorNdDescriptor(descriptor.get(), 8, &type, &dims, sizes, strides));
  size_t count = 1;
  for (int d = 0; d < dims; ++d) count *= static_cast<size_t>(sizes[d]);
  return count;
}

// Where cuDNN keeps each of the 16 parts of every pseudo-layer (8 gate matrices, 8 gate biases),
// next to where the canonical layout keeps them. Asked with a real weight space as the base:
// cuDNN answers with addresses inside it.
struct WeightMap {
  std::vector<cuda_kernels::WeightBlock> blocks;
  bool identical = true;  // every part at its canonical offset
};

WeightMap map_weights(cudnnHandle_t handle, const RnnPlan& plan, const void* weight_space) {
  const RnnGeometry& g = plan.geometry;
  const size_t hidden = static_cast<size_t>(g.hidden_size);
  // Offsets are counted in elements of the weights' type, as the canonical layout counts them.
  const size_t element_bytes = data_type_bytes(g.type);
  const size_t space_elements = plan.weight_space_bytes / element_bytes;
  const char* base = static_cast<const char*>(weight_space);
  CudnnTensorDescriptor matrix, bias;
  WeightMap map;

  auto add = [&](const void* address, const CudnnTensorDescriptor& descriptor, size_t canonical,
                 size_t count, int pseudo_layer, int lin_layer, const char* part) {
    const std::string where = std::string(part) + " of pseudo-layer " +
                              std::to_string(pseudo_layer) + ", linLayerID " +
                              std::to_string(lin_layer) + " of " + describe(g);
    if (address == nullptr) throw RuntimeError("cuDNN reports no " + where);
    if (tensor_elements(descriptor) != count) {
      throw RuntimeError("cuDNN's " + where + " holds " + std::to_string(tensor_elements(descriptor)) +
                         " elements, the canonical layout " + std::to_string(count));
    }
    const size_t offset_bytes = static_cast<size_t>(static_cast<const char*>(address) - base);
    const size_t packed = offset_bytes / element_bytes;
    if (offset_bytes % element_bytes != 0 || packed + count > space_elements) {
      throw RuntimeError("cuDNN's " + where + " lies outside its weight space");
    }
    map.identical = map.identical && packed == canonical;
    map.blocks.push_back(cuda_kernels::WeightBlock{canonical, packed, count});
  };

  for (int pseudo_layer = 0; pseudo_layer < g.pseudo_layers(); ++pseudo_layer) {
    const int layer = pseudo_layer / g.directions();
    const int direction = pseudo_layer % g.directions();
    // linLayerID 0-3: W (input) of gates i, f, g, o with bias bW; 4-7: R (recurrent) with bR.
    for (int lin_layer = 0; lin_layer < 8; ++lin_layer) {
      const bool recurrent = lin_layer >= 4;
      const size_t gate = static_cast<size_t>(lin_layer % 4);
      const size_t columns = recurrent ? hidden : static_cast<size_t>(g.layer_input_size(layer));
      const size_t matrix_offset = (recurrent ? g.recurrent_weights_offset(layer, direction)
                                              : g.input_weights_offset(layer, direction)) +
                                   gate * hidden * columns;
      const size_t bias_offset = (recurrent ? g.recurrent_bias_offset(layer, direction)
                                            : g.input_bias_offset(layer, direction)) +
                                 gate * hidden;
      void* matrix_address = nullptr;
      void* bias_address = nullptr;
      DPB_CUDNN_CHECK(cudnnGetRNNWeightParams(handle, plan.rnn.get(), pseudo_layer,
                                              plan.weight_space_bytes, weight_space, lin_layer,
                                              matrix.get(), &matrix_address, bias.get(),
                                              &bias_address));
      add(matrix_address, matrix, matrix_offset, hidden * columns, pseudo_layer, lin_layer,
          "matrix");
      add(bias_address, bias, bias_offset, hidden, pseudo_layer, lin_layer, "bias");
    }
  }
  return map;
}

}  // namespace

RnnKey rnn_key(const RnnGeometry& g, cudnnMathType_t math_type, bool always_repack, int algorithm) {
  return {g.seq_len,    g.batch,         g.input_size,
          g.hidden_size, g.num_layers,   g.bidirectional,
          static_cast<int>(g.type),     static_cast<int>(math_type),
          always_repack, algorithm};
}

std::unique_ptr<RnnPlan> build_rnn_plan(cudnnHandle_t handle, cudaStream_t stream, MemoryLedger& memory,
                                        const RnnGeometry& g, cudnnMathType_t math_type,
                                        bool always_repack, cudnnRNNAlgo_t algorithm) {
  if (g.seq_len <= 0 || g.batch <= 0 || g.input_size <= 0 || g.hidden_size <= 0 ||
      g.num_layers <= 0) {
    throw RuntimeError("invalid geometry: " + describe(g));
  }
  auto plan = std::make_unique<RnnPlan>();
  plan->geometry = g;
  plan->math_type = math_type;
  plan->algorithm = algorithm;

  const cudnnDataType_t data_type = cudnn_data_type(g.type);  // of x, y, states and weights

  // Rate 0 needs no random-number states (and cuDNN sets nothing up for it).
  DPB_CUDNN_CHECK(cudnnSetDropoutDescriptor(plan->dropout.get(), handle, 0.0f, nullptr, 0, 0));
  // projSize = hiddenSize: no projection. Double bias: bW and bR, as the canonical layout has.
  // The math precision is fp32 whatever the data type (16-bit data: fp32 accumulation).
  check_rnn_setup(cudnnSetRNNDescriptor_v8(
                      plan->rnn.get(), algorithm, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                      g.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                      CUDNN_LINEAR_INPUT, data_type, CUDNN_DATA_FLOAT, math_type, g.input_size,
                      g.hidden_size, g.hidden_size, g.num_layers, plan->dropout.get(),
                      CUDNN_RNN_PADDED_IO_DISABLED),
                  g, "cudnnSetRNNDescriptor_v8", __LINE__);

  // Every sequence has the full length, so the packed sequence-major layout is exactly the
  // dense (T, B, features) array.
  const std::vector<int> lengths(static_cast<size_t>(g.batch), g.seq_len);
  check_rnn_setup(cudnnSetRNNDataDescriptor(plan->x.get(), data_type,
                                            CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, g.seq_len,
                                            g.batch, g.input_size, lengths.data(), nullptr),
                  g, "cudnnSetRNNDataDescriptor (x)", __LINE__);
  check_rnn_setup(cudnnSetRNNDataDescriptor(plan->y.get(), data_type,
                                            CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, g.seq_len,
                                            g.batch, g.output_size(), lengths.data(), nullptr),
                  g, "cudnnSetRNNDataDescriptor (y)", __LINE__);
  const int state_sizes[3] = {g.pseudo_layers(), g.batch, g.hidden_size};
  const int state_strides[3] = {g.batch * g.hidden_size, g.hidden_size, 1};
  DPB_CUDNN_CHECK(cudnnSetTensorNdDescriptor(plan->state.get(), data_type, 3, state_sizes,
                                             state_strides));

  check_rnn_setup(cudnnGetRNNTempSpaceSizes(handle, plan->rnn.get(), CUDNN_FWD_MODE_TRAINING,
                                            plan->x.get(), &plan->workspace_bytes,
                                            &plan->reserve_bytes),
                  g, "cudnnGetRNNTempSpaceSizes", __LINE__);
  DPB_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, plan->rnn.get(), &plan->weight_space_bytes));

  const MemoryTag plans{MemoryCategory::workspaces, "cuDNN LSTM plans"};
  plan->sequence_lengths = DeviceMemory(lengths.size() * sizeof(int32_t), memory, plans);
  DPB_CUDA_CHECK(cudaMemcpyAsync(plan->sequence_lengths.data(), lengths.data(),
                                 lengths.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));

  DeviceMemory weight_space(plan->weight_space_bytes, memory, plans);
  const WeightMap map = map_weights(handle, *plan, weight_space.data());
  plan->zero_copy = !always_repack && map.identical &&
                    plan->weight_space_bytes == g.weight_count() * data_type_bytes(g.type);
  plan->gradients_through_scratch = !plan->zero_copy || g.type != DataType::f32;
  if (!plan->zero_copy) {
    // cuDNN's own layout: the probe becomes the packed weights, zeroed so that any padding
    // cuDNN leaves between parts holds zeros rather than garbage.
    plan->packed_weights = std::move(weight_space);
    DPB_CUDA_CHECK(cudaMemsetAsync(plan->packed_weights.data(), 0, plan->weight_space_bytes, stream));
  }
  if (plan->gradients_through_scratch) {
    plan->packed_dweights = DeviceMemory(plan->weight_space_bytes, memory, plans);
    plan->block_count = static_cast<int>(map.blocks.size());
    for (const cuda_kernels::WeightBlock& block : map.blocks) {
      plan->largest_block = std::max(plan->largest_block, block.count);
    }
    const size_t table_bytes = map.blocks.size() * sizeof(cuda_kernels::WeightBlock);
    plan->blocks = DeviceMemory(table_bytes, memory, plans);
    DPB_CUDA_CHECK(cudaMemcpyAsync(plan->blocks.data(), map.blocks.data(), table_bytes,
                                   cudaMemcpyHostToDevice, stream));
  }
  // The host vectors above are about to go: the uploads must have finished reading them.
  DPB_CUDA_CHECK(cudaStreamSynchronize(stream));
  return plan;
}

const char* rnn_algorithm_name(const RnnPlan& plan) {
  if (plan.own_persistent) return "own_persistent";
  switch (plan.algorithm) {
    case CUDNN_RNN_ALGO_PERSIST_STATIC: return "persist_static";
    case CUDNN_RNN_ALGO_PERSIST_DYNAMIC: return "persist_dynamic";
    case CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H: return "persist_static_small_h";
    default: return "standard";
  }
}

int rnn_algorithm_from_name(const std::string& name) {
  if (name == "fastest") return kChooseLstmAlgorithm;
  if (name == "standard") return CUDNN_RNN_ALGO_STANDARD;
  if (name == "persist_static") return CUDNN_RNN_ALGO_PERSIST_STATIC;
  if (name == "persist_static_small_h") return CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H;
  if (name == "own_persistent") return kOwnPersistentLstmAlgorithm;
  throw RuntimeError("unknown LSTM algorithm '" + name +
                     "'; accepted: fastest, standard, persist_static, persist_static_small_h, own_persistent");
}

std::unique_ptr<RnnPlan> own_persistent_rnn_plan(const RnnGeometry& g) {
  auto plan = std::make_unique<RnnPlan>();
  plan->geometry = g;
  plan->own_persistent = true;
  plan->zero_copy = true;
  plan->workspace_bytes = persistent_lstm_workspace_bytes(g);
  plan->reserve_bytes = persistent_lstm_reserve_bytes(g);
  return plan;
}

std::optional<double> time_lstm_pass(cudaStream_t stream, const std::function<bool()>& pass) {
  if (!pass()) return std::nullopt;
  cudaEvent_t start, stop;
  DPB_CUDA_CHECK(cudaEventCreate(&start));
  DPB_CUDA_CHECK(cudaEventCreate(&stop));
  double best = std::numeric_limits<double>::infinity();
  bool ran = true;
  for (int round = 0; round < 3 && ran; ++round) {
    DPB_CUDA_CHECK(cudaEventRecord(start, stream));
    ran = pass();
    DPB_CUDA_CHECK(cudaEventRecord(stop, stream));
    DPB_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    DPB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, static_cast<double>(ms));
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  // A refusal inside the timed passes leaves nothing queued to wait for; clear any error it set.
  (void)cudaGetLastError();
  if (!ran) return std::nullopt;
  return best;
}

namespace {

// Milliseconds of one training pass of `plan` (forward, backward data, backward weights) on
// zeroed scratch buffers, the best of three after a warm-up; nullopt when cuDNN refuses to run it.
std::optional<double> time_rnn_plan(cudnnHandle_t handle, cudaStream_t stream, MemoryLedger& memory,
                                    const RnnPlan& plan) {
  const RnnGeometry& g = plan.geometry;
  const size_t element = data_type_bytes(g.type);
  const MemoryTag timing{MemoryCategory::scratch, "LSTM algorithm timing"};
  // Within the device's memory limit, or untimed (Note [search memory] in device_memory.h).
  const uint64_t scratch_bytes = 2 * (g.input_count() + g.output_count()) * element + 2 * plan.weight_space_bytes +
                                 std::max<size_t>(plan.reserve_bytes, 16) + std::max<size_t>(plan.workspace_bytes, 16);
  if (scratch_bytes > memory.room_for_transients()) return std::nullopt;
  DeviceMemory x(g.input_count() * element, memory, timing), dx(g.input_count() * element, memory, timing),
      y(g.output_count() * element, memory, timing), dy(g.output_count() * element, memory, timing),
      weights(plan.weight_space_bytes, memory, timing), dweights(plan.weight_space_bytes, memory, timing),
      reserve(std::max<size_t>(plan.reserve_bytes, 16), memory, timing),
      workspace(std::max<size_t>(plan.workspace_bytes, 16), memory, timing);
  for (const DeviceMemory* buffer : {&x, &dy, &weights})
    DPB_CUDA_CHECK(cudaMemsetAsync(buffer->data(), 0, buffer->bytes(), stream));
  auto pass = [&]() {
    const int32_t* lengths = plan.sequence_lengths.as<int32_t>();
    cudnnStatus_t status = cudnnRNNForward(
        handle, plan.rnn.get(), CUDNN_FWD_MODE_TRAINING, lengths, plan.x.get(), x.data(), plan.y.get(),
        y.data(), plan.state.get(), nullptr, nullptr, plan.state.get(), nullptr, nullptr,
        plan.weight_space_bytes, weights.data(), plan.workspace_bytes, workspace.data(), plan.reserve_bytes,
        reserve.data());
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnRNNBackwardData_v8(handle, plan.rnn.get(), lengths, plan.y.get(), y.data(), dy.data(),
                                       plan.x.get(), dx.data(), plan.state.get(), nullptr, nullptr, nullptr,
                                       plan.state.get(), nullptr, nullptr, nullptr, plan.weight_space_bytes,
                                       weights.data(), plan.workspace_bytes, workspace.data(),
                                       plan.reserve_bytes, reserve.data());
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnRNNBackwardWeights_v8(handle, plan.rnn.get(), CUDNN_WGRAD_MODE_ADD, lengths, plan.x.get(),
                                          x.data(), plan.state.get(), nullptr, plan.y.get(), y.data(),
                                          plan.weight_space_bytes, dweights.data(), plan.workspace_bytes,
                                          workspace.data(), plan.reserve_bytes, reserve.data());
    return status == CUDNN_STATUS_SUCCESS;
  };
  return time_lstm_pass(stream, pass);
}

}  // namespace

std::unique_ptr<RnnPlan> fastest_rnn_plan(cudnnHandle_t handle, cudaStream_t stream, MemoryLedger& memory,
                                          const RnnGeometry& g, cudnnMathType_t math_type,
                                          bool always_repack, std::optional<double>* best_ms_out) {
  std::unique_ptr<RnnPlan> best = build_rnn_plan(handle, stream, memory, g, math_type, always_repack);
  if (best_ms_out != nullptr) best_ms_out->reset();
  if (g.type == DataType::f32) return best;  // Note [LSTM algorithm]: timed alone, misleads
  std::optional<double> best_ms = time_rnn_plan(handle, stream, memory, *best);
  if (!best_ms) return best;  // STANDARD itself would not run here: let the real call report it
  for (const cudnnRNNAlgo_t algorithm : {CUDNN_RNN_ALGO_PERSIST_STATIC, CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H}) {
    std::unique_ptr<RnnPlan> candidate;
    try {
      candidate = build_rnn_plan(handle, stream, memory, g, math_type, always_repack, algorithm);
    } catch (const std::exception&) {
      continue;  // cuDNN does not offer this algorithm for the shape or type
    }
    const std::optional<double> ms = time_rnn_plan(handle, stream, memory, *candidate);
    if (ms && *ms < *best_ms) {
      best_ms = ms;
      best = std::move(candidate);
    }
  }
  if (best_ms_out != nullptr) *best_ms_out = best_ms;
  return best;
}

}  // namespace dpbench
