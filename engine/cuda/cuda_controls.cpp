// Forwarders of cuda_controls.h.
#include "engine/cuda/cuda_controls.h"

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cudnn_rnn_plans.h"
#include "engine/errors.h"

namespace dpbench {

void set_cudnn_benchmark(Device& device, bool benchmark) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError("set_cudnn_benchmark: not a CUDA device");
  cuda_device->set_cudnn_benchmark(benchmark);
}

void set_tf32(Device& device, bool enabled) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError("set_tf32: not a CUDA device");
  cuda_device->set_tf32(enabled);
}

void set_deterministic(Device& device, bool deterministic) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError("set_deterministic: not a CUDA device");
  cuda_device->set_deterministic(deterministic);
}

void set_lstm_algorithm(Device& device, const std::string& name) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError("set_lstm_algorithm: not a CUDA device");
  cuda_device->set_lstm_algorithm(rnn_algorithm_from_name(name));
}

void set_attention_path(Device& device, const std::string& name) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError("set_attention_path: not a CUDA device");
  AttentionPath path = AttentionPath::fastest;
  if (name == "own") {
    path = AttentionPath::own;
  } else if (name == "cudnn") {
    path = AttentionPath::cudnn;
  } else if (name != "fastest") {
    throw RuntimeError("set_attention_path: \"" + name + "\" is not fastest, own or cudnn");
  }
  cuda_device->set_attention_path(path);
}

void set_linear_path(Device& device, const std::string& name) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError("set_linear_path: not a CUDA device");
  LinearPath path = LinearPath::fastest;
  if (name == "plain") {
    path = LinearPath::plain;
  } else if (name == "cublaslt") {
    path = LinearPath::cublaslt;
  } else if (name != "fastest") {
    throw RuntimeError("set_linear_path: \"" + name + "\" is not fastest, plain or cublaslt");
  }
  cuda_device->set_linear_path(path);
}

namespace {

CudaBackend& compute_backend(Device& device, const char* caller) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError(std::string(caller) + ": not a CUDA device");
  auto* backend = dynamic_cast<CudaBackend*>(&device.ops(StreamKind::compute).implementation());
  if (backend == nullptr) throw RuntimeError(std::string(caller) + ": the compute stream has no CUDA backend");
  return *backend;
}

}  // namespace

std::optional<AttentionChoice> attention_choice(Device& device, const AttentionGeometry& g) {
  return compute_backend(device, "attention_choice").attention_choice(g);
}

nlohmann::json math_paths(Device& device) { return compute_backend(device, "math_paths").math_paths(); }

size_t conv_algorithm_searches(const Backend& backend) {
  const auto* cuda_backend = dynamic_cast<const CudaBackend*>(&backend.implementation());
  if (cuda_backend == nullptr) throw RuntimeError("conv_algorithm_searches: not a CUDA backend");
  return cuda_backend->conv_algorithm_searches();
}

}  // namespace dpbench
