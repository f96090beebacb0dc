// Deterministic reductions: column sums (the bias gradient of fp32 or 16-bit rows, summed in
// fp32, and the second stage that every split column sum shares), the sum of squares behind
// param_norm.
// No atomics anywhere, so the same input gives the same bits on every run and every GPU count.
// Also the loss-scaling pair: the search for a non-finite gradient (an "any" reduction, where
// every finding writes the same 1, so order cannot matter) and the one-thread scale update.
//
// Note [column sums in parts]: a column sum over many rows (dbias of a (rows, cols) gradient,
// layer norm's dgamma and dbeta, a batch's channel sums) runs in two stages when the columns alone
// would give too few blocks to fill the GPU (512 columns make 2 to 16 column tiles for 132 SMs).
// Stage 1 splits the rows into parts of a fixed length, chosen from the shape alone (never from
// the GPU, the storage type or the pointers' alignment), and writes each part's column sums to
// partials (parts, cols); stage 2 (sum_column_parts_kernel) adds each column's parts: lane y of
// 64 sums parts y, y + 64, ... in order, then the 64 lanes are added in order. Every addition's
// place is fixed by (rows, cols), so the result has the same bits on every run and GPU. Stage 2's
// blocks take 8 columns each (a 32-byte sector of a partials row per lane), so 512 columns give
// 64 blocks instead of 16, and each lane's chain of dependent loads is 4 times shorter.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"

