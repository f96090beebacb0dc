// dpbench's persistent LSTM recurrence for 16-bit data and small hidden sizes (Note [persistent
// LSTM]): one kernel runs a layer's whole sequence, forward or backward, with the recurrent
// weights held in shared memory from the first step to the last. The input projections and the
// weight gradients are GEMMs around it (cuda_persistent_lstm.cpp). Nothing allocates or
// synchronises the host, so the launchers can be captured in a CUDA graph.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

namespace wmma = nvcuda::wmma;

// Note [persistent LSTM]
// For 128 hidden units one time step is a (B x 128) x (128 x 512) product and a few elementwise
// operations: cuDNN's standard algorithm spends a step on launches and on reading the recurrent
// weights back from L2, and cuDNN (9.14) has no persistent kernel for bf16. The rows of a batch
// do not interact, so a block takes kRows samples for the whole sequence and needs nothing from
// any other block: no grid-wide barrier, only two block barriers per step. Per block:
//   shared memory: R (4H x H) in the data type, rows padded by 8 elements (16 bytes) so that the
//   tensor-core loads of 16 consecutive rows fall in distinct banks; the step's 16 x 4H gate
//   pre-activations (forward, fp32) or 16 x 4H gate gradients (backward, 16-bit); the 16 x H
//   hidden state (forward, 16-bit) or its recurrent gradient (backward, fp32).
//   registers: each thread owns H / 16 cells (one hidden unit u of rows r0, r0 + 256 / H, ...)
//   for the whole sequence: their c (forward) or dc (backward) never leave the thread, and their
//   loads for a step (input projections; or activations, c_t, c_{t-1} and dh) are issued a step
//   ahead, all cells at once, so they arrive while the step before runs. Loaded one cell at a
//   time after the previous cell's stores, the backward step waited out 8 loads in turn: 9.9 us
//   a step (rnnlm bf16, batch 512, one H200), 0.99 ms of the step for two layers.
// Forward step t: pre = h_{t-1} R^T on tensor cores (warp w: gate columns [w G/8, (w+1) G/8)),
// then each cell adds x_t W^T (precomputed, fp32), bW and bR, takes its four gates, updates c in
// fp32, and writes h (rounded: the next step's product reads the 16-bit h, as cuDNN's 16-bit
// data does), the activations and c (fp32) for the backward pass.
// Backward step t: each cell's dh = dh_in_t + (dgates_{t+1} R)[cell], its gate gradients
// (rounded once, written over the activations they came from) and dc_{t-1}; then dgates_t R on
// tensor cores (warp w: hidden columns [16 w, 16 w + 16), four independent accumulators over
// the 4H-long sum) gives step t - 1's recurrent dh, or dhx after t = 0.
// The gates use tanh.approx (sigmoid(x) = (1 + tanh(x / 2)) / 2): relative error ~2^-11,
// under the 16-bit rounding of everything stored (2^-8 for bf16, 2^-11 for fp16).
constexpr int kRows = 16;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <int H>
struct PersistentShape {
  static_assert(H == 32 || H == 64 || H == 128, "hidden sizes of 32, 64 or 128 units");
  static constexpr int kGates = 4 * H;
  static constexpr int kLdWeights = H + 8;       // R rows in shared memory, elements
  static constexpr int kLdGates = kGates + 8;    // backward's 16-bit gate gradients, elements
  static constexpr int kLdPre = kGates + 4;      // forward's fp32 pre-activations, elements
  static constexpr int kLdHidden = H + 8;        // forward's 16-bit h, elements
  static constexpr int kLdRecurrent = H + 4;     // backward's fp32 recurrent dh, elements
  static constexpr int kCells = kRows * H / kThreads;  // per thread
  static constexpr int kRowStep = kThreads / H;        // between a thread's rows
  template <typename T>
  static constexpr size_t weights_bytes() { return sizeof(T) * kGates * kLdWeights; }
  template <typename T>
  static constexpr size_t forward_bytes() {
    return weights_bytes<T>() + sizeof(float) * kRows * kLdPre + sizeof(T) * kRows * kLdHidden;
  }
  template <typename T>
  static constexpr size_t backward_bytes() {
    return weights_bytes<T>() + sizeof(T) * kRows * kLdGates + sizeof(float) * kRows * kLdRecurrent;
  }
};

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float sigmoid_approx(float x) { return fmaf(0.5f, tanh_approx(0.5f * x), 0.5f); }

