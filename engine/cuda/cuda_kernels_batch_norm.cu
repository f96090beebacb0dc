// Batch normalisation in training mode (and, in one pass, in inference mode), optionally with the following ReLU fused in, for NCHW and
// NHWC alike (cuDNN's legacy kernels are slow in NCHW and far slower in NHWC), on x, y, dy and dx
// stored as fp32, fp16 or bf16. Every sum and statistic is fp32 or double whatever the storage:
// 16-bit values are widened on load and rounded once (to nearest) on store, so a 16-bit call does
// the fp32 call's arithmetic on rounded inputs. The op is bound by memory, so each call reads its
// tensors as few times as the arithmetic allows, in 16-byte vectors where it can:
//   forward:  statistics (read x) -> per-channel finalize -> normalise (read x, and the residual
//             where a ResNet block's shortcut is added in the same pass; write y)
//   backward: reduction (read x, dy; with a residual also y, for relu's mask, and write the
//             residual's gradient, the masked dy) -> per-channel finalize -> dx (read x, and dy
//             or the residual's gradient where it was written; write dx)
// Without a residual, relu's mask y > 0 is a step function of x, which the forward's finalize
// finds and saves (see "relu's mask as a threshold on x"), so the backward never reads y: in
// ResNet-50 that is a third of the reduction's and a quarter of the dx pass's traffic on two of
// every bottleneck's three batch norms.
// Both sweeps of a call walk the tensor with one tiling (Tiling below): many blocks per channel,
// each leaving a partial result per channel in the workspace, which a small finalize kernel then
// combines in double. Kernels first, launchers after.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_launch.cuh"
#include "engine/cuda/cuda_packs.cuh"
#include "engine/errors.h"

namespace dpbench::cuda_kernels {
namespace {

constexpr int kThreads = kBlockSize;
// About 8 resident blocks on each of the 132 SMs of an H100 or H200. A constant rather than the
// device's SM count: the tiling, hence the summation order and the result bits, then depends on
// the shape alone and is the same on every GPU.
constexpr long long kTargetBlocks = 1024;
// Below this many items per thread a block spends more on merging and writing its partial result
// than on reading, so small tensors get fewer, fuller blocks.
constexpr long long kMinItemsPerThread = 8;
constexpr long long kMaxChunks = 1024;  // partial results per channel (and a legal gridDim.y)
constexpr int kMaxLanesX = 32;          // NHWC: channel vectors per block, 512 contiguous bytes
// Items a thread loads before using any: one load in flight per thread leaves the memory system
// idle much of the time, especially with scalar loads.
constexpr int kUnroll = 4;

// How every pass of one call splits the tensor. An item is `vec` consecutive elements, moved by
// one load or store: 16 bytes (a float4, or 8 halves) where the layout and the pointers allow;
// 16-bit tensors next try 8 and 4 bytes; else one element. The vector width decides the walking
// order, hence the result bits, so fp32 keeps exactly its two widths (float4 or scalar).
// NHWC: the tensor is rows of c channels. blockIdx.x picks a tile of lanes_x channel vectors,
//   blockIdx.y a chunk of rows; thread (lane_x, lane_y) owns channel vector
//   blockIdx.x * lanes_x + lane_x and walks rows lane_y, lane_y + lanes_y, ... of the chunk.
//   Threads map to channels, so a warp reads contiguous runs of a row (or whole rows when c is
//   small) and each thread keeps its own channels' state in registers.
// NCHW: each channel is n planes of h*w elements. blockIdx.x is the channel, blockIdx.y a chunk of
//   the channel's items in (image, pixel) order; thread t walks items t, t + 256, ... of the
//   chunk (lanes_x = 1, lanes_y = 256: the whole block shares one channel).
struct Tiling {
  bool nhwc = false;
  int vec = 1;
  int channels = 0;
  int lanes_x = 1, lanes_y = kThreads;
  int channel_tiles = 0;          // gridDim.x
  int chunks = 0;                 // gridDim.y, and the partial results per channel
  long long items = 0;            // per channel, in the walking order
  long long chunk_items = 0;      // per chunk; the last chunk may have fewer
  long long elements = 0;         // per channel: n * h * w
  long long row_vecs = 0;         // NHWC: c / vec
  long long plane_vecs = 0;       // NCHW: h * w / vec
  long long image_vecs = 0;       // NCHW: c * h * w / vec
  // A thread's step to its next item: offset += step_offset; in NCHW the pixel within the plane
  // moves by step_pixels, and crossing the plane's end adds wrap_offset (to the next image).
  long long step_offset = 0, step_pixels = 0, wrap_offset = 0;
};

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

Tiling make_tiling(const Tensor4& shape, int vec) {
  Tiling t;
  t.nhwc = shape.format == DataFormat::nhwc;
  t.vec = vec;
  t.channels = shape.c;
  const long long pixels = static_cast<long long>(shape.h) * shape.w;
  t.elements = shape.n * pixels;
  if (t.nhwc) {
    t.row_vecs = shape.c / vec;
    t.channel_tiles = static_cast<int>(ceil_div(t.row_vecs, kMaxLanesX));
    // Spread the channel vectors evenly over the tiles (c = 33 gives 17 + 16, not 32 + 1).
    t.lanes_x = static_cast<int>(ceil_div(t.row_vecs, t.channel_tiles));
    t.lanes_y = kThreads / t.lanes_x;
    t.items = t.elements;
    t.step_offset = t.lanes_y * t.row_vecs;
  } else {
    t.plane_vecs = pixels / vec;
    t.image_vecs = shape.c * t.plane_vecs;
    t.channel_tiles = shape.c;
    t.items = shape.n * t.plane_vecs;
    t.step_pixels = kThreads % t.plane_vecs;
    t.step_offset = (kThreads / t.plane_vecs) * t.image_vecs + t.step_pixels;
    t.wrap_offset = t.image_vecs - t.plane_vecs;
  }
  const long long wanted = ceil_div(kTargetBlocks, t.channel_tiles);
  const long long worthwhile = ceil_div(t.items, t.lanes_y * kMinItemsPerThread);
  const long long chunks = std::clamp(std::min(wanted, worthwhile), 1LL, kMaxChunks);
  t.chunk_items = ceil_div(t.items, chunks);
  t.chunks = static_cast<int>(ceil_div(t.items, t.chunk_items));  // none left empty
  return t;
}

// The workspace: two partial results per (channel, chunk), laid out channel-major so that the
// finalize kernel reads each channel's partials contiguously, and three per-channel coefficients
// the finalize kernel leaves for the element-wise pass.
struct Workspace {
  float* partial_a;  // forward: chunk sums of x - shift; backward: chunk sums of dy'
  float* partial_b;  // forward: of (x - shift)^2; backward: of dy' (x - mean)
  float* coefficient[3];
};

size_t workspace_floats(const Tiling& t) {
  return (2 * static_cast<size_t>(t.chunks) + 3) * static_cast<size_t>(t.channels);
}

Workspace carve_workspace(const Tiling& t, void* memory) {
  float* at = static_cast<float*>(memory);
  const size_t partials = static_cast<size_t>(t.chunks) * t.channels;
  Workspace w;
  w.partial_a = at;
  w.partial_b = at + partials;
  for (int i = 0; i < 3; ++i) {
    w.coefficient[i] = at + 2 * partials + static_cast<size_t>(i) * t.channels;
  }
  return w;
}

// ---- device helpers --------------------------------------------------------------------------

// Where one thread works: its place in the block's merge tree (threads with the same lane_x share
// channels), its first channel, and a cursor over the offsets (in items) of the items it visits.
template <bool kNhwc>
struct ThreadWork {
  int lane_x = 0, lane_y = 0;
  int first_channel = 0;  // NHWC: lane k of an item is channel first_channel + k
  bool active = false;
  long long item = 0, end = 0, offset = 0, pixel = 0;

