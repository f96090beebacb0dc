// Image-op kernels cuDNN has no call for: per-channel bias (add, with an optional ReLU, and its
// gradient, with the ReLU's mask), max-pool backward for disjoint windows, inverted dropout with a
// counter-based mask, and the strided row copy behind channel slices. Tensors hold fp32, fp16 or
// bf16; the arithmetic is fp32 and a 16-bit result is rounded once, to nearest, when stored. The
// kernels are bound by memory, so 16-bit tensors move in vectors of up to 16 bytes where the
// shape and the pointers allow. Kernels first, launchers after.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "engine/backend/counter_random.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"
#include "engine/errors.h"

namespace dpbench::cuda_kernels {
namespace {

// ---- per-channel bias ------------------------------------------------------------------
// NHWC (inner == 1): a (rows, channels) matrix walked in packs, which never straddle a row since
// the launcher picks a width dividing channels. NCHW: one block per (image, channel) plane,
// threads along the plane, so no per-element division finds the channel.
template <bool kRelu>
__device__ __forceinline__ float biased(float value, float bias) {
  const float sum = value + bias;
  return kRelu && !(sum > 0.0f) ? 0.0f : sum;
}

template <typename T, int kVec, bool kRelu>
__global__ void add_bias_rows_kernel(T* y, const float* bias, size_t packs, unsigned channels) {
  DPB_GRID_STRIDE_LOOP(i, packs) {
    T* at = y + i * kVec;
    const Pack<T, kVec> in = load_pack<kVec>(at);
    const unsigned channel = static_cast<unsigned>(i * kVec % channels);
    float out[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = biased<kRelu>(element(in, k), bias[channel + k]);
    store_pack<kVec>(at, round_pack<T, kVec>(out));
  }
}

template <typename T, int kVec, bool kRelu>
__global__ void add_bias_planes_kernel(T* y, const float* bias, size_t planes, int channels,
                                       size_t inner) {
  const size_t plane_packs = inner / kVec;
  for (size_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const float b = bias[plane % channels];
    T* row = y + plane * inner;
    for (size_t i = threadIdx.x; i < plane_packs; i += blockDim.x) {
      const Pack<T, kVec> in = load_pack<kVec>(row + i * kVec);
      float out[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) out[k] = biased<kRelu>(element(in, k), b);
      store_pack<kVec>(row + i * kVec, round_pack<T, kVec>(out));
    }
  }
}

// The per-channel sums run in two stages with a fixed shape, so they are reproducible: stage 1
// writes partial sums (parts, channels) to the workspace, stage 2 (launch_sum_column_parts, in
// double) adds each channel's parts in a fixed order (Note [column sums in parts] in
// cuda_kernels_reduce.cu). Stage 1 also applies the ReLU mask to dy when asked, since it reads dy
// anyway. The shape and the order of every addition depend on the layout alone, never on the
// storage type or the vector width, so the workspace size needs no type.
constexpr int kChannelTile = 32;  // NHWC: channel packs per block (one warp's coalesced row)
constexpr int kRowLanes = 8;      // NHWC: rows in flight per block
// NHWC: rows a thread loads before adding any. A 16-bit pair moves as many bytes as fp32's one
// element, but each thread then has twice the channels' rows to cover with half the blocks, so
// it keeps more loads in flight; fp32 keeps its one.
template <typename T>
constexpr int kRowUnroll = sizeof(T) == 2 ? 4 : 1;
constexpr int kTargetBlocks = 2048;

struct ChannelSumShape {
  bool planes = false;  // NCHW: one part per image; NHWC: one part per chunk of rows
  size_t parts = 0;
  size_t rows_per_part = 0;  // NHWC
  unsigned tiles = 0;        // NHWC: tiles of kChannelTile channels
};

ChannelSumShape channel_sum_shape(const ChannelLayout& layout) {
  ChannelSumShape shape;
  if (layout.inner > 1) {
    shape.planes = true;
    shape.parts = layout.outer;
    return shape;
  }
  shape.tiles = static_cast<unsigned>((layout.channels + kChannelTile - 1) / kChannelTile);
  const size_t wanted = (kTargetBlocks + shape.tiles - 1) / shape.tiles;
  const size_t most = (layout.outer + kRowLanes - 1) / kRowLanes;  // at least kRowLanes rows each
  shape.parts = std::max<size_t>(1, std::min(wanted, most));
  shape.rows_per_part = (layout.outer + shape.parts - 1) / shape.parts;
  shape.parts = (layout.outer + shape.rows_per_part - 1) / shape.rows_per_part;
  return shape;
}

// dy with the ReLU's mask applied (zeros where the stored y <= 0), written back to dy only when
// the mask changed something.
template <int kVec, bool kRelu, typename T>
__device__ __forceinline__ Pack<T, kVec> masked_gradient(const Pack<T, kVec>& y, Pack<T, kVec> dy,
                                                         T* dy_at) {
  if (kRelu) {
    bool masked = false;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      if (!(element(y, k) > 0.0f)) {
        clear_element(dy, k);
        masked = true;
      }
    }
    if (masked) store_pack<kVec>(dy_at, dy);
  }
  return dy;
}

// NHWC stage 1: block (kChannelTile, kRowLanes) sums rows [part * rows_per_part, ...) of its tile
// of kChannelTile packs of kVec channels; partials (parts, channels). Each channel's sum runs over
// rows first + lane_y, first + lane_y + kRowLanes, ... and then over the lanes in order, whatever
// kVec is.
template <typename T, int kVec, bool kRelu>
__global__ void channel_sum_rows_kernel(const T* y, T* dy, size_t rows, int channels,
                                        size_t rows_per_part, float* partials) {
  constexpr int kTileChannels = kChannelTile * kVec;
  __shared__ float lanes[kRowLanes][kTileChannels + 1];
  const int first_channel = blockIdx.x * kTileChannels + threadIdx.x * kVec;
  const size_t first = blockIdx.y * rows_per_part;
  const size_t last = first + rows_per_part < rows ? first + rows_per_part : rows;
  float sum[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) sum[k] = 0.0f;
  if (first_channel < channels) {  // channels % kVec == 0: the whole pack is inside the row
    for (size_t row = first + threadIdx.y; row < last; row += kRowLanes * kRowUnroll<T>) {
      Pack<T, kVec> outputs[kRowUnroll<T>], gradients[kRowUnroll<T>];
#pragma unroll
      for (int u = 0; u < kRowUnroll<T>; ++u) {
        const size_t at = (row + u * kRowLanes) * channels + first_channel;
        if (row + u * kRowLanes < last) {
          gradients[u] = load_pack<kVec>(dy + at);
          if (kRelu) outputs[u] = load_pack<kVec>(y + at);
        }
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll<T>; ++u) {
        const size_t at = (row + u * kRowLanes) * channels + first_channel;
        if (row + u * kRowLanes < last) {
          const Pack<T, kVec> g = masked_gradient<kVec, kRelu>(outputs[u], gradients[u], dy + at);
#pragma unroll
          for (int k = 0; k < kVec; ++k) sum[k] += element(g, k);
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) lanes[threadIdx.y][threadIdx.x * kVec + k] = sum[k];
  __syncthreads();
  if (threadIdx.y == 0) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int channel = first_channel + k;
      if (channel < channels) {
        float total = 0.0f;
        for (int lane = 0; lane < kRowLanes; ++lane) total += lanes[lane][threadIdx.x * kVec + k];
        partials[static_cast<size_t>(blockIdx.y) * channels + channel] = total;
      }
    }
  }
}

// NCHW stage 1: one warp per (image, channel) plane; partials (images, channels) = plane order.
// Lane l adds the plane's elements l, l + 32, l + 64, ... in turn, then the warp adds the lanes
// along a fixed tree. With kVec > 1 the warp loads 32 * kVec elements at a time, a pack per lane,
// and passes them through shared memory so that each lane still adds exactly its own elements in
// that order: any kVec gives the same bits.
template <typename T, int kVec, bool kRelu>
__global__ void channel_sum_planes_kernel(const T* y, T* dy, size_t planes, size_t inner,
                                          float* partials) {
  constexpr int kWarps = kBlockSize / 32;
  __shared__ __align__(16) T staged[kVec > 1 ? kWarps : 1][32 * kVec];
  const size_t warps_per_block = blockDim.x / 32;
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  for (size_t plane = blockIdx.x * warps_per_block + warp; plane < planes;
       plane += static_cast<size_t>(gridDim.x) * warps_per_block) {
    const T* plane_y = y + plane * inner;
    T* plane_dy = dy + plane * inner;
    float sum = 0.0f;
    size_t scalar_from = 0;
    if constexpr (kVec > 1) {
      const size_t segments = inner / (32 * kVec);
      for (size_t segment = 0; segment < segments; ++segment) {
        const size_t at = (segment * 32 + lane) * kVec;
        Pack<T, kVec> outputs;
        if (kRelu) outputs = load_pack<kVec>(plane_y + at);
        const Pack<T, kVec> g =
            masked_gradient<kVec, kRelu>(outputs, load_pack<kVec>(plane_dy + at), plane_dy + at);
        store_pack<kVec>(&staged[warp][lane * kVec], g);
        __syncwarp();
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          sum += element(load_pack<1>(&staged[warp][lane + 32 * k]), 0);
        }
        __syncwarp();
      }
      scalar_from = segments * 32 * kVec;
    }
    for (size_t i = scalar_from + lane; i < inner; i += 32) {
      const Pack<T, 1> gradient = load_pack<1>(plane_dy + i);
      Pack<T, 1> outputs;
      if (kRelu) outputs = load_pack<1>(plane_y + i);
      sum += element(masked_gradient<1, kRelu>(outputs, gradient, plane_dy + i), 0);
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) partials[plane] = sum;
  }
}

// ---- pooling forward ------------------------------------------------------------------------------
// cuDNN's NHWC average pooling ran Inception-v3's 3x3/1 branch pools through a generic 4-D kernel
// at a fortieth of the memory's speed (0.36 to 0.48 ms each, 3.1 ms of a 19.6 ms bf16 step on an
// H200). Here a thread makes kVec consecutive channels of one output pixel (NHWC; one element in
// NCHW) with the reference's arithmetic, so y is the reference's bit for bit: average pooling sums
// the window's part inside the input in double, in (h, w) order, and divides in double by the
// divisor; max pooling keeps the window's first maximum, comparing values as floats. A window
// wholly in the padding gives 0. Indices are 32-bit: the caller checks that every tensor fits.
// With kPositions (max pooling) the kernel writes, instead of y, where each window's first maximum
// lies: its row-major index in the window, padding counted (kNoPosition for a window wholly in the
// padding), one byte per output element, for the two-pass backward below.
constexpr unsigned kNoPosition = 255;

// kVec one-byte positions at `at` (kVec-aligned), as one word.
template <int kVec>
__device__ __forceinline__ void store_positions(uint8_t* at, const unsigned (&positions)[kVec]) {
  using Word = std::conditional_t<kVec == 1, uint8_t, std::conditional_t<kVec == 2, uint16_t,
                                  std::conditional_t<kVec == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(Word) == kVec, "one byte per position");
  Word word = 0;
#pragma unroll
  for (int k = 0; k < kVec; ++k) word |= static_cast<Word>(static_cast<Word>(positions[k]) << (8 * k));
  *reinterpret_cast<Word*>(at) = word;
}

template <int kVec>
__device__ __forceinline__ void load_positions(const uint8_t* at, unsigned (&positions)[kVec]) {
  using Word = std::conditional_t<kVec == 1, uint8_t, std::conditional_t<kVec == 2, uint16_t,
                                  std::conditional_t<kVec == 4, uint32_t, uint64_t>>>;
  const Word word = *reinterpret_cast<const Word*>(at);
#pragma unroll
  for (int k = 0; k < kVec; ++k) positions[k] = static_cast<unsigned>(word >> (8 * k)) & 0xffu;
}

// Output element i's coordinates, i counting the outputs in the layout's order (in NHWC, packs of
// kVec channels); Index is the caller's index type.
template <typename Index>
struct PoolOutputAt {
  Index n, c, oh, ow;
};

template <bool kNhwc, int kVec, typename Index>
__device__ __forceinline__ PoolOutputAt<Index> pool_output_at(Index i, const PoolShape& s) {
  PoolOutputAt<Index> at;
  if (kNhwc) {
    const Index channel_packs = s.c / kVec;
    at.c = (i % channel_packs) * kVec;
    Index rest = i / channel_packs;
    at.ow = rest % s.out_w;
    rest /= s.out_w;
    at.oh = rest % s.out_h;
    at.n = rest / s.out_h;
  } else {
    at.ow = i % s.out_w;
    Index rest = i / s.out_w;
    at.oh = rest % s.out_h;
    rest /= s.out_h;
    at.c = rest % s.c;
    at.n = rest / s.c;
  }
  return at;
}

template <typename T, bool kNhwc, int kVec, bool kMax, bool kPositions = false>
__global__ void pool_forward_kernel(const T* x, T* y, uint8_t* positions, PoolShape s, unsigned outputs) {
  static_assert(kNhwc || kVec == 1, "NCHW neighbours lie in different windows");
  static_assert(kMax || !kPositions, "positions are max pooling's");
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < outputs; i += gridDim.x * blockDim.x) {
    const PoolOutputAt<unsigned> at = pool_output_at<kNhwc, kVec>(i, s);
    const unsigned n = at.n, c = at.c, oh = at.oh, ow = at.ow;
    auto input_at = [&](int hh, int ww) -> unsigned {
      return kNhwc ? ((n * s.in_h + hh) * s.in_w + ww) * s.c + c : ((n * s.c + c) * s.in_h + hh) * s.in_w + ww;
    };
    const int h0 = static_cast<int>(oh) * s.stride_h - s.pad_h, w0 = static_cast<int>(ow) * s.stride_w - s.pad_w;
    const int h_begin = max(h0, 0), h_end = min(h0 + s.window_h, static_cast<int>(s.in_h));
    const int w_begin = max(w0, 0), w_end = min(w0 + s.window_w, static_cast<int>(s.in_w));
    float result[kVec];
    unsigned best[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      result[k] = 0.0f;
      best[k] = kNoPosition;
    }
    if (h_begin < h_end && w_begin < w_end) {
      if constexpr (kMax) {
        const Pack<T, kVec> first = load_pack<kVec>(x + input_at(h_begin, w_begin));
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          result[k] = element(first, k);
          best[k] = (h_begin - h0) * s.window_w + (w_begin - w0);
        }
        for (int hh = h_begin; hh < h_end; ++hh) {
          for (int ww = w_begin; ww < w_end; ++ww) {
            const Pack<T, kVec> values = load_pack<kVec>(x + input_at(hh, ww));
#pragma unroll
            for (int k = 0; k < kVec; ++k) {
              if (element(values, k) > result[k]) {  // strict: ties keep the earlier position, NaN never wins
                result[k] = element(values, k);
                best[k] = (hh - h0) * s.window_w + (ww - w0);
              }
            }
          }
        }
      } else {
        double sum[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) sum[k] = 0.0;
        for (int hh = h_begin; hh < h_end; ++hh) {
          for (int ww = w_begin; ww < w_end; ++ww) {
            const Pack<T, kVec> values = load_pack<kVec>(x + input_at(hh, ww));
#pragma unroll
            for (int k = 0; k < kVec; ++k) sum[k] += element(values, k);
          }
        }
        const double divisor = s.include_padding ? static_cast<double>(s.window_h) * s.window_w
                                                 : static_cast<double>(h_end - h_begin) * (w_end - w_begin);
#pragma unroll
        for (int k = 0; k < kVec; ++k) result[k] = static_cast<float>(sum[k] / divisor);
      }
    }
    const unsigned out = kNhwc ? ((n * s.out_h + oh) * s.out_w + ow) * s.c + c
                               : ((n * s.c + c) * s.out_h + oh) * s.out_w + ow;
    if constexpr (kPositions) {
      store_positions<kVec>(positions + out, best);
    } else {
      store_pack<kVec>(y + out, round_pack<T, kVec>(result));
    }
  }
}