// R (4H x H, row-major, of T) into shared memory with padded rows; 16 bytes at a time where the
// weights allow (a parameter tensor may start at any element).
template <typename T, int H>
__device__ void load_recurrent_weights(const T* R, T* shared) {
  using S = PersistentShape<H>;
  if (reinterpret_cast<uintptr_t>(R) % 16 == 0) {
    constexpr int kPerRow = H * sizeof(T) / 16;
    for (int i = threadIdx.x; i < S::kGates * kPerRow; i += kThreads) {
      const int row = i / kPerRow, part = i % kPerRow;
      *reinterpret_cast<uint4*>(shared + row * S::kLdWeights + part * 8) =
          *reinterpret_cast<const uint4*>(R + static_cast<size_t>(row) * H + part * 8);
    }
  } else {
    for (int i = threadIdx.x; i < S::kGates * H; i += kThreads) shared[(i / H) * S::kLdWeights + i % H] = R[i];
  }
}

template <typename T, int H>
__global__ void __launch_bounds__(kThreads, 1) persistent_lstm_forward_kernel(PersistentLstmForward a) {
  using S = PersistentShape<H>;
  constexpr int G = S::kGates;
  extern __shared__ __align__(128) unsigned char shared[];
  T* weights = reinterpret_cast<T*>(shared);
  float* pre = reinterpret_cast<float*>(shared + S::template weights_bytes<T>());
  T* hidden = reinterpret_cast<T*>(shared + S::template weights_bytes<T>() + sizeof(float) * kRows * S::kLdPre);

  const int B = a.batch;
  const int row0 = blockIdx.x * kRows;
  const int u = threadIdx.x % H;
  const int r0 = threadIdx.x / H;
  const T* bias_input = static_cast<const T*>(a.bias_input);
  const T* bias_recurrent = static_cast<const T*>(a.bias_recurrent);
  const T* hx = static_cast<const T*>(a.hx);
  const T* cx = static_cast<const T*>(a.cx);
  T* y = static_cast<T*>(a.y);
  T* gates = static_cast<T*>(a.gates);

  load_recurrent_weights<T, H>(static_cast<const T*>(a.recurrent_weights), weights);
  float bias[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) bias[q] = load_widened(bias_input + q * H + u) + load_widened(bias_recurrent + q * H + u);
  float c[S::kCells];
#pragma unroll
  for (int k = 0; k < S::kCells; ++k) {
    const int r = r0 + k * S::kRowStep, row = row0 + r;
    const bool valid = row < B;
    const size_t state = static_cast<size_t>(row) * H + u;
    c[k] = valid && cx != nullptr ? load_widened(&cx[state]) : 0.0f;
    store_rounded(&hidden[r * S::kLdHidden + u], valid && hx != nullptr ? load_widened(&hx[state]) : 0.0f);
    if (valid) a.cell[state] = c[k];  // c_{-1}, which step 0's backward reads
  }
  __syncthreads();

  const int warp = threadIdx.x / 32;
  constexpr int kWarpColumns = G / kWarps;
  constexpr int kTiles = kWarpColumns / 16;
  // A step's input projections are loaded a step ahead, all of a thread's cells at once, so that
  // their latency hides behind the step before (Note [persistent LSTM]).
  float projected[S::kCells][4];
  auto load_projections = [&](int t, float (&into)[S::kCells][4]) {
    // t = seq_len: past the last step, zeros.
    const float* step_projection = a.input_projection + (t < a.seq_len ? static_cast<size_t>(t) * B * G : 0);
#pragma unroll
    for (int k = 0; k < S::kCells; ++k) {
      const int row = row0 + r0 + k * S::kRowStep;
#pragma unroll
      for (int q = 0; q < 4; ++q)
        into[k][q] = row < B && t < a.seq_len ? step_projection[static_cast<size_t>(row) * G + q * H + u] : 0.0f;
    }
  };
  load_projections(0, projected);
  for (int t = 0; t < a.seq_len; ++t) {
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kTiles];
#pragma unroll
      for (int n = 0; n < kTiles; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
      for (int kk = 0; kk < H / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, hidden + kk * 16, S::kLdHidden);
#pragma unroll
        for (int n = 0; n < kTiles; ++n) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
          wmma::load_matrix_sync(fb, weights + (warp * kWarpColumns + n * 16) * S::kLdWeights + kk * 16,
                                 S::kLdWeights);
          wmma::mma_sync(acc[n], fa, fb, acc[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < kTiles; ++n)
        wmma::store_matrix_sync(pre + warp * kWarpColumns + n * 16, acc[n], S::kLdPre, wmma::mem_row_major);
    }
    __syncthreads();
    float next[S::kCells][4];
    load_projections(t + 1, next);
    const size_t step = static_cast<size_t>(t) * B;
#pragma unroll
    for (int k = 0; k < S::kCells; ++k) {
      const int r = r0 + k * S::kRowStep, row = row0 + r;
      float p[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) p[q] = pre[r * S::kLdPre + q * H + u] + projected[k][q] + bias[q];
      const float i = sigmoid_approx(p[0]);
      const float f = sigmoid_approx(p[1]);
      const float g = tanh_approx(p[2]);
      const float o = sigmoid_approx(p[3]);
      c[k] = fmaf(f, c[k], i * g);
      const float h = o * tanh_approx(c[k]);
      store_rounded(&hidden[r * S::kLdHidden + u], h);
      if (row < B) {
        const size_t state = (step + row) * H + u;
        y[state] = hidden[r * S::kLdHidden + u];
        T* gate_row = gates + (step + row) * G;
        store_rounded(gate_row + u, i);
        store_rounded(gate_row + H + u, f);
        store_rounded(gate_row + 2 * H + u, g);
        store_rounded(gate_row + 3 * H + u, o);
        a.cell[state + static_cast<size_t>(B) * H] = c[k];
      }
    }
#pragma unroll
    for (int k = 0; k < S::kCells; ++k) {
#pragma unroll
      for (int q = 0; q < 4; ++q) projected[k][q] = next[k][q];
    }
    __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < S::kCells; ++k) {
    const int row = row0 + r0 + k * S::kRowStep;
    if (row >= B) continue;
    const size_t state = static_cast<size_t>(row) * H + u;
    // With no step, hy and cy are the initial state, as hidden and c still hold it.
    if (a.hy != nullptr) static_cast<T*>(a.hy)[state] = hidden[(r0 + k * S::kRowStep) * S::kLdHidden + u];
    if (a.cy != nullptr) store_rounded(static_cast<T*>(a.cy) + state, c[k]);
  }
}