  __device__ bool more() const { return item < end; }
  __device__ void advance(const Tiling& t) {
    if constexpr (kNhwc) {
      item += t.lanes_y;
      offset += t.step_offset;
    } else {
      item += kThreads;
      offset += t.step_offset;
      pixel += t.step_pixels;
      if (pixel >= t.plane_vecs) {  // at most once: both terms are below plane_vecs
        pixel -= t.plane_vecs;
        offset += t.wrap_offset;
      }
    }
  }
};

template <bool kNhwc>
__device__ ThreadWork<kNhwc> place_thread(const Tiling& t) {
  ThreadWork<kNhwc> w;
  const long long chunk_start = static_cast<long long>(blockIdx.y) * t.chunk_items;
  const long long chunk_end = min(chunk_start + t.chunk_items, t.items);
  if constexpr (kNhwc) {
    w.lane_x = threadIdx.x % t.lanes_x;
    w.lane_y = threadIdx.x / t.lanes_x;
    const long long channel_vec = static_cast<long long>(blockIdx.x) * t.lanes_x + w.lane_x;
    w.active = w.lane_y < t.lanes_y && channel_vec < t.row_vecs;
    w.first_channel = static_cast<int>(channel_vec * t.vec);
    w.item = chunk_start + w.lane_y;
    w.offset = w.item * t.row_vecs + channel_vec;
  } else {
    w.lane_y = threadIdx.x;
    w.active = true;
    w.first_channel = blockIdx.x;
    w.item = chunk_start + threadIdx.x;
    const long long image = w.item / t.plane_vecs;
    w.pixel = w.item % t.plane_vecs;
    w.offset = image * t.image_vecs + static_cast<long long>(blockIdx.x) * t.plane_vecs + w.pixel;
  }
  w.end = w.active ? chunk_end : w.item;
  return w;
}

// Calls visit(offsets, present) for groups of kUnroll items; present[u] says whether offsets[u]
// is one of this thread's items (the last group may be short). Visitors load a whole group before
// using any of it.
template <bool kNhwc, typename Visit>
__device__ __forceinline__ void walk_items(ThreadWork<kNhwc>& work, const Tiling& t, Visit visit) {
  while (work.more()) {
    long long offsets[kUnroll];
    bool present[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      present[u] = work.more();
      offsets[u] = work.offset;
      if (present[u]) work.advance(t);
    }
    visit(offsets, present);
  }
}

// What a pass reads of a group of items, all loaded (load(offsets, present)) before any is used.
// The forward passes read x; input(u, k) is element k of item u, widened to float.
template <typename T, int kVec>
struct ForwardGroup {
  const T* x;
  Pack<T, kVec> xs[kUnroll];

  __device__ explicit ForwardGroup(const T* x) : x(x) {}
  __device__ __forceinline__ void load(const long long* offsets, const bool* present) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (present[u]) xs[u] = load_pack<kVec>(x, offsets[u]);
  }
  __device__ __forceinline__ float input(int u, int k) const { return element(xs[u], k); }
};

// Where the backward's relu mask comes from: no relu; the stored y (a forward that added a
// residual, on which the mask depends too); x, through the forward's threshold (ReluMaskArrays).
enum class ReluMask { none, stored, threshold };

// T's bit patterns ordered by value: keys 0 .. 2^bits - 1 run from the negative NaNs through -inf,
// -0, +0, +inf to the positive NaNs.
template <typename T>
struct OrderedBits {
  static constexpr unsigned kBits = 8 * sizeof(T);
  static constexpr unsigned kSign = 1u << (kBits - 1);
  static constexpr unsigned kAll = kSign | (kSign - 1);
  static constexpr unsigned kInfinity = std::is_same_v<T, float> ? 0x7f800000u
                                        : std::is_same_v<T, __half> ? 0x7c00u : 0x7f80u;

  __device__ static unsigned key(unsigned pattern) {
    return (pattern & kSign) ? (~pattern & kAll) : pattern + kSign;
  }
  __device__ static float value(unsigned key) {
    const unsigned pattern = key >= kSign ? key - kSign : (~key & kAll);
    if constexpr (std::is_same_v<T, float>) {
      return __uint_as_float(pattern);
    } else if constexpr (std::is_same_v<T, __half>) {
      return __half2float(__ushort_as_half(static_cast<unsigned short>(pattern)));
    } else {
      return __uint_as_float(pattern << 16);
    }
  }
};

// relu's mask as a threshold on x, per channel: y > 0 exactly where x * direction > threshold
// (relu_mask_step). The second halves of the saved arrays (batch_norm_saved_floats); the forward
// writes them (F = float), the backward reads them (F = const float).
template <typename F>
struct ReluMaskArrays {
  F *direction, *threshold;
};

template <typename F>
ReluMaskArrays<F> relu_mask_arrays(int channels, F* saved_mean, F* saved_inv_std) {
  return {saved_inv_std + channels, saved_mean + channels};
}

// The backward passes read x, dy and, with ReluMask::stored, y; gradient(u, k) is dy' of element
// k of item u: dy, masked by y > 0 with relu.
template <typename T, bool kNhwc, int kVec, ReluMask kMask>
struct BackwardGroup {
  static constexpr int kLanes = kNhwc ? kVec : 1;
  const T *x, *y, *dy;
  float direction[kLanes], threshold[kLanes];  // ReluMask::threshold only
  Pack<T, kVec> xs[kUnroll], gradients[kUnroll], outputs[kUnroll];

  // `active`: whether this thread has channels (first_channel is one); an idle one loads nothing.
  __device__ BackwardGroup(const T* x, const T* y, const T* dy, bool active, int first_channel,
                           const ReluMaskArrays<const float>& mask)
      : x(x), y(y), dy(dy) {
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      const bool wanted = kMask == ReluMask::threshold && active;
      direction[k] = wanted ? mask.direction[first_channel + k] : 0.0f;
      threshold[k] = wanted ? mask.threshold[first_channel + k] : 0.0f;
    }
  }
  __device__ __forceinline__ void load(const long long* offsets, const bool* present) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!present[u]) continue;
      xs[u] = load_pack<kVec>(x, offsets[u]);
      gradients[u] = load_pack<kVec>(dy, offsets[u]);
      if (kMask == ReluMask::stored) outputs[u] = load_pack<kVec>(y, offsets[u]);
    }
  }
  __device__ __forceinline__ float input(int u, int k) const { return element(xs[u], k); }
  __device__ __forceinline__ float gradient(int u, int k) const {
    const int lane = kNhwc ? k : 0;
    bool passed = true;
    if (kMask == ReluMask::stored) passed = element(outputs[u], k) > 0.0f;
    if (kMask == ReluMask::threshold) passed = input(u, k) * direction[lane] > threshold[lane];
    return passed ? element(gradients[u], k) : 0.0f;
  }
};

