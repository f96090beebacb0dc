// The largest value each count and size flag accepts, in one place. Each is far beyond any real
// run, yet small enough that what the value sizes (a record per step, pinned batches, loader
// threads, layers) cannot exhaust a machine before the memory check speaks. Internal to cli/.
#pragma once

#include <climits>
#include <string>

namespace dpbench {

// Each step keeps a record in memory and in the result JSON (about 100 bytes).
inline constexpr int kMaxSteps = 1'000'000;
inline constexpr int kMaxEpochs = 100'000;
inline constexpr int kMaxBatchPerDevice = 1 << 20;
// Batches in flight per device, each a pinned host slot and a device slot.
inline constexpr int kMaxPrefetchDepth = 64;
inline constexpr int kMaxLoaderThreads = 256;
inline constexpr int kMaxLengthBuckets = 1000;
// The synchronisation options' limits (--gradient_repacking, --bucket_cap_mb, ...) are their
// records' ranges (strategies/synchronisation_options.cpp), which run and predict both read.
inline constexpr int kMaxLossScaleInterval = 100'000'000;

// Model shape flags (sequence models).
inline constexpr int kMaxVocabulary = 10'000'000;
inline constexpr int kMaxWidth = 65536;  // embedding_dim, num_units
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxSequenceLength = 65536;

inline constexpr int kMaxCollectiveTimeoutSeconds = 86400;
// --peak_tflops: a thousand times today's largest GPU; at least a GFLOP/s, so that an MFU is a
// percentage a line can print.
inline constexpr double kMaxPeakTflops = 1e6;
inline constexpr double kMinPeakTflops = 1e-3;

// comm_bench.
inline constexpr int kMaxBenchIterations = 1'000'000;
inline constexpr unsigned long long kMaxBenchBytes = 1ULL << 40;

}  // namespace dpbench
