// Knobs and counters of the CUDA backend for code built without the CUDA headers (the CLI, the
// tests): thin forwarders to CudaDevice and CudaBackend that check what they were given.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace dpbench {

class Backend;
class Device;

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
//    "linear": {"shapes", "cublaslt_epilogues"}}  (linear-layer GEMMs planned, by shape and
//              epilogue, and how many of them run with cuBLASLt's epilogue fused in)
// Throws RuntimeError unless `device` is a CUDA device.
nlohmann::json math_paths(Device& device);

// CudaBackend::conv_algorithm_searches. Throws RuntimeError unless `backend` is a CUDA backend.
size_t conv_algorithm_searches(const Backend& backend);

}  // namespace dpbench