// walk_items with the loads done: loads each group into `group`, then calls visit(u, offset) for
// each item u of it that is present, offset being that item's.
template <bool kNhwc, typename Group, typename Visit>
__device__ __forceinline__ void walk_groups(ThreadWork<kNhwc>& work, const Tiling& t, Group& group,
                                            Visit visit) {
  walk_items(work, t, [&](const long long* offsets, const bool* present) {
    group.load(offsets, present);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (present[u]) visit(u, offsets[u]);
    }
  });
}

// Two running sums per channel (forward: of x - shift and its square; backward: of dy' and of
// dy' (x - mean)); merging is addition, so the block's merge tree costs little beside the loads.
struct Sums {
  float first, second;
};

__device__ __forceinline__ Sums merge(const Sums& a, const Sums& b) {
  return {a.first + b.first, a.second + b.second};
}

// The two partial results a state leaves in the workspace (partial_a, partial_b).
__device__ __forceinline__ float2 partials_of(const Sums& s) { return {s.first, s.second}; }

// Merges the states of the threads that share lane_x (the same channels) into the thread with
// lane_y == 0, along a fixed tree, so results are bit-reproducible. Every thread of the block
// calls it; threads beyond lanes_x * lanes_y only wait.
template <typename State, int kLanes>
__device__ void merge_over_rows(State (&state)[kLanes], int lane_y, int lanes_x, int lanes_y,
                                State* shared) {
  const int slot = threadIdx.x;  // == lane_y * lanes_x + lane_x
  if (lane_y < lanes_y) {
#pragma unroll
    for (int k = 0; k < kLanes; ++k) shared[slot * kLanes + k] = state[k];
  }
  __syncthreads();
  int half = 1;
  while (half < lanes_y) half *= 2;
  for (half /= 2; half > 0; half /= 2) {
    if (lane_y < half && lane_y + half < lanes_y) {
      const int other = slot + half * lanes_x;
#pragma unroll
      for (int k = 0; k < kLanes; ++k) {
        state[k] = merge(state[k], shared[other * kLanes + k]);
        shared[slot * kLanes + k] = state[k];
      }
    }
    __syncthreads();
  }
}

// Merges the block's states (merge_over_rows) and leaves the two partial results of each of this
// thread's channels for this chunk at (channel, blockIdx.y). Every thread of the block calls it.
template <bool kNhwc, typename State, int kLanes>
__device__ void store_block_partials(State (&state)[kLanes], const ThreadWork<kNhwc>& work,
                                     const Tiling& t, State* shared, float* partial_a,
                                     float* partial_b) {
  merge_over_rows(state, work.lane_y, t.lanes_x, t.lanes_y, shared);
  if (work.lane_y == 0 && work.active) {
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      const size_t at = static_cast<size_t>(work.first_channel + k) * t.chunks + blockIdx.y;
      const float2 partials = partials_of(state[k]);
      partial_a[at] = partials.x;
      partial_b[at] = partials.y;
    }
  }
}

// This thread's lanes' values of the four per-channel arrays an element-wise pass reads:
// (*lanes[j])[k] = per_channel[j][first_channel + k].
template <int kLanes>
__device__ __forceinline__ void load_lanes(int first_channel, const float* const (&per_channel)[4],
                                           float (*const (&lanes)[4])[kLanes]) {
#pragma unroll
  for (int k = 0; k < kLanes; ++k) {
#pragma unroll
    for (int j = 0; j < 4; ++j) (*lanes[j])[k] = per_channel[j][first_channel + k];
  }
}

// Sum over the warp, the same value in every lane; a fixed order, so reproducible.
__device__ __forceinline__ double warp_sum(double value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Sum over a block of kThreads threads, the same value in every thread; a fixed order (warps, then
// the warps' totals in turn), so reproducible. Every thread of the block calls it.
__device__ double block_sum(double value) {
  __shared__ double warp_totals[kThreads / 32];
  value = warp_sum(value);
  if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = value;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int warp = 0; warp < kThreads / 32; ++warp) total += warp_totals[warp];
  __syncthreads();  // a next call rewrites the totals
  return total;
}

// ---- forward ---------------------------------------------------------------------------------

// Per (channel, chunk): the sums of d = x - shift and of d^2 over the chunk, shift being the
// channel's first element (row 0 in NHWC, image 0's first pixel in NCHW). Shifted by one of its own
// values, d is of the order of the channel's spread, so E[d^2] - E[d]^2 keeps the variance's
// accuracy when the mean is far above the spread (unshifted, fp32 sums would lose it all), and
// merging partial results is addition: Welford's update and merge, which need a division per merge
// and channel, made the statistics sweep the slowest batch-norm pass per byte. (The price: a first
// element k standard deviations from the mean scales the sums' rounding by about k^2, which a
// convolution's outputs, tens of thousands of values per channel, do not come near.) Chunk 0's
// block also leaves the shifts in `shifts` for the finalize kernel.
template <typename T, bool kNhwc, int kVec>
__global__ void __launch_bounds__(kThreads)
    batch_norm_statistics_kernel(Tiling t, const T* x, float* partial_sum, float* partial_sum_sq, float* shifts) {
  constexpr int kLanes = kNhwc ? kVec : 1;  // channels per thread
  __shared__ Sums shared[kThreads * kLanes];
  ThreadWork<kNhwc> work = place_thread<kNhwc>(t);
  float shift[kLanes];
  Sums state[kLanes];
#pragma unroll
  for (int k = 0; k < kLanes; ++k) {
    shift[k] = 0.0f;
    state[k] = {0.0f, 0.0f};
  }
  if (work.active) {
    // The item at offset 0 of this thread's channels: NHWC row 0 of its channel vector; NCHW the
    // channel's first item.
    const long long first = kNhwc ? work.first_channel / kVec : static_cast<long long>(blockIdx.x) * t.plane_vecs;
    const Pack<T, kVec> firsts = load_pack<kVec>(x, first);
#pragma unroll
    for (int k = 0; k < kLanes; ++k) shift[k] = element(firsts, k);
  }
  ForwardGroup<T, kVec> group(x);
  walk_groups(work, t, group, [&](int u, long long) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int lane = kNhwc ? k : 0;
      const float d = group.input(u, k) - shift[lane];
      state[lane].first += d;
      state[lane].second = fmaf(d, d, state[lane].second);
    }
  });
  store_block_partials(state, work, t, shared, partial_sum, partial_sum_sq);
  if (blockIdx.y == 0 && work.lane_y == 0 && work.active) {
#pragma unroll
    for (int k = 0; k < kLanes; ++k) shifts[work.first_channel + k] = shift[k];
  }
}

// The normalised value of x: scale * ((x - mean_hi) - mean_lo) + beta, with the mean to double
// precision as a float pair. x - mean_hi is exact when the two are close, which is when it
// matters. The one definition of the forward's arithmetic, which relu_mask_step evaluates too.
__device__ __forceinline__ float normalised(float x, float scale, float mean_hi, float mean_lo, float beta) {
  return fmaf(scale, (x - mean_hi) - mean_lo, beta);
}

