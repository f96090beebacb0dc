// Kernels of the unrolled LSTM's time step (forward and backward, every buffer fp32, fp16 or bf16
// with fp32 arithmetic inside) and the repacking of fused-LSTM weights between the canonical layout
// and cuDNN's weight space (where the two differ, and to add cuDNN's 16-bit weight gradients into
// the fp32 gradient). Kernels first, launchers after; nothing allocates or synchronises, so every
// launcher can be captured in a CUDA graph.
#include <algorithm>
#include <cstdint>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

// ---- LSTM cell -------------------------------------------------------------------------------
// W consecutive hidden units of one sample, widened to fp32: 1, or a 16-byte pack (4 fp32 or 8
// 16-bit values) moved by one access.
template <int W>
struct Lanes {
  float v[W];
};

template <int W, typename T>
__device__ __forceinline__ Lanes<W> load_lanes(const T* p) {
  const Pack<T, W> pack = load_pack<W>(p);
  Lanes<W> out;
#pragma unroll
  for (int e = 0; e < W; ++e) out.v[e] = element(pack, e);
  return out;
}

template <int W, typename T>
__device__ __forceinline__ Lanes<W> load_lanes_or_zero(const T* p) {
  if (p != nullptr) return load_lanes<W>(p);
  Lanes<W> zero;
#pragma unroll
  for (int e = 0; e < W; ++e) zero.v[e] = 0.0f;
  return zero;
}