// ---- pooling backward as a gather ---------------------------------------------------------------
// cuDNN's pooling backward is slow in NHWC: its deterministic max-pool backward took 10 ms of a
// 33 ms VGG-16 step on an H200, and its overlapping windows (ResNet's 3x3/2 stem, Inception's
// reductions and 3x3/1 branch pools) cost as much again. Here each input element finds the windows
// that contain it (at most ceil(window / stride) of them per axis) in (oh, ow) order and sums in
// double what each sends it: max pooling's window gradient where the window's first maximum
// (lowest h, then w) is this element, found by rescanning the window; average pooling's dy times
// the reciprocal of the window's divisor. Those are the reference's windows, order and double arithmetic, so dx is
// the reference's bit for bit; a gather, with no atomics. Rows are (n, h) in NHWC and (n, c) in
// NCHW; the column index inside a row needs one 32-bit division. In NHWC a thread may own kVec
// consecutive channels of one pixel: they share the windows, so it scans each in packs with one
// running maximum per channel. Values compare as floats, which orders them exactly as the stored
// 16-bit values.
// Rescanning cost a window's reads for each element it holds (nine reads for each of up to four
// windows under 3x3/2: 0.6 ms for the stem pool of Inception-v3, b64 bf16 on an H200, slower than
// cuDNN's), so max pooling has a second source: max_from_positions reads each window's first
// maximum as pool_forward_kernel<..., kPositions> wrote it, one byte per window and channel. With
// kRelu (PoolShape::relu_input) an element whose x is not above 0 gets 0, the ReLU's backward.
enum class PoolGather { average, max_rescan, max_from_positions };