// y from the values before the activation: max(0, value) with relu, rounded to T. Rounding after
// the ReLU equals rounding before it (rounding keeps the sign), so y > 0 where the value rounds
// to a positive T.
template <typename T, int kVec, bool kRelu>
__device__ __forceinline__ Pack<T, kVec> activated(float (&values)[kVec]) {
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    if (kRelu) values[k] = values[k] > 0.0f ? values[k] : 0.0f;
  }
  return round_pack<T, kVec>(values);
}

// ---- relu's mask as a threshold on x -----------------------------------------------------------
// Without a residual, y = activated(normalised(x)) is monotone in x: the subtractions are, the fma
// is for either sign of scale, and the ReLU and the rounding to T are. So over T's values in
// increasing order y > 0 is false, then true (scale > 0), true, then false (scale < 0), or the same
// for every finite x (scale 0; infinite x give NaN, never > 0). A warp of the forward's finalize
// finds the step by a 32-way search over T's values and leaves it as a direction (1, -1 or 0) and a
// threshold: y > 0 exactly where x * direction > threshold, also for infinite and NaN x (no step
// falls between -0 and +0: both give y = 0; with direction 0 an infinite x makes NaN, which fails
// as its y does). The backward masks with that, one multiplication and one comparison per
// element, instead of reading y. (For finite statistics; non-finite ones make a step that is lost
// anyway.)

struct ReluMaskStep {
  float direction, threshold;  // y > 0 exactly where x * direction > threshold
};

// The step of one channel's coefficients, as the section above says. Called by all 32 lanes of a
// warp with the same arguments; every lane returns the result.
template <typename T>
__device__ ReluMaskStep relu_mask_step(float scale, float mean_hi, float mean_lo, float beta) {
  using Bits = OrderedBits<T>;
  auto passes = [&](unsigned key) {
    float values[1] = {normalised(Bits::value(key), scale, mean_hi, mean_lo, beta)};
    return element(activated<T, 1, true>(values), 0) > 0.0f;
  };
  const ReluMaskStep never{0.0f, __int_as_float(0x7f800000)};  // 0 * x > +inf: never
  if (!(scale > 0.0f) && !(scale < 0.0f)) {  // 0 (every finite x alike; an infinite one gives NaN), or NaN
    return passes(Bits::key(0u)) ? ReluMaskStep{0.0f, -1.0f} : never;
  }
  const bool rising = scale > 0.0f;
  unsigned low = Bits::key(Bits::kInfinity | Bits::kSign), high = Bits::key(Bits::kInfinity);
  if (!passes(rising ? high : low)) return never;
  // found(key) = (passes(key) == rising) is false at `low` and true at `high`, and changes once.
  // Each round the lanes try 32 keys spread over (low, high], the last being `high` itself.
  const unsigned lane = threadIdx.x % 32;
  while (high - low > 1) {
    const unsigned long long span = high - low;
    const unsigned tried = low + static_cast<unsigned>((span * (lane + 1) + 31) / 32);
    const unsigned found = __ballot_sync(0xffffffffu, passes(tried) == rising);
    const int first = __ffs(found) - 1;  // lane 31 tried `high`: found is never 0
    const unsigned below = __shfl_sync(0xffffffffu, tried, first > 0 ? first - 1 : 0);
    high = __shfl_sync(0xffffffffu, tried, first);
    if (first > 0) low = below;
  }
  // Rising: y > 0 from key `high` on, x > value(low). Falling: below key `high`, -x > -value(high).
  return rising ? ReluMaskStep{1.0f, Bits::value(low)} : ReluMaskStep{-1.0f, -Bits::value(high)};
}

// What a forward finalize leaves for one channel from its mean and biased variance: the saved
// statistics, the normalise pass's coefficients (see batch_norm_forward_finalize_kernel) and, where
// `mask` has arrays, relu's mask as a threshold on x. Called by a whole warp with the same
// arguments (the search needs it); lane 0 stores, after every lane has read its inputs.
template <typename T>
__device__ void store_forward_coefficients(long long channel, double mean, double variance, const float* gamma,
                                           const float* beta, float epsilon, float* saved_mean, float* saved_inv_std,
                                           float* scale, float* mean_hi, float* mean_lo, ReluMaskArrays<float> mask) {
  const double inv_std = 1.0 / sqrt(variance + static_cast<double>(epsilon));
  const float hi = static_cast<float>(mean);
  const float lo = static_cast<float>(mean - hi);
  const float channel_scale = static_cast<float>(gamma[channel] * inv_std);
  ReluMaskStep step{};
  if (mask.direction != nullptr) step = relu_mask_step<T>(channel_scale, hi, lo, beta[channel]);
  __syncwarp();  // the caller's shifts may be mean_hi
  if (threadIdx.x % 32 != 0) return;
  saved_mean[channel] = hi;
  saved_inv_std[channel] = static_cast<float>(inv_std);
  scale[channel] = channel_scale;
  mean_hi[channel] = hi;
  mean_lo[channel] = lo;
  if (mask.direction != nullptr) {
    mask.direction[channel] = step.direction;
    mask.threshold[channel] = step.threshold;
  }
}

// One block per channel (a warp per channel left most of a step's 53 finalize kernels in
// ResNet-50 waiting on its lanes' serial loads of up to 1,024 chunks) sums the chunks' partial
// sums in double: with s1, s2 the sums of d = x - shift and d^2 over the channel's M elements,
// mean = shift + s1 / M and the biased variance s2 / M - (s1 / M)^2. Leaves the saved statistics
// and, for the normalise pass, scale = gamma * inv_std and the mean to double precision as a float
// pair (hi + lo), so y keeps its accuracy when the mean is far above the spread. `shifts` may be
// the mean_hi array: each channel's shift is read before its coefficients are written.
template <typename T>
__global__ void batch_norm_forward_finalize_kernel(Tiling t, const float* partial_sum,
                                                   const float* partial_sum_sq, const float* shifts,
                                                   const float* gamma, const float* beta, float epsilon,
                                                   float* saved_mean, float* saved_inv_std, float* scale,
                                                   float* mean_hi, float* mean_lo, ReluMaskArrays<float> mask) {
  const long long channel = blockIdx.x;
  double sum = 0.0, sum_sq = 0.0;
  for (int chunk = threadIdx.x; chunk < t.chunks; chunk += kThreads) {
    sum += partial_sum[channel * t.chunks + chunk];
    sum_sq += partial_sum_sq[channel * t.chunks + chunk];
  }
  sum = block_sum(sum);
  sum_sq = block_sum(sum_sq);
  if (threadIdx.x < 32) {  // warp 0
    const double elements = static_cast<double>(t.elements);
    const double mean_offset = sum / elements;
    const double variance = fmax(0.0, sum_sq / elements - mean_offset * mean_offset);  // biased
    const double mean = static_cast<double>(shifts[channel]) + mean_offset;
    store_forward_coefficients<T>(channel, mean, variance, gamma, beta, epsilon, saved_mean, saved_inv_std, scale,
                                  mean_hi, mean_lo, mask);
  }
}