template <typename T, int H>
__global__ void __launch_bounds__(kThreads, 1) persistent_lstm_backward_kernel(PersistentLstmBackward a) {
  using S = PersistentShape<H>;
  constexpr int G = S::kGates;
  extern __shared__ __align__(128) unsigned char shared[];
  T* weights = reinterpret_cast<T*>(shared);
  T* gate_gradients = reinterpret_cast<T*>(shared + S::template weights_bytes<T>());
  float* recurrent = reinterpret_cast<float*>(shared + S::template weights_bytes<T>() + sizeof(T) * kRows * S::kLdGates);

  const int B = a.batch;
  const int row0 = blockIdx.x * kRows;
  const int u = threadIdx.x % H;
  const int r0 = threadIdx.x / H;
  T* gates = static_cast<T*>(a.gates);
  const T* dh_in = static_cast<const T*>(a.dh_in);
  const T* dhy = static_cast<const T*>(a.dhy);
  const T* dcy = static_cast<const T*>(a.dcy);

  load_recurrent_weights<T, H>(static_cast<const T*>(a.recurrent_weights), weights);
  float dc[S::kCells];
#pragma unroll
  for (int k = 0; k < S::kCells; ++k) {
    const int r = r0 + k * S::kRowStep, row = row0 + r;
    const bool valid = row < B;
    const size_t state = static_cast<size_t>(row) * H + u;
    dc[k] = valid && dcy != nullptr ? load_widened(&dcy[state]) : 0.0f;
    recurrent[r * S::kLdRecurrent + u] = valid && dhy != nullptr ? load_widened(&dhy[state]) : 0.0f;
  }
  __syncthreads();

  const int warp = threadIdx.x / 32;
  constexpr int kAccumulators = 4;
  // A step's activations, cells and incoming dh are loaded a step ahead, all of a thread's cells
  // at once: issued before the previous step's product, they arrive while it runs (each cell
  // loading after the one before had stored its gradients would wait out every load in turn).
  struct StepInputs {
    float gate[S::kCells][4], c_now[S::kCells], c_before[S::kCells], dh[S::kCells];
  };
  auto load_step = [&](int t, StepInputs& in) {
    const size_t step = t >= 0 ? static_cast<size_t>(t) * B : 0;  // t = -1: past the first step, zeros
#pragma unroll
    for (int k = 0; k < S::kCells; ++k) {
      const int row = row0 + r0 + k * S::kRowStep;
      const bool valid = row < B && t >= 0;
      const size_t state = (step + row) * H + u;
      const T* gate_row = gates + (step + row) * G;
#pragma unroll
      for (int q = 0; q < 4; ++q) in.gate[k][q] = valid ? load_widened(gate_row + q * H + u) : 0.0f;
      in.c_now[k] = valid ? a.cell[state + static_cast<size_t>(B) * H] : 0.0f;
      in.c_before[k] = valid ? a.cell[state] : 0.0f;
      in.dh[k] = valid && dh_in != nullptr ? load_widened(dh_in + state) : 0.0f;
    }
  };
  StepInputs now;
  load_step(a.seq_len - 1, now);
  for (int t = a.seq_len - 1; t >= 0; --t) {
    const size_t step = static_cast<size_t>(t) * B;
#pragma unroll
    for (int k = 0; k < S::kCells; ++k) {
      const int r = r0 + k * S::kRowStep, row = row0 + r;
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (row < B) {
        T* gate_row = gates + (step + row) * G;
        const float i = now.gate[k][0], f = now.gate[k][1], g = now.gate[k][2], o = now.gate[k][3];
        const float c_now = now.c_now[k];
        const float c_before = now.c_before[k];
        const float dh = now.dh[k] + recurrent[r * S::kLdRecurrent + u];
        const float tanh_c = tanh_approx(c_now);
        // h = o tanh(c): the cell's gradient is the carried dc plus what flows back through h.
        const float dc_total = dc[k] + dh * o * (1.0f - tanh_c * tanh_c);
        d[0] = dc_total * g * i * (1.0f - i);
        d[1] = dc_total * c_before * f * (1.0f - f);
        d[2] = dc_total * i * (1.0f - g * g);
        d[3] = dh * tanh_c * o * (1.0f - o);
        dc[k] = dc_total * f;
#pragma unroll
        for (int q = 0; q < 4; ++q) store_rounded(gate_row + q * H + u, d[q]);
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) store_rounded(&gate_gradients[r * S::kLdGates + q * H + u], d[q]);
    }
    __syncthreads();
    load_step(t - 1, now);
    if ((t > 0 || a.dhx != nullptr) && warp < H / 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kAccumulators];
#pragma unroll
      for (int j = 0; j < kAccumulators; ++j) wmma::fill_fragment(acc[j], 0.0f);
#pragma unroll
      for (int kk = 0; kk < G / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, gate_gradients + kk * 16, S::kLdGates);
        wmma::load_matrix_sync(fb, weights + kk * 16 * S::kLdWeights + warp * 16, S::kLdWeights);
        wmma::mma_sync(acc[kk % kAccumulators], fa, fb, acc[kk % kAccumulators]);
      }
#pragma unroll
      for (int j = 1; j < kAccumulators; ++j) {
#pragma unroll
        for (int e = 0; e < acc[0].num_elements; ++e) acc[0].x[e] += acc[j].x[e];
      }
      wmma::store_matrix_sync(recurrent + warp * 16, acc[0], S::kLdRecurrent, wmma::mem_row_major);
    }
    __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < S::kCells; ++k) {
    const int r = r0 + k * S::kRowStep, row = row0 + r;
    if (row >= B) continue;
    const size_t state = static_cast<size_t>(row) * H + u;
    // With no step, recurrent still holds dhy: the gradient passes straight through.
    if (a.dhx != nullptr) store_rounded(static_cast<T*>(a.dhx) + state, recurrent[r * S::kLdRecurrent + u]);
    if (a.dcx != nullptr) store_rounded(static_cast<T*>(a.dcx) + state, dc[k]);
  }
}