template <typename T, bool kNhwc, int kVec, PoolGather kSource, bool kRelu = false>
__global__ void pool_backward_gather_kernel(const T* x, const T* dy, const uint8_t* positions, T* dx,
                                            PoolShape s) {
  static_assert(kNhwc || kVec == 1, "NCHW neighbours lie in different windows");
  const unsigned columns = (kNhwc ? s.in_w * s.c : s.in_h * s.in_w) / kVec;
  const unsigned rows = kNhwc ? s.n * s.in_h : s.n * s.c;
  const unsigned column = blockIdx.x * blockDim.x + threadIdx.x;
  if (column >= columns) return;
  for (unsigned row = blockIdx.y; row < rows; row += gridDim.y) {
    unsigned n, c, h, w;
    if (kNhwc) {
      n = row / s.in_h;
      h = row - n * s.in_h;
      const unsigned first_column = column * kVec;
      w = first_column / s.c;
      c = first_column - w * s.c;
    } else {
      n = row / s.c;
      c = row - n * s.c;
      h = column / s.in_w;
      w = column - h * s.in_w;
    }
    auto input_at = [&](unsigned hh, unsigned ww) -> size_t {
      return kNhwc ? ((static_cast<size_t>(n) * s.in_h + hh) * s.in_w + ww) * s.c + c
                   : ((static_cast<size_t>(n) * s.c + c) * s.in_h + hh) * s.in_w + ww;
    };
    auto output_at = [&](int oh, int ow) -> size_t {
      return kNhwc ? ((static_cast<size_t>(n) * s.out_h + oh) * s.out_w + ow) * s.c + c
                   : ((static_cast<size_t>(n) * s.c + c) * s.out_h + oh) * s.out_w + ow;
    };
    const size_t self = input_at(h, w);
    double gradient[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) gradient[k] = 0.0;
    // Window oh covers rows oh * stride - pad ... + window - 1: those holding h (padded: hp) run
    // from the first whose end passes hp to the last that starts at or before it.
    const int hp = static_cast<int>(h) + s.pad_h, wp = static_cast<int>(w) + s.pad_w;
    const int oh_first = hp < s.window_h ? 0 : (hp - s.window_h) / s.stride_h + 1;
    const int ow_first = wp < s.window_w ? 0 : (wp - s.window_w) / s.stride_w + 1;
    const int oh_last = min(hp / s.stride_h, s.out_h - 1), ow_last = min(wp / s.stride_w, s.out_w - 1);
    for (int oh = oh_first; oh <= oh_last; ++oh) {
      for (int ow = ow_first; ow <= ow_last; ++ow) {
        const int h0 = oh * s.stride_h - s.pad_h, w0 = ow * s.stride_w - s.pad_w;
        const int h_begin = max(h0, 0), h_end = min(h0 + s.window_h, static_cast<int>(s.in_h));
        const int w_begin = max(w0, 0), w_end = min(w0 + s.window_w, static_cast<int>(s.in_w));
        const Pack<T, kVec> window_gradient = load_pack<kVec>(dy + output_at(oh, ow));
        if constexpr (kSource == PoolGather::max_from_positions) {
          const unsigned self_position = static_cast<unsigned>((static_cast<int>(h) - h0) * s.window_w +
                                                               (static_cast<int>(w) - w0));
          unsigned winners[kVec];
          load_positions<kVec>(positions + output_at(oh, ow), winners);
#pragma unroll
          for (int k = 0; k < kVec; ++k)
            if (winners[k] == self_position) gradient[k] += element(window_gradient, k);
        } else if constexpr (kSource == PoolGather::max_rescan) {
          size_t best[kVec];
          float best_value[kVec];
          const size_t start = input_at(h_begin, w_begin);
          const Pack<T, kVec> first = load_pack<kVec>(x + start);
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            best[k] = start;
            best_value[k] = element(first, k);
          }
          for (int hh = h_begin; hh < h_end; ++hh) {
            for (int ww = w_begin; ww < w_end; ++ww) {
              const size_t at = input_at(hh, ww);
              const Pack<T, kVec> values = load_pack<kVec>(x + at);
#pragma unroll
              for (int k = 0; k < kVec; ++k) {
                if (element(values, k) > best_value[k]) {  // strict: ties keep the earlier position
                  best_value[k] = element(values, k);
                  best[k] = at;
                }
              }
            }
          }
#pragma unroll
          for (int k = 0; k < kVec; ++k)
            if (best[k] == self) gradient[k] += element(window_gradient, k);
        } else {
          const double divisor = s.include_padding ? static_cast<double>(s.window_h) * s.window_w
                                                   : static_cast<double>(h_end - h_begin) * (w_end - w_begin);
          // The reference's share, dy times the divisor's reciprocal: one division per window,
          // not per channel (a division in double costs about twenty multiplies). _rn: no
          // contraction into a fused multiply-add, which the reference does not do.
          const double reciprocal = 1.0 / divisor;
#pragma unroll
          for (int k = 0; k < kVec; ++k)
            gradient[k] = __dadd_rn(gradient[k], __dmul_rn(element(window_gradient, k), reciprocal));
        }
      }
    }
    float rounded[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) rounded[k] = static_cast<float>(gradient[k]);
    if constexpr (kRelu) {
      const Pack<T, kVec> inputs = load_pack<kVec>(x + self);
#pragma unroll
      for (int k = 0; k < kVec; ++k)
        if (!(element(inputs, k) > 0.0f)) rounded[k] = 0.0f;
    }
    store_pack<kVec>(dx + self, round_pack<T, kVec>(rounded));
  }
}