// The same coefficients from a convolution's sums (Backend::conv2d_forward_statistics), one warp
// per channel: mean = sum / M and the biased variance sum_sq / M - mean^2 in double, clamped at 0
// (the sums are fp32, so a mean far above the spread loses the variance to cancellation: the
// price of skipping the pass over x, the same as cuDNN's and NVIDIA's MLPerf batch norms pay).
template <typename T>
__global__ void batch_norm_finalize_from_sums_kernel(int channels, double elements, const float* sums,
                                                     const float* gamma, const float* beta, float epsilon,
                                                     float* saved_mean, float* saved_inv_std, float* scale,
                                                     float* mean_hi, float* mean_lo, ReluMaskArrays<float> mask) {
  const int channel = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (channel >= channels) return;  // the whole warp
  const double mean = sums[channel] / elements;
  const double variance = fmax(0.0, sums[channels + channel] / elements - mean * mean);
  store_forward_coefficients<T>(channel, mean, variance, gamma, beta, epsilon, saved_mean, saved_inv_std, scale,
                                mean_hi, mean_lo, mask);
}

// The normalise passes read x and, with a residual, z: item u's element k as input(u, k) and
// residual(u, k).
template <typename T, int kVec, bool kAdd>
struct NormaliseGroup {
  const T *x, *z;
  Pack<T, kVec> xs[kUnroll], zs[kUnroll];

  __device__ NormaliseGroup(const T* x, const T* z) : x(x), z(z) {}
  __device__ __forceinline__ void load(const long long* offsets, const bool* present) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!present[u]) continue;
      xs[u] = load_pack<kVec>(x, offsets[u]);
      if (kAdd) zs[u] = load_pack<kVec>(z, offsets[u]);
    }
  }
  __device__ __forceinline__ float input(int u, int k) const { return element(xs[u], k); }
  __device__ __forceinline__ float residual(int u, int k) const { return element(zs[u], k); }
};

// What the normalise pass adds before the ReLU: nothing, z, or z's own batch norm (the shortcut's,
// from its coefficients).
enum Residual : int { kNoResidual, kPlainResidual, kNormalisedResidual };

// The per-channel coefficients a normalise pass reads for one batch norm (the finalize kernel's).
struct NormaliseCoefficients {
  const float *scale, *mean_hi, *mean_lo, *beta;
};

// y = activated(normalised(x) (+ z, or + z's batch norm)).
template <typename T, bool kNhwc, int kVec, bool kRelu, int kResidual>
__global__ void __launch_bounds__(kThreads)
    batch_norm_normalise_kernel(Tiling t, const T* x, const T* z, NormaliseCoefficients x_norm,
                                NormaliseCoefficients z_norm, T* y) {
  constexpr int kLanes = kNhwc ? kVec : 1;
  ThreadWork<kNhwc> work = place_thread<kNhwc>(t);
  if (!work.active) return;
  float lane_scale[kLanes], lane_hi[kLanes], lane_lo[kLanes], lane_beta[kLanes];
  load_lanes(work.first_channel, {x_norm.scale, x_norm.mean_hi, x_norm.mean_lo, x_norm.beta},
             {&lane_scale, &lane_hi, &lane_lo, &lane_beta});
  float z_scale[kLanes], z_hi[kLanes], z_lo[kLanes], z_beta[kLanes];
  if (kResidual == kNormalisedResidual)
    load_lanes(work.first_channel, {z_norm.scale, z_norm.mean_hi, z_norm.mean_lo, z_norm.beta},
               {&z_scale, &z_hi, &z_lo, &z_beta});
  NormaliseGroup<T, kVec, kResidual != kNoResidual> group(x, z);
  walk_groups(work, t, group, [&](int u, long long offset) {
    float out[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int lane = kNhwc ? k : 0;
      out[k] = normalised(group.input(u, k), lane_scale[lane], lane_hi[lane], lane_lo[lane], lane_beta[lane]);
      if (kResidual == kPlainResidual) out[k] += group.residual(u, k);
      if (kResidual == kNormalisedResidual)
        out[k] += normalised(group.residual(u, k), z_scale[lane], z_hi[lane], z_lo[lane], z_beta[lane]);
    }
    store_pack(y, offset, activated<T, kVec, kRelu>(out));
  });
}

// A thread's lanes of one InferenceNorm, as y = scale * v + shift (scale = gamma * rsqrt(variance
// + epsilon), shift = beta - scale * mean), worked out once as the thread starts.
template <int kLanes>
struct LaneNorm {
  float scale[kLanes], shift[kLanes];
  __device__ LaneNorm(int first_channel, const InferenceNorm& norm) {
    float mean[kLanes], variance[kLanes];
    load_lanes(first_channel, {norm.gamma, norm.mean, norm.variance, norm.beta}, {&scale, &mean, &variance, &shift});
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      scale[k] *= rsqrtf(variance[k] + norm.epsilon);
      shift[k] = fmaf(-scale[k], mean[k], shift[k]);
    }
  }
};

// Inference (Backend::batch_norm_inference): y = act(norm(x) + residual) with residual 0 (no
// kAdd), z, or z_norm(z) (kNormZ), from given statistics: no statistics sweep, no finalize kernel,
// no workspace; one read of x (and z) and one write of y. Each thread stores only elements it has
// loaded, so y may alias x or z.
template <typename T, bool kNhwc, int kVec, bool kRelu, bool kAdd, bool kNormZ>
__global__ void __launch_bounds__(kThreads)
    batch_norm_inference_kernel(Tiling t, const T* x, InferenceNorm norm, const T* z, InferenceNorm z_norm, T* y) {
  constexpr int kLanes = kNhwc ? kVec : 1;
  ThreadWork<kNhwc> work = place_thread<kNhwc>(t);
  if (!work.active) return;
  const LaneNorm<kLanes> x_lanes(work.first_channel, norm);
  LaneNorm<kLanes> z_lanes = x_lanes;  // unused without kNormZ
  if (kNormZ) z_lanes = LaneNorm<kLanes>(work.first_channel, z_norm);
  NormaliseGroup<T, kVec, kAdd> group(x, z);
  walk_groups(work, t, group, [&](int u, long long offset) {
    float out[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int lane = kNhwc ? k : 0;
      float value = fmaf(x_lanes.scale[lane], group.input(u, k), x_lanes.shift[lane]);
      if (kAdd) value += kNormZ ? fmaf(z_lanes.scale[lane], group.residual(u, k), z_lanes.shift[lane]) : group.residual(u, k);
      out[k] = value;
    }
    store_pack(y, offset, activated<T, kVec, kRelu>(out));
  });
}

// ---- backward --------------------------------------------------------------------------------

