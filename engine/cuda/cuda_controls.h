// Knobs and counters of the CUDA backend for code built without the CUDA headers (the CLI, the
// tests): thin forwarders to CudaDevice and CudaBackend that check what they were given.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/backend/attention_geometry.h"

namespace dpbench {

class Backend;
class Device;

// Which attention runs a geometry CudaBackend's workspace query prepares (Note [attention paths]
// in cuda_attention_ops.cpp): the faster of cuDNN's fused graphs and dpbench's kernels, timed
// (the default); dpbench's kernels always; or cuDNN's wherever it has plans, untimed (tests).
enum class AttentionPath { fastest, own, cudnn };

// Which linear-layer passes run cuBLASLt's fused epilogues (Note [linear paths] in
// cuda_linear_ops.cpp): per pass and shape whichever times faster (the default), never (the plain
// ops: cuBLAS's GEMM and dpbench's epilogue kernels), or wherever cuBLASLt has them.
enum class LinearPath { fastest, plain, cublaslt };

// What the workspace query decided for one attention geometry, and what ran since.
struct AttentionChoice {
  bool cudnn = false;  // cuDNN's fused attention chosen (else dpbench's kernels)
  std::string reason;  // why, in words: the timings, or what ruled cuDNN out and cuDNN's refusal
  // The timed runs at set-up (0 where not timed), milliseconds per pass.
  double cudnn_forward_ms = 0.0, cudnn_backward_ms = 0.0, own_forward_ms = 0.0, own_backward_ms = 0.0;
  size_t workspace_bytes = 0;  // what the workspace query returned
  // Per-step calls that ran cuDNN's graphs (a misaligned pointer or key lengths run dpbench's).
  size_t cudnn_forward_calls = 0, cudnn_backward_calls = 0;
};

// CudaDevice::set_cudnn_benchmark. Throws RuntimeError unless `device` is a CUDA device.
void set_cudnn_benchmark(Device& device, bool benchmark);

// CudaDevice::set_tf32: TF32 tensor cores for fp32 GEMMs and convolutions. Throws RuntimeError
// unless `device` is a CUDA device.
void set_tf32(Device& device, bool enabled);

// CudaDevice::set_deterministic. Throws RuntimeError unless `device` is a CUDA device.
void set_deterministic(Device& device, bool deterministic);

// CudaDevice::set_lstm_algorithm: "fastest", "standard", "persist_static",
// "persist_static_small_h" or "own_persistent" (--lstm_algorithm). Throws RuntimeError unless `device` is a CUDA
// device and the name one of those.
void set_lstm_algorithm(Device& device, const std::string& name);

// CudaDevice::set_attention_path: "fastest", "own" or "cudnn" (AttentionPath), for tests; no flag
// sets it. Call at set-up: geometries already prepared keep their path. Throws RuntimeError
// unless `device` is a CUDA device and the name one of those.
void set_attention_path(Device& device, const std::string& name);

// CudaDevice::set_linear_path: "fastest", "plain" or "cublaslt" (LinearPath), for tests; no flag
// sets it. Shapes already decided keep their path. Throws RuntimeError unless `device` is a CUDA
// device and the name one of those.
void set_linear_path(Device& device, const std::string& name);

// What the compute stream's backend chose for `g` (its AttentionGeometry::plan_fields()), or
// nothing where its workspace query never saw g. Throws RuntimeError unless `device` is a CUDA
// device.
std::optional<AttentionChoice> attention_choice(Device& device, const AttentionGeometry& g);

// Which kernels the compute stream's prepared plans run, for the result (summary.math_paths):
//   {"convolutions": {"shapes", "graph_api_forward", "fused_bias_relu", "fused_batch_norm_statistics",
//                     "graph_api_backward_data",
//                     "graph_api_backward_data_accumulating", "graph_api_backward_filter",
//                     "classic_algorithms": {"forward", "backward_data", "backward_filter": {name: shapes}}}
//                    (counts of shapes; the rest run the classic API, counted by the algorithm chosen),
//    "pooling": {"shapes", "own_forward", "own_backward", "two_pass_backward"}  (shapes whose
//               forward, or backward, runs dpbench's kernel, not cuDNN's; of the backward ones, the
//               max poolings that run the two-pass kernel),
//    "lstm": {"shapes", "algorithms": {name: shapes}},
//    "linear": {"shapes", "cublaslt_epilogues", "timed": [{"pass", "type", "rows", "in", "out", "fused",
//               "fused_ms", "plain_ms"}]}  (linear-layer passes planned, by shape and epilogue, how
//              many of them run with cuBLASLt's epilogue fused in, and the timings that decided)
//    "attention": {"shapes", "cudnn_fused"}}  (attention geometries prepared, and of those the
//                 ones chosen to run cuDNN's fused flash attention rather than dpbench's kernels)
// Throws RuntimeError unless `device` is a CUDA device.
nlohmann::json math_paths(Device& device);

// CudaBackend::conv_algorithm_searches. Throws RuntimeError unless `backend` is a CUDA backend.
size_t conv_algorithm_searches(const Backend& backend);

}  // namespace dpbench