// out = keep ? in * keep_scale : 0, keep and keep_scale by engine/backend/counter_random.h's rule
// (dropout_keeps_keyed with the step's key and dropout_threshold(rate); dropout_keep_scale(rate)),
// which the reference follows, so the two agree bit for bit. The same mask serves forward (in = x)
// and backward (in = dy); the step is read on the device so that a replayed graph draws a new
// mask each step. A pack whose first element index is even covers whole pairs of the rule, one
// hash each (dropout_keeps_run); other packs ask element by element. The integer threshold and
// the multiply keep the per-element work to the hash itself. A thread takes
// two packs of its grid-stride range at a time, both loaded before either is stored, so two loads
// are in flight; out may alias in, since each element is read, then written, by one thread. The
// last n % kVec elements go one per thread.
template <typename T, int kVec>
__device__ __forceinline__ Pack<T, kVec> dropped_pack(const Pack<T, kVec>& values, uint64_t stream_key,
                                                      uint64_t first, uint32_t threshold, float keep_scale) {
  bool keep[kVec];
  dropout_keeps_run(stream_key, first, threshold, keep);
  float result[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) result[k] = keep[k] ? element(values, k) * keep_scale : 0.0f;
  return round_pack<T, kVec>(result);
}

template <typename T, int kVec>
__global__ void dropout_kernel(const T* in, T* out, size_t n, uint32_t threshold, float keep_scale,
                               uint64_t seed, uint64_t first_index, const int32_t* step) {
  const uint64_t key = dropout_stream_key(seed, *step);
  const size_t packs = n / kVec;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t thread = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t i = thread; i < packs; i += 2 * stride) {
    const size_t j = i + stride;  // the second pack: packs i + m * stride, m odd
    const Pack<T, kVec> first = load_pack<kVec>(in + i * kVec);
    Pack<T, kVec> second{};
    if (j < packs) second = load_pack<kVec>(in + j * kVec);
    store_pack<kVec>(out + i * kVec, dropped_pack(first, key, first_index + i * kVec, threshold, keep_scale));
    if (j < packs) {
      store_pack<kVec>(out + j * kVec, dropped_pack(second, key, first_index + j * kVec, threshold, keep_scale));
    }
  }
  if constexpr (kVec > 1) {
    const size_t i = packs * kVec + thread;
    if (i < n) {
      const Pack<T, 1> value = load_pack<1>(in + i);
      store_pack<1>(out + i, dropped_pack(value, key, first_index + i, threshold, keep_scale));
    }
  }
}