// Per (channel, chunk): sum of dy' and of dy' * (x - mean), dy' = dy masked by y > 0 with relu
// (kMask). (x - mean), not x_hat: the finalize kernel applies inv_std once per channel.
// With kSplit, dy' is also stored to d_residual (exact: masking a 16-bit dy needs no rounding),
// the gradient of a residual the forward pass added, which the dx pass then reads in place of dy.
template <typename T, bool kNhwc, int kVec, ReluMask kMask, bool kSplit>
__global__ void __launch_bounds__(kThreads)
    batch_norm_backward_reduce_kernel(Tiling t, const T* x, const T* y, const T* dy,
                                      const float* saved_mean, ReluMaskArrays<const float> mask, float* partial_dy,
                                      float* partial_dy_centred, T* d_residual) {
  constexpr int kLanes = kNhwc ? kVec : 1;
  __shared__ Sums shared[kThreads * kLanes];
  ThreadWork<kNhwc> work = place_thread<kNhwc>(t);
  float lane_mean[kLanes];
  Sums sums[kLanes];
#pragma unroll
  for (int k = 0; k < kLanes; ++k) {
    lane_mean[k] = work.active ? saved_mean[work.first_channel + k] : 0.0f;
    sums[k] = {0.0f, 0.0f};
  }
  BackwardGroup<T, kNhwc, kVec, kMask> group(x, y, dy, work.active, work.first_channel, mask);
  walk_groups(work, t, group, [&](int u, long long offset) {
    float masked[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int lane = kNhwc ? k : 0;
      const float g = group.gradient(u, k);
      masked[k] = g;
      sums[lane].first += g;
      sums[lane].second = fmaf(g, group.input(u, k) - lane_mean[lane], sums[lane].second);
    }
    if (kSplit) store_pack(d_residual, offset, round_pack<T, kVec>(masked));
  });
  store_block_partials(sums, work, t, shared, partial_dy, partial_dy_centred);
}

// One block per channel sums the chunks in double: dbeta = sum dy', dgamma = inv_std *
// sum dy' (x - mean). dx = gamma * inv_std * (dy' - dbeta / M - x_hat * dgamma / M) becomes
// dx = a * dy' + b * (x - mean) + c per channel, with a, b, c left for the dx pass.
__global__ void batch_norm_backward_finalize_kernel(Tiling t, const float* partial_dy,
                                                    const float* partial_dy_centred,
                                                    const float* gamma, const float* saved_inv_std,
                                                    float* dgamma, float* dbeta, float* dy_factor,
                                                    float* centred_factor, float* constant) {
  const long long channel = blockIdx.x;
  double sum_dy = 0.0, sum_dy_centred = 0.0;
  for (int chunk = threadIdx.x; chunk < t.chunks; chunk += kThreads) {
    sum_dy += partial_dy[channel * t.chunks + chunk];
    sum_dy_centred += partial_dy_centred[channel * t.chunks + chunk];
  }
  sum_dy = block_sum(sum_dy);
  sum_dy_centred = block_sum(sum_dy_centred);
  if (threadIdx.x == 0) {
    const double inv_std = saved_inv_std[channel];
    const double a = gamma[channel] * inv_std;
    const double elements = static_cast<double>(t.elements);
    dgamma[channel] = static_cast<float>(sum_dy_centred * inv_std);
    dbeta[channel] = static_cast<float>(sum_dy);
    dy_factor[channel] = static_cast<float>(a);
    centred_factor[channel] =
        static_cast<float>(-a * inv_std * inv_std * sum_dy_centred / elements);
    constant[channel] = static_cast<float>(-a * sum_dy / elements);
  }
}

// dx = a * dy' + b * (x - mean) + c, rounded to T, dy' masked as kMask says (never from y: a
// forward with a residual leaves the masked dy in d_residual for this pass). Each element's dy is
// read by the thread that then writes its dx, so dx may alias dy.
template <typename T, bool kNhwc, int kVec, ReluMask kMask>
__global__ void __launch_bounds__(kThreads)
    batch_norm_dx_kernel(Tiling t, const T* x, const T* dy, const float* saved_mean, ReluMaskArrays<const float> mask,
                         const float* dy_factor, const float* centred_factor, const float* constant, T* dx) {
  static_assert(kMask != ReluMask::stored, "the dx pass never reads y");
  constexpr int kLanes = kNhwc ? kVec : 1;
  ThreadWork<kNhwc> work = place_thread<kNhwc>(t);
  if (!work.active) return;
  float lane_mean[kLanes], lane_a[kLanes], lane_b[kLanes], lane_c[kLanes];
  load_lanes(work.first_channel, {saved_mean, dy_factor, centred_factor, constant},
             {&lane_mean, &lane_a, &lane_b, &lane_c});
  BackwardGroup<T, kNhwc, kVec, kMask> group(x, nullptr, dy, true, work.first_channel, mask);
  walk_groups(work, t, group, [&](int u, long long offset) {
    float out[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int lane = kNhwc ? k : 0;
      out[k] = fmaf(lane_a[lane], group.gradient(u, k),
                    fmaf(lane_b[lane], group.input(u, k) - lane_mean[lane], lane_c[lane]));
    }
    store_pack(dx, offset, round_pack<T, kVec>(out));
  });
}

// ---- host side -------------------------------------------------------------------------------

void check_shape(const Tensor4& shape, const char* op) {
  if (shape.n < 0 || shape.c < 0 || shape.h < 0 || shape.w < 0) {
    throw RuntimeError(std::string(op) + ": invalid shape " + describe(shape));
  }
}

// Vector widths (in elements) a call may use, widest first; one element always works. fp32 keeps
// its float4 alone: a float2 tiling would change which bits today's shapes produce. 16-bit
// tensors try 16, 8 and 4 bytes, so a plane of 14 x 14 still moves 8 bytes at a time.
int widest_vec(DataType type) { return type == DataType::f32 ? 4 : 8; }
int narrowest_vec(DataType type) { return type == DataType::f32 ? 4 : 2; }

// Items of `vec` elements need every channel run (NHWC: a row, NCHW: a plane) to split into
// whole items.
bool shape_allows_vec(const Tensor4& shape, int vec) {
  return shape.format == DataFormat::nhwc ? shape.c % vec == 0
                                          : (static_cast<long long>(shape.h) * shape.w) % vec == 0;
}

int choose_vec(const Tensor4& shape, std::initializer_list<const void*> pointers) {
  for (int vec = widest_vec(shape.type); vec >= narrowest_vec(shape.type); vec /= 2) {
    if (shape_allows_vec(shape, vec) && aligned_to(pointers, vec * data_type_bytes(shape.type))) {
      return vec;
    }
  }
  return 1;
}

// Calls launch(nhwc, vec, relu), each a std::integral_constant, for the kernels of this call,
// instantiating only the widths choose_vec can pick for T.
template <typename T, typename Launch>
void dispatch(const Tiling& t, bool relu, Launch launch) {
  auto with_width = [&](auto vec) {
    using Yes = std::true_type;
    using No = std::false_type;
    if (t.nhwc) {
      relu ? launch(Yes{}, vec, Yes{}) : launch(Yes{}, vec, No{});
    } else {
      relu ? launch(No{}, vec, Yes{}) : launch(No{}, vec, No{});
    }
  };
  if constexpr (std::is_same_v<T, float>) {
    if (t.vec == 4) return with_width(std::integral_constant<int, 4>{});
  } else {
    if (t.vec == 8) return with_width(std::integral_constant<int, 8>{});
    if (t.vec == 4) return with_width(std::integral_constant<int, 4>{});
    if (t.vec == 2) return with_width(std::integral_constant<int, 2>{});
  }
  with_width(std::integral_constant<int, 1>{});
}

// The finalize kernels run one block of kThreads per channel.
unsigned finalize_blocks(const Tiling& t) { return static_cast<unsigned>(t.channels); }