namespace dpbench::cuda_kernels {
namespace {

constexpr int kColumnTile = 32;    // threads per row of a block: one warp reads adjacent packs
constexpr int kRowLanes = 8;       // rows summed in parallel per column
constexpr int kRowsInFlight = 4;   // rows a thread loads before adding any of them
constexpr int kPartColumns = 8;    // stage 2: columns of a block
constexpr int kPartLanes = 64;     // stage 2: parts summed in parallel per column

// The bias gradient's row split (Note [column sums in parts]): about kTargetBlocks blocks over
// nominal tiles of kNominalTileColumns columns, parts of at least kMinRowsPerPart rows.
constexpr int kNominalTileColumns = 256;
constexpr int kTargetBlocks = 512;  // about 4 blocks of 256 threads per SM of an H100 or H200
constexpr int kMinRowsPerPart = 32;

struct RowSplit {
  int parts = 1;
  int rows_per_part = 0;
};

// parts > 1 only while the nominal tiles number fewer than kTargetBlocks, and then parts * cols
// <= kNominalTileColumns * (kTargetBlocks + tiles - 1): under bias_gradient_scratch_floats().
RowSplit bias_gradient_split(int rows, int cols) {
  const int tiles = (cols + kNominalTileColumns - 1) / kNominalTileColumns;
  const int wanted = (kTargetBlocks + tiles - 1) / tiles;
  const int most = (rows + kMinRowsPerPart - 1) / kMinRowsPerPart;
  RowSplit split;
  split.parts = std::max(1, std::min(wanted, most));
  split.rows_per_part = (rows + split.parts - 1) / split.parts;
  split.parts = (rows + split.rows_per_part - 1) / split.rows_per_part;
  return split;
}

// Stage 1 of dbias: block (kColumnTile, kRowLanes) at (tile blockIdx.x, part blockIdx.y); thread
// (x, y) sums rows first + y, first + y + kRowLanes, ... of the part, in order, for its kVec
// adjacent columns (loading kRowsInFlight rows before adding them), then thread (x, 0) adds the
// kRowLanes lanes in order into partials (parts, cols). The order of additions does not depend on
// kVec. kVec divides cols, and rows start aligned to a pack (the launcher checks).
template <typename T, int kVec>
__global__ void column_partials_kernel(const T* dy, int rows, int cols, int rows_per_part,
                                       float* partials) {
  __shared__ float lanes[kVec][kRowLanes][kColumnTile + 1];  // +1 avoids bank conflicts
  const int first_column = (blockIdx.x * kColumnTile + threadIdx.x) * kVec;
  const int first_row = blockIdx.y * rows_per_part;
  const int last_row = min(rows, first_row + rows_per_part);
  float sum[kVec] = {};
  if (first_column < cols) {
    for (int row = first_row + threadIdx.y; row < last_row; row += kRowLanes * kRowsInFlight) {
      Pack<T, kVec> values[kRowsInFlight] = {};
#pragma unroll
      for (int u = 0; u < kRowsInFlight; ++u) {
        const int r = row + u * kRowLanes;
        if (r < last_row) values[u] = load_pack<kVec>(dy + static_cast<size_t>(r) * cols + first_column);
      }
#pragma unroll
      for (int u = 0; u < kRowsInFlight; ++u) {
        if (row + u * kRowLanes < last_row) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) sum[k] += element(values[u], k);
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) lanes[k][threadIdx.y][threadIdx.x] = sum[k];
  __syncthreads();
  if (threadIdx.y == 0 && first_column < cols) {
    float* out = partials + static_cast<size_t>(blockIdx.y) * cols;  // (cols)
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float total = 0.0f;
      for (int lane = 0; lane < kRowLanes; ++lane) total += lanes[k][lane][threadIdx.x];
      out[first_column + k] = total;
    }
  }
}

// Stage 2 (Note [column sums in parts]): block (kPartColumns, kPartLanes) at (column tile
// blockIdx.x, sum blockIdx.y of the batch). Acc is float, or double rounded once at the end.
struct ColumnPartsBatch {
  ColumnParts sums[2];
};
static_assert(kMaxColumnPartsBatch == 2, "sum_column_parts_kernel picks one of two sums");

template <typename Acc>
__global__ void sum_column_parts_kernel(ColumnPartsBatch batch, size_t parts, int cols) {
  __shared__ Acc lanes[kPartLanes][kPartColumns + 1];
  const ColumnParts sum = blockIdx.y == 0 ? batch.sums[0] : batch.sums[1];  // no local copy
  const int c = blockIdx.x * kPartColumns + threadIdx.x;
  Acc total = 0;
  if (c < cols) {
#pragma unroll 8
    for (size_t p = threadIdx.y; p < parts; p += kPartLanes) total += sum.partials[p * cols + c];
  }
  lanes[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    Acc result = 0;
    for (int lane = 0; lane < kPartLanes; ++lane) result += lanes[lane][threadIdx.x];
    sum.out[c] = static_cast<float>(result);
  }
}

// Stage 1: block b writes its sum of x[i]^2 (grid-stride, in double) to partials[b].
__global__ void sum_squares_partials_kernel(const float* x, size_t n, double* partials) {
  __shared__ double shared[32];
  double sum = 0.0;
  DPB_GRID_STRIDE_LOOP(i, n) {
    const double value = x[i];
    sum += value * value;
  }
  sum = block_reduce(sum, SumOp{}, 0.0, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// Stage 2 (one block): partials[0] = sum of partials[0, count). block_reduce ends with a barrier,
// so every partial has been read before partials[0] is overwritten.
__global__ void sum_partials_kernel(double* partials, int count) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_reduce(sum, SumOp{}, 0.0, shared);
  if (threadIdx.x == 0) partials[0] = sum;
}

// Infinity and NaN are the values whose exponent bits are all ones; an integer test on the bits
// costs less than isfinite and cannot be optimised away by fast-math assumptions.
__device__ __forceinline__ bool non_finite_bits(float value) {
  return (__float_as_uint(value) & 0x7f800000u) == 0x7f800000u;
}

// x[0, head) one by one, x[head, head + 4 * quads) as float4 (16-byte aligned there), the rest
// one by one. A block that saw a non-finite value stores 1; others store nothing, so concurrent
// stores all carry the same value and the flag is never cleared here.
__global__ void find_non_finite_kernel(const float* x, size_t n, size_t head, size_t quads,
                                       int32_t* flag) {
  bool found = false;
  const float4* body = reinterpret_cast<const float4*>(x + head);
  DPB_GRID_STRIDE_LOOP(q, quads) {
    const float4 v = body[q];
    found |= non_finite_bits(v.x) | non_finite_bits(v.y) | non_finite_bits(v.z) |
             non_finite_bits(v.w);
  }
  const size_t tail_start = head + 4 * quads;
  DPB_GRID_STRIDE_LOOP(t, head + (n - tail_start)) {
    const size_t i = t < head ? t : tail_start + (t - head);
    found |= non_finite_bits(x[i]);
  }
  if (__syncthreads_or(found) && threadIdx.x == 0) *flag = 1;
}

// Backend::update_loss_scale's rule; one thread, reading and writing device memory, so it works
// unchanged inside a replayed CUDA graph.
__global__ void update_loss_scale_kernel(LossScaleState* state, int increase_every) {
  constexpr float kMaxScale = 16777216.0f;  // 2^24
  float scale = state->scale;
  if (state->non_finite != 0) {
    scale = fmaxf(1.0f, scale * 0.5f);
    state->good_steps = 0;
  } else if (++state->good_steps >= increase_every) {
    scale = fminf(kMaxScale, scale * 2.0f);
    state->good_steps = 0;
  }
  state->scale = scale;
  state->inverse_scale = 1.0f / scale;
  state->non_finite = 0;
}

}  // namespace

size_t bias_gradient_scratch_floats() {
  return static_cast<size_t>(kNominalTileColumns) * 2 * kTargetBlocks;
}

void launch_sum_column_parts(cudaStream_t stream, const ColumnParts* sums, int count, size_t parts,
                             int cols, bool in_double) {
  if (cols <= 0 || count <= 0) return;
  if (count > kMaxColumnPartsBatch) throw RuntimeError("sum_column_parts: more than 2 sums in a batch");
  ColumnPartsBatch batch{};
  for (int i = 0; i < count; ++i) batch.sums[i] = sums[i];
  const dim3 grid(static_cast<unsigned>((cols + kPartColumns - 1) / kPartColumns), static_cast<unsigned>(count));
  const dim3 block(kPartColumns, kPartLanes);
  if (in_double) {
    sum_column_parts_kernel<double><<<grid, block, 0, stream>>>(batch, parts, cols);
  } else {
    sum_column_parts_kernel<float><<<grid, block, 0, stream>>>(batch, parts, cols);
  }
  DPB_CUDA_CHECK_LAUNCH(sum_column_parts_kernel);
}

void launch_bias_gradient(cudaStream_t stream, DataType dy_type, const void* dy, float* dbias,
                          int rows, int cols, float* scratch) {
  if (cols <= 0) return;
  if (rows <= 0) {
    DPB_CUDA_CHECK(cudaMemsetAsync(dbias, 0, sizeof(float) * cols, stream));
    return;
  }
  RowSplit split = bias_gradient_split(rows, cols);
  // Without the scratch (or, never with the split's bound, too little of it): one part.
  if (split.parts > 1 && (scratch == nullptr ||
                          static_cast<size_t>(split.parts) * cols > bias_gradient_scratch_floats())) {
    split.parts = 1;
    split.rows_per_part = rows;
  }
  float* partials = split.parts > 1 ? scratch : dbias;  // one part: its sums are dbias
  with_storage_type(dy_type, "bias_gradient", [&](auto tag) {
    using T = decltype(tag);
    const T* typed = static_cast<const T*>(dy);
    auto launch = [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const dim3 grid(static_cast<unsigned>((cols + kColumnTile * kVec - 1) / (kColumnTile * kVec)),
                      static_cast<unsigned>(split.parts));
      column_partials_kernel<T, kVec><<<grid, dim3(kColumnTile, kRowLanes), 0, stream>>>(
          typed, rows, cols, split.rows_per_part, partials);
    };
    // 16-byte packs where every row starts on 16 bytes, else (16-bit) pairs, else one by one.
    constexpr int kWide = static_cast<int>(16 / sizeof(T));
    if (cols % kWide == 0 && aligned_to({dy}, 16)) return launch(std::integral_constant<int, kWide>{});
    if constexpr (sizeof(T) == 2) {
      if (cols % 2 == 0 && aligned_to({dy}, 4)) return launch(std::integral_constant<int, 2>{});
    }
    launch(std::integral_constant<int, 1>{});
  });
  DPB_CUDA_CHECK_LAUNCH(column_partials_kernel);
  if (split.parts > 1) {
    const ColumnParts sum{scratch, dbias};
    launch_sum_column_parts(stream, &sum, 1, static_cast<size_t>(split.parts), cols, false);
  }
}

void launch_sum_squares(cudaStream_t stream, const float* x, size_t n, double* scratch) {
  // The grid depends only on n, so the summation order (and the result) is reproducible.
  const size_t wanted_blocks = (n + kBlockSize - 1) / kBlockSize;
  const int blocks = static_cast<int>(
      wanted_blocks == 0 ? 1
                         : (wanted_blocks < static_cast<size_t>(kSumSquaresMaxPartials)
                                ? wanted_blocks
                                : static_cast<size_t>(kSumSquaresMaxPartials)));
  sum_squares_partials_kernel<<<blocks, kBlockSize, 0, stream>>>(x, n, scratch);
  DPB_CUDA_CHECK_LAUNCH(sum_squares_partials_kernel);
  sum_partials_kernel<<<1, kBlockSize, 0, stream>>>(scratch, blocks);
  DPB_CUDA_CHECK_LAUNCH(sum_partials_kernel);
}

void launch_find_non_finite(cudaStream_t stream, const float* x, size_t n, LossScaleState* state) {
  if (n == 0) return;
  // Gradient ranges start anywhere in a flat buffer: peel up to 3 floats to reach a 16-byte
  // boundary instead of giving up on vector loads (float pointers are 4-byte aligned).
  const size_t misalignment = reinterpret_cast<uintptr_t>(x) % 16;
  size_t head = misalignment == 0 ? 0 : (16 - misalignment) / sizeof(float);
  if (misalignment % sizeof(float) != 0 || head > n) head = n;
  const size_t quads = (n - head) / 4;
  const size_t singles = n - 4 * quads;
  find_non_finite_kernel<<<grid_for(quads + singles), kBlockSize, 0, stream>>>(
      x, n, head, quads, &state->non_finite);
  DPB_CUDA_CHECK_LAUNCH(find_non_finite_kernel);
}

void launch_update_loss_scale(cudaStream_t stream, LossScaleState* state, int increase_every) {
  update_loss_scale_kernel<<<1, 1, 0, stream>>>(state, increase_every);
  DPB_CUDA_CHECK_LAUNCH(update_loss_scale_kernel);
}

}  // namespace dpbench::cuda_kernels