// dst[r * dst_stride + k] = src[r * src_stride + k] for r < rows, k < row_length, all in Words:
// the copy moves bits, so the widest word that the rows and pointers allow serves every type.
template <typename Word>
__global__ void copy_rows_kernel(const Word* src, size_t src_stride, Word* dst, size_t dst_stride,
                                 size_t row_length, size_t total) {
  DPB_GRID_STRIDE_LOOP(i, total) {
    const size_t row = i / row_length;
    const size_t k = i % row_length;
    dst[row * dst_stride + k] = src[row * src_stride + k];
  }
}

// ---- host side -------------------------------------------------------------------------------

// Elements per pack for a 16-bit tensor: 8 (16 bytes) where `run` (elements that must split
// into whole packs) and every pointer allow, else pairs (4 bytes, fp32's element width), else 1.
// fp32 keeps its scalar kernels as they were: 1.
// Windows that tile the input exactly (stride == window, no padding, out * stride == in, as
// VGG's 2x2/2 pools): one thread per window and kVec channels reads each input once, finds the
// first maximum and writes the whole window's gradient. The gather kernel above visits every
// input element instead and re-reads its window for each, which cost VGG-16 6 ms a step (NHWC,
// fp32, batch 64, H200) against about 0.5 ms of traffic.
template <typename T, bool kNhwc, int kVec>
__global__ void max_pool_backward_tiled_kernel(const T* x, const T* dy, T* dx, PoolShape s,
                                               size_t windows) {
  static_assert(kNhwc || kVec == 1, "NCHW neighbours lie in different windows");
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < windows;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const PoolOutputAt<size_t> at = pool_output_at<kNhwc, kVec>(i, s);
    const size_t n = at.n, c = at.c, oh = at.oh, ow = at.ow;
    auto input_at = [&](size_t hh, size_t ww) -> size_t {
      return kNhwc ? ((n * s.in_h + hh) * s.in_w + ww) * s.c + c
                   : ((n * s.c + c) * s.in_h + hh) * s.in_w + ww;
    };
    const size_t out = kNhwc ? ((n * s.out_h + oh) * s.out_w + ow) * s.c + c
                             : ((n * s.c + c) * s.out_h + oh) * s.out_w + ow;
    const size_t h0 = oh * s.stride_h, w0 = ow * s.stride_w;
    // First maximum in (h, then w) order: later positions win only when strictly greater.
    int best[kVec];
    float best_value[kVec];
    {
      const Pack<T, kVec> first = load_pack<kVec>(x + input_at(h0, w0));
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        best[k] = 0;
        best_value[k] = element(first, k);
      }
    }
    for (int dh = 0; dh < s.window_h; ++dh) {
      for (int dw = dh == 0 ? 1 : 0; dw < s.window_w; ++dw) {
        const Pack<T, kVec> values = load_pack<kVec>(x + input_at(h0 + dh, w0 + dw));
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (element(values, k) > best_value[k]) {
            best_value[k] = element(values, k);
            best[k] = dh * s.window_w + dw;
          }
        }
      }
    }
    const Pack<T, kVec> gradient = load_pack<kVec>(dy + out);
    // The ReLU before the pool (relu_input): a window whose maximum is not above 0 passes nothing.
    bool passes[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) passes[k] = !s.relu_input || best_value[k] > 0.0f;
    for (int dh = 0; dh < s.window_h; ++dh) {
      for (int dw = 0; dw < s.window_w; ++dw) {
        Pack<T, kVec> written = gradient;
#pragma unroll
        for (int k = 0; k < kVec; ++k)
          if (best[k] != dh * s.window_w + dw || !passes[k]) clear_element(written, k);
        store_pack<kVec>(dx + input_at(h0 + dh, w0 + dw), written);
      }
    }
  }
}

