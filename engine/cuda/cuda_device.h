// CudaDevice: one GPU with three non-blocking streams (compute, communication, copy), a CudaBackend
// per stream (each with its own cuBLAS and cuDNN handles), device memory, pinned host-mapped memory
// and events.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/backend/counting_backend.h"
#include "engine/backend/device.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_raii.h"
#include "engine/cuda/cudnn_raii.h"

namespace dpbench {

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;

  BackendKind kind() const override { return BackendKind::cuda; }
  const DeviceDescription& description() const override { return description_; }
  int ordinal() const { return description_.index; }
  // The raw stream, for libraries that take one (NCCL).
  cudaStream_t stream(StreamKind kind) const { return streams_[static_cast<int>(kind)].get(); }

  void make_current() override;
  Backend& ops(StreamKind stream = StreamKind::compute) override;

  std::optional<uint64_t> reported_memory_used() const override;
  std::optional<uint64_t> reported_memory_used_at_creation() const override { return used_at_creation_; }

  void copy_to_host(void* host_dst, const void* device_src, size_t bytes) override;
  void copy_from_host(void* device_dst, const void* host_src, size_t bytes) override;

  std::unique_ptr<Event> create_event(bool timing) override;
  void wait(StreamKind waiter, const Event& event) override;
  void synchronize() override;
  void enqueue_host_function(StreamKind stream, std::function<void()> work) override;
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& enqueue) override;
  void set_profiler_capture(bool on) override;

  // Convolution algorithms by timing (on, the default) or by cuDNN's heuristics (off), for every
  // backend of this device, present and future. Call at set-up, before layers prepare their
  // convolutions: geometries already prepared keep their algorithms.
  void set_cudnn_benchmark(bool benchmark);
  void set_tf32(bool enabled);
  // Same bits on every run and in every process (CudaBackend::set_deterministic), for every
  // backend of this device, present and future. Call at set-up, like set_cudnn_benchmark.
  void set_deterministic(bool deterministic);
  // cudnn_lstm's cuDNN algorithm (CudaBackend::set_lstm_algorithm; kChooseLstmAlgorithm: the
  // fastest), for every backend of this device, present and future. Call at set-up.
  void set_lstm_algorithm(int algorithm);
  // Which attention CudaBackend's workspace query prepares (CudaBackend::set_attention_path), for
  // every backend of this device, present and future. Call at set-up.
  void set_attention_path(AttentionPath path);
  // Which linear-layer passes run cuBLASLt's fused epilogues (CudaBackend::set_linear_path), for
  // every backend of this device, present and future. Call at set-up.
  void set_linear_path(LinearPath path);

 protected:
  Buffer allocate_memory(size_t bytes) override;
  Buffer allocate_host_visible_memory(size_t bytes) override;

 private:
  void create_backend(StreamKind stream);
  void copy_and_wait(void* dst, const void* src, size_t bytes, cudaMemcpyKind direction);

  DeviceDescription description_;
  // Declaration order is destruction order reversed: backends go before the handles they use,
  // handles before the streams they are bound to.
  std::vector<CudaStream> streams_;  // indexed by StreamKind
  std::array<std::unique_ptr<CublasHandle>, kNumStreamKinds> cublas_handles_;
  std::array<std::unique_ptr<CudnnHandle>, kNumStreamKinds> cudnn_handles_;
  std::array<std::unique_ptr<CudaBackend>, kNumStreamKinds> backends_;
  std::array<std::unique_ptr<CountingBackend>, kNumStreamKinds> counted_;  // what ops() hands out
  // The compute backend is built eagerly; the others on first use (library handles cost memory).
  std::array<std::once_flag, kNumStreamKinds> backend_created_;
  std::atomic<bool> cudnn_benchmark_{true};
  std::atomic<bool> tf32_{false};
  std::atomic<bool> deterministic_{false};
  std::atomic<int> lstm_algorithm_{-1};  // kChooseLstmAlgorithm
  std::atomic<AttentionPath> attention_path_{AttentionPath::fastest};
  std::atomic<LinearPath> linear_path_{LinearPath::fastest};
  std::optional<uint64_t> used_at_creation_;  // cudaMemGetInfo's used bytes once the context was made
};

}  // namespace dpbench
