// CudaDevice (see the header), create_cuda_device and cuda_device_count.
#include "engine/cuda/cuda_device.h"

#include <cuda_profiler_api.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_device_scope.h"
#include "engine/cuda/cuda_factory.h"
#include "engine/errors.h"
#include "engine/machine/library_memory.h"
#include "engine/machine/host_memory.h"

namespace dpbench {
namespace {

// The first cudaSetDevice creates the GPU's context, which takes a few hundred MiB of its memory:
// on a GPU another process has filled, that is where a run fails, and CUDA's own words for it
// ("cudaSetDevice failed: out of memory") name neither the cause nor the fix.
void require_context(int ordinal) {
  const CallerDeviceRestorer restore;
  const cudaError_t status = cudaSetDevice(ordinal);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw RuntimeError("out of GPU memory on device " + std::to_string(ordinal) +
                       " before dpbench allocated anything: its CUDA context does not fit, so "
                       "another process holds the memory (see nvidia-smi); free the GPU or pick "
                       "others with --gpu_indices");
  }
  DPB_CUDA_CHECK(status);
}

// A zero-byte request still yields a distinct, valid pointer (cudaMalloc(0) gives nullptr).
size_t at_least_one_byte(size_t bytes) { return bytes == 0 ? 1 : bytes; }

double to_mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// The GPU's used bytes (total - free), every process's; nullopt where CUDA will not say.
std::optional<uint64_t> memory_used_of_current_device() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  return static_cast<uint64_t>(total_bytes - free_bytes);
}

// Deleters ignore errors (they run in destructors). A failure would otherwise stay behind as the
// "last error" and be blamed on the next kernel launch, so it is cleared here.
void free_device_memory(void* pointer) {
  if (cudaFree(pointer) != cudaSuccess) (void)cudaGetLastError();
}

void free_host_visible_memory(void* pointer) {
  uncount_host_allocation(pointer);
  if (cudaFreeHost(pointer) != cudaSuccess) (void)cudaGetLastError();
}

class CudaDeviceEvent final : public Event {
 public:
  CudaDeviceEvent(const CudaDevice& device, bool timing) : device_(device), event_(timing) {}

  void record(StreamKind stream) override {
    DPB_CUDA_CHECK(cudaEventRecord(event_.get(), device_.stream(stream)));
  }
  void synchronize() override { DPB_CUDA_CHECK(cudaEventSynchronize(event_.get())); }
  bool query() override {
    const cudaError_t status = cudaEventQuery(event_.get());
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is an answer, not an error: keep it off this thread's record
      return false;
    }
    DPB_CUDA_CHECK(status);
    return true;
  }
  double elapsed_ms_since(const Event& start) const override {
    const auto* start_event = dynamic_cast<const CudaDeviceEvent*>(&start);
    if (start_event == nullptr) {
      throw RuntimeError("elapsed_ms_since: the start event does not belong to a CUDA device");
    }
    float milliseconds = 0.0f;
    DPB_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start_event->native(), event_.get()));
    return milliseconds;
  }

  cudaEvent_t native() const { return event_.get(); }

 private:
  const CudaDevice& device_;
  CudaEvent event_;
};

}  // namespace

CudaDevice::CudaDevice(int ordinal) {
  require_context(ordinal);
  CurrentDeviceScope current(ordinal);
  // Before the handles and the backend's own buffers: what the context (and any other process)
  // holds, the part of the device's figure that no ledger of this run can account.
  used_at_creation_ = memory_used_of_current_device();
  cudaDeviceProp properties{};
  DPB_CUDA_CHECK(cudaGetDeviceProperties(&properties, ordinal));
  description_.index = ordinal;
  description_.name = properties.name;
  description_.memory_bytes = properties.totalGlobalMem;
  // What dpbench may take: what the context and other processes left free, less what the
  // libraries will take of it (engine/machine/library_memory.h); --device_memory replaces it.
  if (used_at_creation_ && *used_at_creation_ + kLibraryMemoryReserve < properties.totalGlobalMem)
    set_memory_limit(properties.totalGlobalMem - *used_at_creation_ - kLibraryMemoryReserve);
  description_.compute_capability =
      std::to_string(properties.major) + "." + std::to_string(properties.minor);
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, ordinal) == cudaSuccess) description_.pci_bus_id = bus_id;

  streams_.reserve(kNumStreamKinds);
  for (int i = 0; i < kNumStreamKinds; ++i) streams_.emplace_back();
  ops(StreamKind::compute);
}