// The widest pack (16 bytes, then 4 bytes of 16-bit or 8 of fp32 elements, then one element) whose
// width divides `run` and to which every pointer is aligned.
template <typename T>
int pack_width(size_t run, std::initializer_list<const void*> pointers) {
  constexpr int kWide = static_cast<int>(16 / sizeof(T));
  for (int vec : {kWide, 2}) {
    if (run % vec == 0 && aligned_to(pointers, vec * sizeof(T))) return vec;
  }
  return 1;
}

// Calls launch(vec) with vec a std::integral_constant among the widths pack_width picks for T.
template <typename T, typename Launch>
void with_pack_width(int vec, Launch launch) {
  constexpr int kWide = static_cast<int>(16 / sizeof(T));
  if (vec == kWide) return launch(std::integral_constant<int, kWide>{});
  if (vec == 2) return launch(std::integral_constant<int, 2>{});
  launch(std::integral_constant<int, 1>{});
}

}  // namespace

void launch_add_channel_bias(cudaStream_t stream, DataType type, void* y, const float* bias,
                             const ChannelLayout& layout, bool relu) {
  const size_t total = layout.outer * layout.channels * layout.inner;
  if (total == 0) return;
  with_storage_type(type, "add_channel_bias", [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(y);
    if (layout.inner == 1) {
      const unsigned channels = static_cast<unsigned>(layout.channels);
      with_pack_width<T>(pack_width<T>(channels, {data}), [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        const size_t packs = total / kVec;
        if (relu) {
          add_bias_rows_kernel<T, kVec, true><<<grid_for(packs), kBlockSize, 0, stream>>>(
              data, bias, packs, channels);
        } else {
          add_bias_rows_kernel<T, kVec, false><<<grid_for(packs), kBlockSize, 0, stream>>>(
              data, bias, packs, channels);
        }
      });
    } else {
      const size_t planes = layout.outer * layout.channels;
      const unsigned blocks = static_cast<unsigned>(std::min<size_t>(planes, 65536));
      with_pack_width<T>(pack_width<T>(layout.inner, {data}), [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        if (relu) {
          add_bias_planes_kernel<T, kVec, true><<<blocks, kBlockSize, 0, stream>>>(
              data, bias, planes, layout.channels, layout.inner);
        } else {
          add_bias_planes_kernel<T, kVec, false><<<blocks, kBlockSize, 0, stream>>>(
              data, bias, planes, layout.channels, layout.inner);
        }
      });
    }
  });
  DPB_CUDA_CHECK_LAUNCH(add_channel_bias);
}

size_t channel_sum_workspace_bytes(const ChannelLayout& layout) {
  return channel_sum_shape(layout).parts * static_cast<size_t>(layout.channels) * sizeof(float);
}