// Calls run(T{}, std::integral_constant<int, H>{}) for a 16-bit type and a supported H.
template <typename Run>
void with_persistent_shape(DataType type, int hidden, const char* op, Run run) {
  if (!persistent_lstm_supports(type, hidden))
    throw RuntimeError(std::string(op) + ": the persistent LSTM takes fp16 or bf16 data and 32, 64 or 128 "
                       "hidden units");
  auto with_hidden = [&](auto tag) {
    if (hidden == 32) return run(tag, std::integral_constant<int, 32>{});
    if (hidden == 64) return run(tag, std::integral_constant<int, 64>{});
    return run(tag, std::integral_constant<int, 128>{});
  };
  if (type == DataType::f16) return with_hidden(__half{});
  return with_hidden(__nv_bfloat16{});
}

unsigned persistent_grid(int batch) { return static_cast<unsigned>((batch + kRows - 1) / kRows); }

}  // namespace

bool persistent_lstm_supports(DataType type, int hidden) {
  return (type == DataType::f16 || type == DataType::bf16) && (hidden == 32 || hidden == 64 || hidden == 128);
}

void launch_persistent_lstm_forward(cudaStream_t stream, DataType type, const PersistentLstmForward& args) {
  if (args.batch <= 0) return;
  with_persistent_shape(type, args.hidden, "persistent_lstm_forward", [&](auto tag, auto hidden) {
    using T = decltype(tag);
    constexpr int H = decltype(hidden)::value;
    auto kernel = persistent_lstm_forward_kernel<T, H>;
    constexpr size_t bytes = PersistentShape<H>::template forward_bytes<T>();
    // Past 48 KB a kernel must opt in; the setting is per device, so it is repeated on every
    // launch (legal inside a graph capture).
    DPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    kernel<<<persistent_grid(args.batch), kThreads, bytes, stream>>>(args);
  });
  DPB_CUDA_CHECK_LAUNCH(persistent_lstm_forward_kernel);
}

void launch_persistent_lstm_backward(cudaStream_t stream, DataType type, const PersistentLstmBackward& args) {
  if (args.batch <= 0) return;
  with_persistent_shape(type, args.hidden, "persistent_lstm_backward", [&](auto tag, auto hidden) {
    using T = decltype(tag);
    constexpr int H = decltype(hidden)::value;
    auto kernel = persistent_lstm_backward_kernel<T, H>;
    constexpr size_t bytes = PersistentShape<H>::template backward_bytes<T>();
    DPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    kernel<<<persistent_grid(args.batch), kThreads, bytes, stream>>>(args);
  });
  DPB_CUDA_CHECK_LAUNCH(persistent_lstm_backward_kernel);
}

}  // namespace dpbench::cuda_kernels