CudaDevice::~CudaDevice() {
  // Handles and streams belong to this GPU: release them with it current, then restore.
  {
    const CallerDeviceRestorer restore;
    (void)cudaSetDevice(ordinal());
    for (const CudaStream& stream : streams_) (void)cudaStreamSynchronize(stream.get());
    for (auto& backend : counted_) backend.reset();
    for (auto& backend : backends_) backend.reset();
    for (auto& handle : cudnn_handles_) handle.reset();
    for (auto& handle : cublas_handles_) handle.reset();
    streams_.clear();
  }
  (void)cudaGetLastError();
}

void CudaDevice::make_current() { DPB_CUDA_CHECK(cudaSetDevice(ordinal())); }

void CudaDevice::create_backend(StreamKind stream) {
  CurrentDeviceScope current(ordinal());  // library handles bind to the current device
  const int slot = static_cast<int>(stream);
  auto cublas = std::make_unique<CublasHandle>();
  auto cudnn = std::make_unique<CudnnHandle>();
  auto backend = std::make_unique<CudaBackend>(streams_[slot].get(), cublas->get(), cudnn->get(), memory());
  backend->set_cudnn_benchmark(cudnn_benchmark_.load());
  backend->set_tf32(tf32_.load());
  backend->set_deterministic(deterministic_.load());
  backend->set_lstm_algorithm(lstm_algorithm_.load());
  backend->set_attention_path(attention_path_.load());
  backend->set_linear_path(linear_path_.load());
  cublas_handles_[slot] = std::move(cublas);
  cudnn_handles_[slot] = std::move(cudnn);
  counted_[slot] = std::make_unique<CountingBackend>(*backend, *this, stream);
  backends_[slot] = std::move(backend);
}

void CudaDevice::set_cudnn_benchmark(bool benchmark) {
  cudnn_benchmark_.store(benchmark);
  for (auto& backend : backends_) {
    if (backend) backend->set_cudnn_benchmark(benchmark);
  }
}

void CudaDevice::set_tf32(bool enabled) {
  tf32_.store(enabled);
  for (auto& backend : backends_) {
    if (backend) backend->set_tf32(enabled);
  }
}

void CudaDevice::set_deterministic(bool deterministic) {
  deterministic_.store(deterministic);
  for (auto& backend : backends_) {
    if (backend) backend->set_deterministic(deterministic);
  }
}

void CudaDevice::set_lstm_algorithm(int algorithm) {
  lstm_algorithm_.store(algorithm);
  for (auto& backend : backends_) {
    if (backend) backend->set_lstm_algorithm(algorithm);
  }
}

void CudaDevice::set_attention_path(AttentionPath path) {
  attention_path_.store(path);
  for (auto& backend : backends_) {
    if (backend) backend->set_attention_path(path);
  }
}

void CudaDevice::set_linear_path(LinearPath path) {
  linear_path_.store(path);
  for (auto& backend : backends_) {
    if (backend) backend->set_linear_path(path);
  }
}

Backend& CudaDevice::ops(StreamKind stream) {
  const int slot = static_cast<int>(stream);
  // call_once: the runner thread and a communication thread may ask for the same stream at once.
  std::call_once(backend_created_[slot], [this, stream] { create_backend(stream); });
  return *counted_[slot];
}