void launch_channel_bias_gradient(cudaStream_t stream, DataType type, const void* y, void* dy,
                                  float* dbias, bool relu, const ChannelLayout& layout,
                                  float* workspace) {
  if (layout.channels <= 0) return;
  const ChannelSumShape shape = channel_sum_shape(layout);
  if (shape.parts == 0 || layout.inner == 0) {
    DPB_CUDA_CHECK(cudaMemsetAsync(dbias, 0, sizeof(float) * layout.channels, stream));
    return;
  }
  with_storage_type(type, "channel_bias_gradient", [&](auto tag) {
    using T = decltype(tag);
    const T* outputs = static_cast<const T*>(y);
    T* gradients = static_cast<T*>(dy);
    // 16-bit takes 16-byte packs in NCHW planes but pairs in NHWC rows: the rows' partition is
    // fixed by the shape alone, and each widening of the packs divides the blocks covering it.
    if (shape.planes) {
      const size_t planes = layout.outer * layout.channels;
      const size_t warps_per_block = kBlockSize / 32;
      const unsigned blocks = static_cast<unsigned>(
          std::min<size_t>((planes + warps_per_block - 1) / warps_per_block, 65536));
      with_pack_width<T>(pack_width<T>(layout.inner, {outputs, gradients}), [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        if (relu) {
          channel_sum_planes_kernel<T, kVec, true><<<blocks, kBlockSize, 0, stream>>>(
              outputs, gradients, planes, layout.inner, workspace);
        } else {
          channel_sum_planes_kernel<T, kVec, false><<<blocks, kBlockSize, 0, stream>>>(
              outputs, gradients, planes, layout.inner, workspace);
        }
      });
    } else {
      const bool pairs = sizeof(T) == 2 && layout.channels % 2 == 0 &&
                         aligned_to({outputs, gradients}, 2 * sizeof(T));
      const int width = pairs ? 2 : 1;
      const dim3 block(kChannelTile, kRowLanes);
      const dim3 grid((static_cast<unsigned>(layout.channels) + kChannelTile * width - 1) /
                          (kChannelTile * width),
                      static_cast<unsigned>(shape.parts));
      auto launch = [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        if (relu) {
          channel_sum_rows_kernel<T, kVec, true><<<grid, block, 0, stream>>>(
              outputs, gradients, layout.outer, layout.channels, shape.rows_per_part, workspace);
        } else {
          channel_sum_rows_kernel<T, kVec, false><<<grid, block, 0, stream>>>(
              outputs, gradients, layout.outer, layout.channels, shape.rows_per_part, workspace);
        }
      };
      if constexpr (sizeof(T) == 2) {
        if (pairs) return launch(std::integral_constant<int, 2>{});
      }
      launch(std::integral_constant<int, 1>{});
    }
  });
  DPB_CUDA_CHECK_LAUNCH(channel_sum_stage1);
  const ColumnParts sum{workspace, dbias};
  launch_sum_column_parts(stream, &sum, 1, shape.parts, layout.channels, /*in_double=*/true);
}

bool pool_tiles_exactly(const PoolShape& shape) {
  return shape.stride_h == shape.window_h && shape.stride_w == shape.window_w && shape.pad_h == 0 &&
         shape.pad_w == 0 && static_cast<unsigned>(shape.out_h * shape.stride_h) == shape.in_h &&
         static_cast<unsigned>(shape.out_w * shape.stride_w) == shape.in_w;
}

namespace {

// pool_forward_kernel over every output (in packs of kVec channels in NHWC), writing y, or with
// kPositions each window's first maximum's position.
template <bool kMax, bool kPositions>
void launch_pool_forward_kernel(cudaStream_t stream, DataType type, const void* x, void* y, uint8_t* positions,
                                const PoolShape& shape, bool nhwc) {
  const size_t outputs = static_cast<size_t>(shape.n) * shape.c * shape.out_h * shape.out_w;
  if (outputs == 0) return;
  with_storage_type(type, kPositions ? "max_pool_positions" : "pool_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* inputs = static_cast<const T*>(x);
    T* result = static_cast<T*>(y);
    auto launch = [&](auto nhwc_tag, auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const unsigned threads = static_cast<unsigned>(outputs / kVec);
      pool_forward_kernel<T, decltype(nhwc_tag)::value, kVec, kMax, kPositions>
          <<<grid_for(threads), kBlockSize, 0, stream>>>(inputs, result, positions, shape, threads);
    };
    if (!nhwc) return launch(std::false_type{}, std::integral_constant<int, 1>{});
    // 16-bit threads take a pack of channels of one pixel (they share the window).
    const void* output = kPositions ? static_cast<const void*>(positions) : static_cast<const void*>(result);
    with_pack_width<T>(pack_width<T>(shape.c, {inputs, output}), [&](auto vec) { launch(std::true_type{}, vec); });
  });
}

}  // namespace

size_t max_pool_positions_bytes(const PoolShape& shape) {
  return static_cast<size_t>(shape.n) * shape.c * shape.out_h * shape.out_w;
}

bool max_pool_positions_fit(const PoolShape& shape) {
  return static_cast<unsigned>(shape.window_h) * static_cast<unsigned>(shape.window_w) <= kNoPosition;
}