// Checks a call's shape and workspace; false when the tensor is empty and there is nothing to do.
bool check_call(const Tensor4& shape, void* workspace, const char* op) {
  check_shape(shape, op);
  if (shape.count() == 0) return false;
  if (workspace == nullptr) {
    throw RuntimeError(std::string(op) + ": no workspace (batch_norm_workspace_bytes)");
  }
  return true;
}

// What both sweeps of a call share: the tiling (its width allowed by the shape and `pointers`),
// the workspace carved for it, and the grid.
struct Sweeps {
  Tiling t;
  Workspace w;
  dim3 grid;
};

Sweeps plan_sweeps(const Tensor4& shape, std::initializer_list<const void*> pointers,
                   void* workspace) {
  const Tiling t = make_tiling(shape, choose_vec(shape, pointers));
  return {t, carve_workspace(t, workspace),
          dim3(static_cast<unsigned>(t.channel_tiles), static_cast<unsigned>(t.chunks))};
}

// The statistics sweep and finalize of one batch norm: its saved arrays (relu's mask threshold
// among them with `relu_mask`) and, in the plan's workspace, the coefficients its normalise pass
// reads. Given `sums` (a convolution's), no sweep: the finalize reads those.
template <typename T>
NormaliseCoefficients batch_norm_statistics(cudaStream_t stream, const Sweeps& plan, const T* x, const float* gamma,
                                            const float* beta, float epsilon, float* saved_mean,
                                            float* saved_inv_std, const float* sums, bool relu_mask) {
  const Workspace& w = plan.w;
  const ReluMaskArrays<float> mask = relu_mask ? relu_mask_arrays(plan.t.channels, saved_mean, saved_inv_std)
                                               : ReluMaskArrays<float>{nullptr, nullptr};
  if (sums != nullptr) {
    const int warps = 4;
    batch_norm_finalize_from_sums_kernel<T><<<(plan.t.channels + warps - 1) / warps, 32 * warps, 0, stream>>>(
        plan.t.channels, static_cast<double>(plan.t.elements), sums, gamma, beta, epsilon, saved_mean,
        saved_inv_std, w.coefficient[0], w.coefficient[1], w.coefficient[2], mask);
    DPB_CUDA_CHECK_LAUNCH(batch_norm_finalize_from_sums_kernel);
    return {w.coefficient[0], w.coefficient[1], w.coefficient[2], beta};
  }
  // The shifts go where the finalize then writes mean_hi (coefficient[1]).
  dispatch<T>(plan.t, false, [&](auto nhwc, auto vec_width, auto) {
    batch_norm_statistics_kernel<T, decltype(nhwc)::value, decltype(vec_width)::value>
        <<<plan.grid, kThreads, 0, stream>>>(plan.t, x, w.partial_a, w.partial_b, w.coefficient[1]);
  });
  DPB_CUDA_CHECK_LAUNCH(batch_norm_statistics_kernel);
  batch_norm_forward_finalize_kernel<T><<<finalize_blocks(plan.t), kThreads, 0, stream>>>(
      plan.t, w.partial_a, w.partial_b, w.coefficient[1], gamma, beta, epsilon, saved_mean, saved_inv_std,
      w.coefficient[0], w.coefficient[1], w.coefficient[2], mask);
  DPB_CUDA_CHECK_LAUNCH(batch_norm_forward_finalize_kernel);
  return {w.coefficient[0], w.coefficient[1], w.coefficient[2], beta};
}

// y = act(bn(x) + residual): residual nothing (z null), z, or z's own batch norm (z_gamma given;
// its statistics in the second half of the workspace).
template <typename T>
void batch_norm_forward(cudaStream_t stream, const Tensor4& shape, const T* x, const T* z,
                        const float* gamma, const float* beta, float epsilon, bool relu, T* y,
                        float* saved_mean, float* saved_inv_std, void* workspace, const float* x_sums,
                        const float* z_gamma = nullptr, const float* z_beta = nullptr,
                        float* z_saved_mean = nullptr, float* z_saved_inv_std = nullptr,
                        const float* z_sums = nullptr) {
  const Sweeps plan = plan_sweeps(shape, {x, y, z}, workspace);
  // Only a relu with nothing added has a mask that depends on x alone.
  const NormaliseCoefficients x_norm = batch_norm_statistics(stream, plan, x, gamma, beta, epsilon, saved_mean,
                                                             saved_inv_std, x_sums, relu && z == nullptr);
  NormaliseCoefficients z_norm = x_norm;  // unused unless z has a norm of its own
  if (z_gamma != nullptr) {
    const Sweeps z_plan =
        plan_sweeps(shape, {x, y, z}, static_cast<char*>(workspace) + batch_norm_workspace_bytes(shape));
    z_norm = batch_norm_statistics(stream, z_plan, z, z_gamma, z_beta, epsilon, z_saved_mean, z_saved_inv_std,
                                   z_sums, false);
  }
  dispatch<T>(plan.t, relu, [&](auto nhwc, auto vec_width, auto fused_relu) {
    constexpr bool kNhwc = decltype(nhwc)::value, kRelu = decltype(fused_relu)::value;
    constexpr int kVec = decltype(vec_width)::value;
    if (z == nullptr) {
      batch_norm_normalise_kernel<T, kNhwc, kVec, kRelu, kNoResidual>
          <<<plan.grid, kThreads, 0, stream>>>(plan.t, x, z, x_norm, z_norm, y);
    } else if (z_gamma == nullptr) {
      batch_norm_normalise_kernel<T, kNhwc, kVec, kRelu, kPlainResidual>
          <<<plan.grid, kThreads, 0, stream>>>(plan.t, x, z, x_norm, z_norm, y);
    } else {
      batch_norm_normalise_kernel<T, kNhwc, kVec, kRelu, kNormalisedResidual>
          <<<plan.grid, kThreads, 0, stream>>>(plan.t, x, z, x_norm, z_norm, y);
    }
  });
  DPB_CUDA_CHECK_LAUNCH(batch_norm_normalise_kernel);
}

template <typename T>
void batch_norm_inference(cudaStream_t stream, const Tensor4& shape, const T* x, const InferenceNorm& norm, const T* z,
                          const InferenceNorm* z_norm, bool relu, T* y) {
  const Tiling t = make_tiling(shape, choose_vec(shape, {x, y, z}));
  const dim3 grid(static_cast<unsigned>(t.channel_tiles), static_cast<unsigned>(t.chunks));
  const InferenceNorm no_norm{};
  dispatch<T>(t, relu, [&](auto nhwc, auto vec_width, auto fused_relu) {
    constexpr bool kNhwc = decltype(nhwc)::value, kRelu = decltype(fused_relu)::value;
    constexpr int kVec = decltype(vec_width)::value;
    if (z == nullptr) {
      batch_norm_inference_kernel<T, kNhwc, kVec, kRelu, false, false>
          <<<grid, kThreads, 0, stream>>>(t, x, norm, z, no_norm, y);
    } else if (z_norm == nullptr) {
      batch_norm_inference_kernel<T, kNhwc, kVec, kRelu, true, false>
          <<<grid, kThreads, 0, stream>>>(t, x, norm, z, no_norm, y);
    } else {
      batch_norm_inference_kernel<T, kNhwc, kVec, kRelu, true, true>
          <<<grid, kThreads, 0, stream>>>(t, x, norm, z, *z_norm, y);
    }
  });
  DPB_CUDA_CHECK_LAUNCH(batch_norm_inference_kernel);
}