// Rounded to T once, here.
template <int W, typename T>
__device__ __forceinline__ void store_lanes(T* p, const Lanes<W>& in) {
  store_pack<W>(p, round_pack<T, W>(in.v));
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// gates (B, 4H): pre-activations in, activations out (gate order i, f, g, o); bias_input,
// bias_recurrent (4H); c_prev (B, H) or nullptr; c, h (B, H); all of T. One thread per (b, W
// hidden units); c and h come from the fp32 activations, not from their rounded copies.
template <typename T, int W>
__global__ void lstm_cell_forward_kernel(int batch, int hidden, T* gates, const T* bias_input,
                                         const T* bias_recurrent, const T* c_prev, T* c, T* h) {
  const int groups = hidden / W;
  DPB_GRID_STRIDE_LOOP(item, static_cast<size_t>(batch) * groups) {
    const size_t b = item / groups;
    const int j = static_cast<int>(item % groups) * W;
    T* row = gates + b * 4 * hidden;  // (4H) of sample b
    const size_t state = b * hidden + j;
    Lanes<W> gate[4];
    for (int k = 0; k < 4; ++k) {
      gate[k] = load_lanes<W>(row + k * hidden + j);
      const Lanes<W> bw = load_lanes<W>(bias_input + k * hidden + j);
      const Lanes<W> br = load_lanes<W>(bias_recurrent + k * hidden + j);
      for (int e = 0; e < W; ++e) gate[k].v[e] = (gate[k].v[e] + bw.v[e]) + br.v[e];
    }
    const Lanes<W> cp = load_lanes_or_zero<W>(c_prev != nullptr ? c_prev + state : nullptr);
    Lanes<W> c_new, h_new;
    for (int e = 0; e < W; ++e) {
      const float i = sigmoid(gate[0].v[e]);
      const float f = sigmoid(gate[1].v[e]);
      const float g = tanhf(gate[2].v[e]);
      const float o = sigmoid(gate[3].v[e]);
      gate[0].v[e] = i;
      gate[1].v[e] = f;
      gate[2].v[e] = g;
      gate[3].v[e] = o;
      c_new.v[e] = f * cp.v[e] + i * g;
      h_new.v[e] = o * tanhf(c_new.v[e]);
    }
    for (int k = 0; k < 4; ++k) store_lanes<W>(row + k * hidden + j, gate[k]);
    store_lanes<W>(c + state, c_new);
    store_lanes<W>(h + state, h_new);
  }
}

// From the activations in gates (B, 4H), c_prev (or nullptr), c, dh and dc (or nullptr), all
// (B, H) and of T: dgates (B, 4H; may alias gates) and dc_prev (B, H; may alias dc; or nullptr).
// Every thread loads all it needs before it stores, so the aliases are safe.
template <typename T, int W>
__global__ void lstm_cell_backward_kernel(int batch, int hidden, const T* gates, const T* c_prev,
                                          const T* c, const T* dh, const T* dc, T* dgates,
                                          T* dc_prev) {
  const int groups = hidden / W;
  DPB_GRID_STRIDE_LOOP(item, static_cast<size_t>(batch) * groups) {
    const size_t b = item / groups;
    const int j = static_cast<int>(item % groups) * W;
    const T* row = gates + b * 4 * hidden;  // (4H) activations of sample b
    T* drow = dgates + b * 4 * hidden;      // (4H)
    const size_t state = b * hidden + j;
    Lanes<W> gate[4];
    for (int k = 0; k < 4; ++k) gate[k] = load_lanes<W>(row + k * hidden + j);
    const Lanes<W> cp = load_lanes_or_zero<W>(c_prev != nullptr ? c_prev + state : nullptr);
    const Lanes<W> cc = load_lanes<W>(c + state);
    const Lanes<W> dhh = load_lanes<W>(dh + state);
    const Lanes<W> dcc = load_lanes_or_zero<W>(dc != nullptr ? dc + state : nullptr);
    Lanes<W> dgate[4], dcp;
    for (int e = 0; e < W; ++e) {
      const float i = gate[0].v[e], f = gate[1].v[e], g = gate[2].v[e], o = gate[3].v[e];
      const float tanh_c = tanhf(cc.v[e]);
      // h = o tanh(c): the cell's gradient is the carried dc plus what flows back through h.
      const float dc_total = dcc.v[e] + dhh.v[e] * o * (1.0f - tanh_c * tanh_c);
      dgate[0].v[e] = dc_total * g * i * (1.0f - i);      // sigmoid' = s (1 - s)
      dgate[1].v[e] = dc_total * cp.v[e] * f * (1.0f - f);
      dgate[2].v[e] = dc_total * i * (1.0f - g * g);      // tanh' = 1 - t^2
      dgate[3].v[e] = dhh.v[e] * tanh_c * o * (1.0f - o);
      dcp.v[e] = dc_total * f;
    }
    for (int k = 0; k < 4; ++k) store_lanes<W>(drow + k * hidden + j, dgate[k]);
    if (dc_prev != nullptr) store_lanes<W>(dc_prev + state, dcp);
  }
}

// ---- LSTM weight repacking (where cuDNN's layout differs from the canonical one, and for the
// 16-bit weight gradients cuDNN writes) ---------------------------------------------------------
// blockIdx.y picks a block of the table, blockIdx.x and the threads stride over its elements.
// A copy keeps the type (From = To); kAccumulate widens From into the fp32 `to` and adds.
template <typename From, typename To, bool kAccumulate>
__global__ void copy_weight_blocks_kernel(const WeightBlock* blocks, const From* from, To* to,
                                          bool to_packed) {
  const WeightBlock block = blocks[blockIdx.y];
  const size_t source = to_packed ? block.canonical : block.packed;
  const size_t target = to_packed ? block.packed : block.canonical;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < block.count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if constexpr (kAccumulate) {
      to[target + i] += load_widened(from + source + i);
    } else {
      to[target + i] = from[source + i];
    }
  }
}

}  // namespace

void launch_lstm_cell_forward(cudaStream_t stream, DataType type, int batch, int hidden,
                              void* gates, const void* bias_input, const void* bias_recurrent,
                              const void* c_prev, void* c, void* h) {
  if (batch <= 0 || hidden <= 0) return;
  with_storage_type(type, "lstm_cell_forward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kWide = static_cast<int>(16 / sizeof(T));
    // nullptr (c_prev) counts as aligned: it is never dereferenced.
    const bool vectorise = hidden % kWide == 0 &&
                           aligned_to({gates, bias_input, bias_recurrent, c_prev, c, h}, 16);
    const size_t items = static_cast<size_t>(batch) * hidden / (vectorise ? kWide : 1);
    T* gates_typed = static_cast<T*>(gates);
    const T* bias_input_typed = static_cast<const T*>(bias_input);
    const T* bias_recurrent_typed = static_cast<const T*>(bias_recurrent);
    const T* c_prev_typed = static_cast<const T*>(c_prev);
    if (vectorise) {
      lstm_cell_forward_kernel<T, kWide><<<grid_for(items), kBlockSize, 0, stream>>>(
          batch, hidden, gates_typed, bias_input_typed, bias_recurrent_typed, c_prev_typed,
          static_cast<T*>(c), static_cast<T*>(h));
    } else {
      lstm_cell_forward_kernel<T, 1><<<grid_for(items), kBlockSize, 0, stream>>>(
          batch, hidden, gates_typed, bias_input_typed, bias_recurrent_typed, c_prev_typed,
          static_cast<T*>(c), static_cast<T*>(h));
    }
  });
  DPB_CUDA_CHECK_LAUNCH(lstm_cell_forward_kernel);
}