void launch_pool_backward(cudaStream_t stream, DataType type, const void* x, const void* dy, void* dx,
                          const PoolShape& shape, bool nhwc, PoolBackwardKernel kernel, bool max,
                          uint8_t* positions) {
  const bool tiled = kernel == PoolBackwardKernel::tiled, two_pass = kernel == PoolBackwardKernel::two_pass;
  if (tiled && !(max && pool_tiles_exactly(shape)))
    throw RuntimeError("max_pool_backward_tiled: only max pooling whose windows tile the input");
  if (two_pass && !(max && positions != nullptr && max_pool_positions_fit(shape)))
    throw RuntimeError("max_pool_backward two-pass: only max pooling with a positions buffer and at most 255 "
                       "positions in a window");
  const unsigned columns = nhwc ? shape.in_w * shape.c : shape.in_h * shape.in_w;
  const unsigned rows = nhwc ? shape.n * shape.in_h : shape.n * shape.c;
  if (columns == 0 || rows == 0) return;
  if (two_pass) launch_pool_forward_kernel<true, true>(stream, type, x, nullptr, positions, shape, nhwc);
  with_storage_type(type, tiled ? "max_pool_backward_tiled" : "pool_backward_gather", [&](auto tag) {
    using T = decltype(tag);
    const T* inputs = static_cast<const T*>(x);
    const T* gradients = static_cast<const T*>(dy);
    T* result = static_cast<T*>(dx);
    if (tiled) {
      auto launch = [&](auto nhwc_tag, auto vec) {
        constexpr int kVec = decltype(vec)::value;
        const size_t windows = static_cast<size_t>(shape.n) * shape.c / kVec * shape.out_h * shape.out_w;
        max_pool_backward_tiled_kernel<T, decltype(nhwc_tag)::value, kVec>
            <<<grid_for(windows), kBlockSize, 0, stream>>>(inputs, gradients, result, shape, windows);
      };
      if (!nhwc) return launch(std::false_type{}, std::integral_constant<int, 1>{});
      // 16 bytes of channels per thread where the channel count and addresses allow.
      constexpr int kWide = 16 / static_cast<int>(sizeof(T));
      if (shape.c % kWide == 0 && aligned_to({inputs, gradients, result}, 16))
        return launch(std::true_type{}, std::integral_constant<int, kWide>{});
      return launch(std::true_type{}, std::integral_constant<int, 1>{});
    }
    auto launch = [&](auto nhwc_tag, auto vec) {
      constexpr int kVec = decltype(vec)::value;
      constexpr bool kNhwc = decltype(nhwc_tag)::value;
      const unsigned threads = columns / kVec;
      const dim3 grid((threads + kBlockSize - 1) / kBlockSize, std::min(rows, 65535u));
      auto run = [&](auto source, auto relu) {
        pool_backward_gather_kernel<T, kNhwc, kVec, decltype(source)::value, decltype(relu)::value>
            <<<grid, kBlockSize, 0, stream>>>(inputs, gradients, positions, result, shape);
      };
      auto run_source = [&](auto source) {
        if (shape.relu_input) return run(source, std::true_type{});
        run(source, std::false_type{});
      };
      if (two_pass) return run_source(std::integral_constant<PoolGather, PoolGather::max_from_positions>{});
      if (max) return run_source(std::integral_constant<PoolGather, PoolGather::max_rescan>{});
      run_source(std::integral_constant<PoolGather, PoolGather::average>{});
    };
    if (!nhwc) return launch(std::false_type{}, std::integral_constant<int, 1>{});
    // 16-bit threads take a pack of channels of one pixel (they share the windows); the positions
    // are read kVec bytes at a time.
    with_pack_width<T>(pack_width<T>(shape.c, {inputs, gradients, result, positions}),
                       [&](auto vec) { launch(std::true_type{}, vec); });
  });
  DPB_CUDA_CHECK_LAUNCH(pool_backward);
}

void launch_pool_forward(cudaStream_t stream, DataType type, const void* x, void* y, const PoolShape& shape,
                         bool nhwc, bool max) {
  if (max) {
    launch_pool_forward_kernel<true, false>(stream, type, x, y, nullptr, shape, nhwc);
  } else {
    launch_pool_forward_kernel<false, false>(stream, type, x, y, nullptr, shape, nhwc);
  }
  DPB_CUDA_CHECK_LAUNCH(pool_forward);
}

void launch_dropout(cudaStream_t stream, DataType type, const void* in, void* out, size_t n,
                    float rate, uint64_t seed, uint64_t first_index, const int32_t* step) {
  if (n == 0) return;
  const uint32_t threshold = dropout_threshold(rate);
  const float keep_scale = dropout_keep_scale(rate);  // rounded once, as the reference rounds it
  with_storage_type(type, "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* source = static_cast<const T*>(in);
    T* target = static_cast<T*>(out);
    // Any n: the kernel finishes the elements past the last whole pack one by one.
    const size_t any_length = 0;
    with_pack_width<T>(pack_width<T>(any_length, {source, target}), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      // Two packs a thread; at least one thread per element of the tail.
      const size_t threads = std::max<size_t>((n / kVec + 1) / 2, n % kVec);
      dropout_kernel<T, kVec><<<grid_for(threads), kBlockSize, 0, stream>>>(
          source, target, n, threshold, keep_scale, seed, first_index, step);
    });
  });
  DPB_CUDA_CHECK_LAUNCH(dropout_kernel);
}

void launch_copy_rows(cudaStream_t stream, const void* src, size_t src_stride, void* dst,
                      size_t dst_stride, size_t row_length, size_t rows, size_t element_bytes) {
  if (element_bytes != 2 && element_bytes != 4) {
    throw RuntimeError("copy_rows: elements of " + std::to_string(element_bytes) +
                       " bytes (2 or 4 supported)");
  }
  const size_t total_elements = row_length * rows;
  if (total_elements == 0) return;
  // The widest word dividing every row, both strides and both addresses.
  auto launch = [&](auto word_tag) {
    using Word = decltype(word_tag);
    constexpr size_t kWord = sizeof(Word);
    const size_t per_element = element_bytes;
    const bool fits = (row_length * per_element) % kWord == 0 &&
                      (src_stride * per_element) % kWord == 0 &&
                      (dst_stride * per_element) % kWord == 0 && aligned_to({src, dst}, kWord);
    if (!fits) return false;
    const size_t words = row_length * per_element / kWord;
    const size_t total = words * rows;
    copy_rows_kernel<Word><<<grid_for(total), kBlockSize, 0, stream>>>(
        static_cast<const Word*>(src), src_stride * per_element / kWord, static_cast<Word*>(dst),
        dst_stride * per_element / kWord, words, total);
    return true;
  };
  if (!(launch(uint4{}) || launch(uint2{}) || launch(0u) ||
        launch(static_cast<unsigned short>(0)))) {
    throw RuntimeError("copy_rows: pointers not aligned to their elements");
  }
  DPB_CUDA_CHECK_LAUNCH(copy_rows_kernel);
}

}  // namespace dpbench::cuda_kernels