// Without a residual (d_residual null) relu's mask comes from the forward's threshold on x; with
// one, the reduction reads it from y and leaves the masked dy in d_residual for the dx pass.
template <typename T>
void batch_norm_backward(cudaStream_t stream, const Tensor4& shape, const T* x, const T* y,
                         const T* dy, const float* gamma, const float* saved_mean,
                         const float* saved_inv_std, bool relu, T* dx, T* d_residual,
                         float* dgamma, float* dbeta, void* workspace) {
  const bool split = d_residual != nullptr;
  const Sweeps plan = plan_sweeps(shape, {x, relu && split ? y : nullptr, dy, dx, d_residual}, workspace);
  const Workspace& w = plan.w;
  const ReluMaskArrays<const float> mask = relu_mask_arrays(plan.t.channels, saved_mean, saved_inv_std);
  dispatch<T>(plan.t, relu, [&](auto nhwc, auto vec_width, auto fused_relu) {
    constexpr bool kNhwc = decltype(nhwc)::value, kRelu = decltype(fused_relu)::value;
    constexpr int kVec = decltype(vec_width)::value;
    if (split) {
      constexpr ReluMask kMask = kRelu ? ReluMask::stored : ReluMask::none;
      batch_norm_backward_reduce_kernel<T, kNhwc, kVec, kMask, true><<<plan.grid, kThreads, 0, stream>>>(
          plan.t, x, y, dy, saved_mean, mask, w.partial_a, w.partial_b, d_residual);
    } else {
      constexpr ReluMask kMask = kRelu ? ReluMask::threshold : ReluMask::none;
      batch_norm_backward_reduce_kernel<T, kNhwc, kVec, kMask, false><<<plan.grid, kThreads, 0, stream>>>(
          plan.t, x, y, dy, saved_mean, mask, w.partial_a, w.partial_b, d_residual);
    }
  });
  DPB_CUDA_CHECK_LAUNCH(batch_norm_backward_reduce_kernel);
  batch_norm_backward_finalize_kernel<<<finalize_blocks(plan.t), kThreads, 0, stream>>>(
      plan.t, w.partial_a, w.partial_b, gamma, saved_inv_std, dgamma, dbeta, w.coefficient[0],
      w.coefficient[1], w.coefficient[2]);
  DPB_CUDA_CHECK_LAUNCH(batch_norm_backward_finalize_kernel);
  // Where the reduction left the masked dy in d_residual, dx reads that alone (no mask to apply).
  const T* gradient = split ? d_residual : dy;
  dispatch<T>(plan.t, relu && !split, [&](auto nhwc, auto vec_width, auto fused_relu) {
    constexpr ReluMask kMask = decltype(fused_relu)::value ? ReluMask::threshold : ReluMask::none;
    batch_norm_dx_kernel<T, decltype(nhwc)::value, decltype(vec_width)::value, kMask>
        <<<plan.grid, kThreads, 0, stream>>>(plan.t, x, gradient, saved_mean, mask, w.coefficient[0],
                                             w.coefficient[1], w.coefficient[2], dx);
  });
  DPB_CUDA_CHECK_LAUNCH(batch_norm_dx_kernel);
}

}  // namespace

size_t batch_norm_workspace_bytes(const Tensor4& shape) {
  check_shape(shape, "batch_norm_workspace_bytes");
  if (shape.count() == 0) return 0;
  // Which width a call takes depends on its pointers too, so provide for every tiling it may use.
  size_t floats = workspace_floats(make_tiling(shape, 1));
  for (int vec = widest_vec(shape.type); vec >= narrowest_vec(shape.type); vec /= 2) {
    if (shape_allows_vec(shape, vec)) {
      floats = std::max(floats, workspace_floats(make_tiling(shape, vec)));
    }
  }
  return floats * sizeof(float);
}

void launch_batch_norm_forward(cudaStream_t stream, const Tensor4& shape, const void* x,
                               const void* residual, const float* gamma, const float* beta,
                               float epsilon, bool relu, void* y, float* saved_mean,
                               float* saved_inv_std, void* workspace, const float* x_statistics) {
  if (!check_call(shape, workspace, "batch_norm_forward_training")) return;
  with_storage_type(shape.type, "batch_norm_forward_training", [&](auto tag) {
    using T = decltype(tag);
    batch_norm_forward(stream, shape, static_cast<const T*>(x), static_cast<const T*>(residual), gamma,
                       beta, epsilon, relu,
                       static_cast<T*>(y), saved_mean, saved_inv_std, workspace, x_statistics);
  });
}

void launch_batch_norm_pair_forward(cudaStream_t stream, const Tensor4& shape, const void* x, const float* gamma,
                                    const float* beta, float* saved_mean, float* saved_inv_std, const void* z,
                                    const float* z_gamma, const float* z_beta, float* z_saved_mean,
                                    float* z_saved_inv_std, float epsilon, bool relu, void* y, void* workspace,
                                    const float* x_statistics, const float* z_statistics) {
  if (!check_call(shape, workspace, "batch_norm_pair_forward_training")) return;
  with_storage_type(shape.type, "batch_norm_pair_forward_training", [&](auto tag) {
    using T = decltype(tag);
    batch_norm_forward(stream, shape, static_cast<const T*>(x), static_cast<const T*>(z), gamma, beta, epsilon,
                       relu, static_cast<T*>(y), saved_mean, saved_inv_std, workspace, x_statistics, z_gamma,
                       z_beta, z_saved_mean, z_saved_inv_std, z_statistics);
  });
}

void launch_batch_norm_inference(cudaStream_t stream, const Tensor4& shape, const void* x, const InferenceNorm& norm,
                                 const void* z, const InferenceNorm* z_norm, bool relu, void* y) {
  check_shape(shape, "batch_norm_inference");
  if (shape.count() == 0) return;
  with_storage_type(shape.type, "batch_norm_inference", [&](auto tag) {
    using T = decltype(tag);
    batch_norm_inference(stream, shape, static_cast<const T*>(x), norm, static_cast<const T*>(z), z_norm,
                         relu, static_cast<T*>(y));
  });
}

void launch_batch_norm_backward(cudaStream_t stream, const Tensor4& shape, const void* x,
                                const void* y, const void* dy, const float* gamma,
                                const float* saved_mean, const float* saved_inv_std, bool relu,
                                void* dx, void* d_residual, float* dgamma, float* dbeta,
                                void* workspace) {
  if (!check_call(shape, workspace, "batch_norm_backward")) return;
  with_storage_type(shape.type, "batch_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    batch_norm_backward(stream, shape, static_cast<const T*>(x), static_cast<const T*>(y),
                        static_cast<const T*>(dy), gamma, saved_mean, saved_inv_std, relu,
                        static_cast<T*>(dx), static_cast<T*>(d_residual), dgamma, dbeta, workspace);
  });
}

}  // namespace dpbench::cuda_kernels