std::optional<uint64_t> CudaDevice::reported_memory_used() const {
  CurrentDeviceScope current(ordinal());
  return memory_used_of_current_device();
}

Buffer CudaDevice::allocate_memory(size_t bytes) {
  CurrentDeviceScope current(ordinal());
  void* data = nullptr;
  const cudaError_t status = cudaMalloc(&data, at_least_one_byte(bytes));
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it, so the next launch check does not report it again
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
    char message[512];
    std::snprintf(message, sizeof message,
                  "out of GPU memory on device %d (%s): allocating %.1f MiB with %.1f MiB free; "
                  "reduce --batch_size or use more GPUs",
                  ordinal(), description_.name.c_str(), to_mib(bytes), to_mib(free_bytes));
    throw OutOfDeviceMemory(message, ordinal());
  }
  DPB_CUDA_CHECK(status);
  return Buffer(data, bytes, &free_device_memory);
}

Buffer CudaDevice::allocate_host_visible_memory(size_t bytes) {
  CurrentDeviceScope current(ordinal());
  void* data = nullptr;
  // Pinned pages are taken at once and cannot be swapped: count them against the host's memory.
  check_host_allocation(bytes, "GPU " + std::to_string(ordinal()) + "'s pinned host buffers");
  DPB_CUDA_CHECK(
      cudaHostAlloc(&data, at_least_one_byte(bytes), cudaHostAllocMapped | cudaHostAllocPortable));
  count_host_allocation(data, bytes);
  Buffer buffer(data, bytes, &free_host_visible_memory);
  // With unified addressing (every 64-bit platform CUDA supports) a mapped allocation has the same
  // address on host and device; Buffer::data() promises exactly that, so check rather than assume.
  void* device_pointer = nullptr;
  DPB_CUDA_CHECK(cudaHostGetDevicePointer(&device_pointer, data, 0));
  if (device_pointer != data) {
    throw RuntimeError("host-mapped memory on device " + std::to_string(ordinal()) +
                       " has a different device address; unified addressing is required");
  }
  return buffer;
}

void CudaDevice::copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  CurrentDeviceScope current(ordinal());
  synchronize();
  copy_and_wait(host_dst, device_src, bytes, cudaMemcpyDeviceToHost);
}

void CudaDevice::copy_from_host(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  CurrentDeviceScope current(ordinal());
  synchronize();
  copy_and_wait(device_dst, host_src, bytes, cudaMemcpyHostToDevice);
}

void CudaDevice::copy_and_wait(void* dst, const void* src, size_t bytes, cudaMemcpyKind direction) {
  // Not plain cudaMemcpy: it runs on the legacy default stream, which our non-blocking streams do
  // not wait for, and from pageable memory it may return before the data has reached the GPU.
  // A copy on our own stream followed by a wait for that stream is complete when we return.
  const cudaStream_t copy_stream = stream(StreamKind::copy);
  DPB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, direction, copy_stream));
  DPB_CUDA_CHECK(cudaStreamSynchronize(copy_stream));
}

std::unique_ptr<Event> CudaDevice::create_event(bool timing) {
  CurrentDeviceScope current(ordinal());  // an event belongs to the device current at creation
  return std::make_unique<CudaDeviceEvent>(*this, timing);
}

void CudaDevice::wait(StreamKind waiter, const Event& event) {
  const auto* cuda_event = dynamic_cast<const CudaDeviceEvent*>(&event);
  if (cuda_event == nullptr) {
    throw RuntimeError("CudaDevice::wait: the event does not belong to a CUDA device");
  }
  // Events of other GPUs are fine here: the wait is resolved by the driver, not the host.
  DPB_CUDA_CHECK(cudaStreamWaitEvent(stream(waiter), cuda_event->native(), 0));
}

void CudaDevice::synchronize() {
  for (const CudaStream& stream : streams_) DPB_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
}

