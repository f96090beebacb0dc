// Timing a piece of stream work once, for the choices made at set-up or in the eager first step
// (which convolution plan, which pooling kernel): events around one run after an untimed one; and
// whether a stream is being captured into a graph, which forbids timing, allocating and
// synchronising.
#pragma once

#include <cuda_runtime.h>

#include "engine/cuda/cuda_check.h"

namespace dpbench {

inline bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DPB_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture != cudaStreamCaptureStatusNone;
}

// Milliseconds of one run of `work` on `stream` (the mean of `runs` runs), after one untimed run.
template <typename Work>
float timed_on_stream(cudaStream_t stream, Work work, int runs = 1) {
  work();
  cudaEvent_t start, stop;
  DPB_CUDA_CHECK(cudaEventCreate(&start));
  DPB_CUDA_CHECK(cudaEventCreate(&stop));
  DPB_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int run = 0; run < runs; ++run) work();
  DPB_CUDA_CHECK(cudaEventRecord(stop, stream));
  DPB_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  DPB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return ms / static_cast<float>(runs);
}

}  // namespace dpbench