void launch_lstm_cell_backward(cudaStream_t stream, DataType type, int batch, int hidden,
                               const void* gates, const void* c_prev, const void* c,
                               const void* dh, const void* dc, void* dgates, void* dc_prev) {
  if (batch <= 0 || hidden <= 0) return;
  with_storage_type(type, "lstm_cell_backward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kWide = static_cast<int>(16 / sizeof(T));
    // nullptr counts as aligned: it is never dereferenced.
    const bool vectorise = hidden % kWide == 0 &&
                           aligned_to({gates, c_prev, c, dh, dc, dgates, dc_prev}, 16);
    const size_t items = static_cast<size_t>(batch) * hidden / (vectorise ? kWide : 1);
    const T* gates_typed = static_cast<const T*>(gates);
    const T* c_prev_typed = static_cast<const T*>(c_prev);
    const T* c_typed = static_cast<const T*>(c);
    const T* dh_typed = static_cast<const T*>(dh);
    const T* dc_typed = static_cast<const T*>(dc);
    if (vectorise) {
      lstm_cell_backward_kernel<T, kWide><<<grid_for(items), kBlockSize, 0, stream>>>(
          batch, hidden, gates_typed, c_prev_typed, c_typed, dh_typed, dc_typed,
          static_cast<T*>(dgates), static_cast<T*>(dc_prev));
    } else {
      lstm_cell_backward_kernel<T, 1><<<grid_for(items), kBlockSize, 0, stream>>>(
          batch, hidden, gates_typed, c_prev_typed, c_typed, dh_typed, dc_typed,
          static_cast<T*>(dgates), static_cast<T*>(dc_prev));
    }
  });
  DPB_CUDA_CHECK_LAUNCH(lstm_cell_backward_kernel);
}

namespace {

template <typename From, typename To, bool kAccumulate>
void launch_copy_weight_blocks(cudaStream_t stream, const WeightBlock* blocks, int block_count,
                               size_t max_count, const From* from, To* to, bool to_packed) {
  if (block_count <= 0 || max_count == 0) return;
  // A few blocks per weight block is plenty: this runs once per call on a few dozen blocks.
  const dim3 grid(std::min<unsigned>(grid_for(max_count), 64u), static_cast<unsigned>(block_count));
  copy_weight_blocks_kernel<From, To, kAccumulate><<<grid, kBlockSize, 0, stream>>>(blocks, from,
                                                                                    to, to_packed);
  DPB_CUDA_CHECK_LAUNCH(copy_weight_blocks_kernel);
}

}  // namespace

void launch_pack_weights(cudaStream_t stream, DataType type, const WeightBlock* blocks,
                         int block_count, size_t max_count, const void* canonical, void* packed) {
  with_storage_type(type, "pack_weights", [&](auto tag) {
    using T = decltype(tag);
    launch_copy_weight_blocks<T, T, false>(stream, blocks, block_count, max_count,
                                           static_cast<const T*>(canonical),
                                           static_cast<T*>(packed), true);
  });
}

void launch_add_unpacked_weights(cudaStream_t stream, DataType packed_type,
                                 const WeightBlock* blocks, int block_count, size_t max_count,
                                 const void* packed, float* canonical) {
  with_storage_type(packed_type, "add_unpacked_weights", [&](auto tag) {
    using T = decltype(tag);
    launch_copy_weight_blocks<T, float, true>(stream, blocks, block_count, max_count,
                                              static_cast<const T*>(packed), canonical, false);
  });
}

}  // namespace dpbench::cuda_kernels
