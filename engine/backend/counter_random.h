// Counter-based random numbers, identical on host and device: a value is a pure function of
// (seed, stream, index). Synthetic data and parameter initialisation use it so that every
// backend, every sharding of the global batch and every strategy sees bit-identical inputs.
#pragma once

#include <cstdint>

#include "engine/backend/host_device.h"

namespace dpbench {

// Streams keep unrelated draws apart (images vs labels vs each parameter tensor).
enum : uint64_t {
  kRandomStreamInputs = 1,
  kRandomStreamLabels = 2,
  kRandomStreamDecoderTokens = 3,  // a sequence model's second input (the decoder's tokens)
  kRandomStreamParameters = 1000,  // + tensor number
  kRandomStreamDropout = 1ull << 32,  // + step number
  kRandomStreamEpochShuffle = 2ull << 32,  // + epoch number (engine/data/epoch_sampler.cpp)
  kRandomStreamTokenWindows = 3ull << 32,  // + step number (engine/data/token_shards.cpp)
};

// splitmix64 finaliser: a bijective mix with good avalanche.
DPB_HOST_DEVICE uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The part of a hash that depends on (seed, stream) alone: a kernel drawing many indices of one
// stream (attention's dropout draws one per score) computes it once.
DPB_HOST_DEVICE uint64_t counter_stream_key(uint64_t seed, uint64_t stream) {
  return mix64(seed ^ mix64(stream));
}

DPB_HOST_DEVICE uint64_t counter_hash_keyed(uint64_t stream_key, uint64_t index) {
  return mix64(stream_key + index);
}

DPB_HOST_DEVICE uint64_t counter_hash(uint64_t seed, uint64_t stream, uint64_t index) {
  return counter_hash_keyed(counter_stream_key(seed, stream), index);
}

// Uniform in [0, 1) with 24 random bits: exactly representable in float, so host and device
// produce the same value bit for bit.
DPB_HOST_DEVICE float counter_uniform_keyed(uint64_t stream_key, uint64_t index) {
  return static_cast<float>(counter_hash_keyed(stream_key, index) >> 40) * (1.0f / 16777216.0f);
}

DPB_HOST_DEVICE float counter_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return counter_uniform_keyed(counter_stream_key(seed, stream), index);
}

DPB_HOST_DEVICE uint32_t counter_uint(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<uint32_t>(counter_hash(seed, stream, index) >> 32);
}

// Whether dropout at the runner's step `step` keeps element `index` (backend_ops.h's dropout_forward,
// the attention probabilities of engine/backend/attention_geometry.h): one rule, so every op that drops
// draws the same mask from the same (seed, step, index). Elements 2m and 2m + 1 share one hash,
// h = counter_hash(seed, kRandomStreamDropout + step, m): the even one draws u = h's top 24 bits,
// the odd one u = bits 8 to 31 (dropout_draw), and an element is kept when u * 2^-24 >= rate,
// asked in integers as u >= dropout_threshold(rate). One hash for two elements halves the cost
// that dominated the dropout and attention kernels. A kernel drawing many indices of one step
// takes the stream's key and the threshold once (dropout_stream_key, dropout_threshold) and asks
// dropout_keeps_keyed, dropout_keeps_pair for both elements of a pair, or dropout_keeps_run.
DPB_HOST_DEVICE uint64_t dropout_stream_key(uint64_t seed, int32_t step) {
  return counter_stream_key(seed, kRandomStreamDropout + static_cast<uint64_t>(step));
}

// The least u in [0, 2^24] with u * 2^-24 >= rate: ceil(rate * 2^24), where rate * 2^24 is exact
// (a power-of-two scaling). 2^24, which no u reaches, for rate >= 1 or NaN (nothing kept, as
// uniform >= rate never holds then); 0 for rate <= 0 (everything kept).
DPB_HOST_DEVICE uint32_t dropout_threshold(float rate) {
  constexpr uint32_t kNone = 1u << 24;
  const float scaled = rate * 16777216.0f;
  if (!(scaled < 16777216.0f)) return kNone;
  if (scaled <= 0.0f) return 0;
  const uint32_t whole = static_cast<uint32_t>(scaled);  // truncated; scaled < 2^24 is exact
  return static_cast<float>(whole) < scaled ? whole + 1 : whole;
}

// Element index's 24-bit draw from its pair's hash.
DPB_HOST_DEVICE uint32_t dropout_draw(uint64_t pair_hash, uint64_t index) {
  return static_cast<uint32_t>((index & 1) != 0 ? (pair_hash >> 8) & 0xFFFFFFu : pair_hash >> 40);
}

DPB_HOST_DEVICE bool dropout_keeps_keyed(uint64_t stream_key, uint64_t index, uint32_t threshold) {
  return dropout_draw(counter_hash_keyed(stream_key, index >> 1), index) >= threshold;
}

// Both elements of the pair that starts at even_index (which must be even), from one hash.
DPB_HOST_DEVICE void dropout_keeps_pair(uint64_t stream_key, uint64_t even_index, uint32_t threshold,
                                        bool& keeps_even, bool& keeps_odd) {
  const uint64_t hash = counter_hash_keyed(stream_key, even_index >> 1);
  keeps_even = dropout_draw(hash, 0) >= threshold;
  keeps_odd = dropout_draw(hash, 1) >= threshold;
}

// The decisions for the kCount consecutive indices from `first`: a pair's hash once where the run
// starts on an even index and kCount is even (a kernel's pack), else element by element.
template <int kCount>
DPB_HOST_DEVICE void dropout_keeps_run(uint64_t stream_key, uint64_t first, uint32_t threshold,
                                       bool (&keeps)[kCount]) {
  if (kCount % 2 == 0 && first % 2 == 0) {
    for (int k = 0; k + 1 < kCount; k += 2) dropout_keeps_pair(stream_key, first + k, threshold, keeps[k], keeps[k + 1]);
  } else {
    for (int k = 0; k < kCount; ++k) keeps[k] = dropout_keeps_keyed(stream_key, first + k, threshold);
  }
}

DPB_HOST_DEVICE bool dropout_keeps(uint64_t seed, int32_t step, uint64_t index, float rate) {
  return dropout_keeps_keyed(dropout_stream_key(seed, step), index, dropout_threshold(rate));
}

// The factor on a kept value: 1 / (1 - rate), rounded once to float. dropout_forward and
// dropout_backward multiply by it on every backend (one rounding of the product, where a true
// division costs a GPU ten instructions), so they agree bit for bit; the CUDA attention kernel's
// kept probabilities take it too.
DPB_HOST_DEVICE float dropout_keep_scale(float rate) { return 1.0f / (1.0f - rate); }

}  // namespace dpbench