namespace {

// cudaLaunchHostFunc takes a plain function pointer: the std::function travels on the heap and
// the trampoline frees it after running it. An exception cannot cross into the CUDA runtime's
// thread, so it ends the process with the message (the run's results would be wrong anyway).
void run_host_function(void* data) {
  std::unique_ptr<std::function<void()>> work(static_cast<std::function<void()>*>(data));
  try {
    (*work)();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dpbench: error in host work enqueued on a stream: %s\n", error.what());
    std::abort();
  }
}

}  // namespace

void CudaDevice::enqueue_host_function(StreamKind kind, std::function<void()> work) {
  auto heap_work = std::make_unique<std::function<void()>>(std::move(work));
  DPB_CUDA_CHECK(cudaLaunchHostFunc(stream(kind), &run_host_function, heap_work.get()));
  heap_work.release();  // run_host_function owns it now
  count_enqueued(kind);
}

namespace {

// Kernel nodes of `graph`, those inside child graphs (as libraries may add) included.
int64_t count_kernel_nodes(cudaGraph_t graph) {
  size_t count = 0;
  DPB_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) DPB_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  int64_t kernels = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    DPB_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) {
      ++kernels;
    } else if (type == cudaGraphNodeTypeGraph) {
      cudaGraph_t child = nullptr;
      DPB_CUDA_CHECK(cudaGraphChildGraphNodeGetGraph(node, &child));
      kernels += count_kernel_nodes(child);
    }
  }
  return kernels;
}

// An instantiated CUDA graph and the stream it replays on.
class CudaGraphWork final : public CapturedWork {
 public:
  CudaGraphWork(cudaGraph_t graph, cudaGraphExec_t exec, cudaStream_t stream)
      : graph_(graph), exec_(exec), stream_(stream) {}
  ~CudaGraphWork() override {
    (void)cudaGraphExecDestroy(exec_);
    (void)cudaGraphDestroy(graph_);
  }
  void launch() override { DPB_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }
  int64_t kernel_count() const override { return count_kernel_nodes(graph_); }

 private:
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<CapturedWork> CudaDevice::capture(const std::function<void()>& enqueue) {
  CurrentDeviceScope current(ordinal());
  const cudaStream_t compute = stream(StreamKind::compute);
  // Thread-local mode: other device threads keep launching normally while this one records.
  DPB_CUDA_CHECK(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t abandoned = nullptr;
    if (cudaStreamEndCapture(compute, &abandoned) == cudaSuccess && abandoned) (void)cudaGraphDestroy(abandoned);
    (void)cudaGetLastError();
    throw;
  }
  cudaGraph_t graph = nullptr;
  DPB_CUDA_CHECK(cudaStreamEndCapture(compute, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  if (status != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    DPB_CUDA_CHECK(status);
  }
  // Uploaded now, so that its first launch (perhaps inside the measured steps) is not slower.
  const cudaError_t uploaded = cudaGraphUpload(exec, compute);
  if (uploaded != cudaSuccess) {
    (void)cudaGraphExecDestroy(exec);
    (void)cudaGraphDestroy(graph);
    DPB_CUDA_CHECK(uploaded);
  }
  return std::make_unique<CudaGraphWork>(graph, exec, compute);
}

std::unique_ptr<Device> create_cuda_device(int ordinal) {
  return std::make_unique<CudaDevice>(ordinal);
}

int cuda_device_count(std::string* why_none) {
  try {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      if (why_none != nullptr) *why_none = cudaGetErrorString(status);
      return 0;
    }
    if (count <= 0) {
      if (why_none != nullptr) *why_none = "the CUDA driver reports no devices";
      return 0;
    }
    return count;
  } catch (...) {
    return 0;  // e.g. bad_alloc while writing why_none: "never throws" is the contract
  }
}

void CudaDevice::set_profiler_capture(bool on) {
  make_current();
  DPB_CUDA_CHECK(on ? cudaProfilerStart() : cudaProfilerStop());
}

}  // namespace dpbench
