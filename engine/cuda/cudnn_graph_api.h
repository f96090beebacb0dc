// The plumbing every cuDNN operation graph of this project shares (the convolutions of
// cudnn_graph_conv.cpp, the attention of cudnn_attention.cpp): an owner for backend descriptors,
// checked setters that say which attribute cuDNN refused and why, the engines' notes, heuristics,
// finalized candidate plans and their timing. What a graph is made of stays with its user.
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dpbench {

// Promised to cuDNN for every stored tensor's base address and checked on every pointer: the
// fastest engines load 16 bytes at a time, and cudaMalloc gives 256.
inline constexpr int64_t kTensorByteAlignment = 16;

inline bool is_tensor_aligned(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % static_cast<uintptr_t>(kTensorByteAlignment) == 0;
}

// Owner of one backend descriptor; like CudnnObject (cudnn_raii.h), but the create call takes a
// type.
class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  explicit BackendDescriptor(cudnnBackendDescriptorType_t type);
  ~BackendDescriptor() {
    if (native_ != nullptr) (void)cudnnBackendDestroyDescriptor(native_);
  }
  BackendDescriptor(BackendDescriptor&& other) noexcept : native_(std::exchange(other.native_, nullptr)) {}
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept {
    std::swap(native_, other.native_);
    return *this;
  }
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return native_; }

 private:
  cudnnBackendDescriptor_t native_ = nullptr;
};

// cuDNN 9 explains a backend failure (which attribute, which rule) only through this.
std::string last_cudnn_message();

// The one way attributes are set: a refusal throws RuntimeError naming the attribute and giving
// cuDNN's account of why.
void set_attribute(const BackendDescriptor& descriptor, cudnnBackendAttributeName_t name,
                   cudnnBackendAttributeType_t type, int64_t count, const void* values);
void set_descriptor(const BackendDescriptor& descriptor, cudnnBackendAttributeName_t name,
                    const BackendDescriptor& value);
// Throws RuntimeError naming `what` and cuDNN's reason.
void finalize(const BackendDescriptor& descriptor, const char* what);

bool is_not_supported(cudnnStatus_t status);

// An operation of a graph and the descriptor it refers to, both finalized (the graph keeps both
// alive).
struct GraphOperation {
  BackendDescriptor descriptor, operation;
};
// y = mode(x[, b][, t]) computed in `precision` (GEN_INDEX takes an axis).
GraphOperation pointwise_operation(cudnnPointwiseMode_t mode, cudnnDataType_t precision,
                                       const BackendDescriptor& x, const BackendDescriptor* b,
                                       const BackendDescriptor* t, const BackendDescriptor& y,
                                       std::optional<int64_t> axis = std::nullopt);
// y = reduce(x) in fp32 over the dimensions where y has extent 1.
GraphOperation reduction_operation(cudnnReduceTensorOp_t reduce, const BackendDescriptor& x,
                                       const BackendDescriptor& y);

// What cuDNN notes of an engine config's engine.
struct EngineNotes {
  int64_t index = -1;  // cuDNN's global engine index
  bool runtime_compiled = false;
  bool tensor_cores = false;
  bool down_converts_inputs = false;
  bool reduces_in_reduced_precision = false;
  bool nondeterministic = false;
};

EngineNotes engine_notes(const BackendDescriptor& config);

// A finalized execution plan and what it was made from.
struct CandidatePlan {
  BackendDescriptor config, plan;
  EngineNotes notes;
  size_t workspace_bytes = 0;
};

// Why a graph found no plan, for the caller's message.
struct CandidateCounts {
  int configs = 0, excluded_by_notes = 0, not_finalized = 0, over_workspace = 0, failed_to_run = 0;
  std::string last_refusal;  // cuDNN's own words for the last graph, heuristics or plan refused
  std::string text() const;
};

// The engine configs heuristics `mode` proposes for the finalized operation graph `graph`, best
// first; empty (cuDNN's words in counts.last_refusal) where the mode has nothing for it. Up to
// `max_plans` of them that `excluded` lets through, that finalize for `handle` and whose
// workspace fits `workspace_limit` become plans.
std::vector<CandidatePlan> candidate_plans(cudnnHandle_t handle, const BackendDescriptor& graph,
                                           cudnnBackendHeurMode_t mode, size_t workspace_limit, int max_plans,
                                           const std::function<bool(const EngineNotes&)>& excluded,
                                           CandidateCounts& counts);

// Milliseconds per run of `plan` with `pack` on `stream` (the handle's), the mean of `runs` runs
// after an untimed one; negative when it failed to run (the candidate is then dropped).
// Synchronises the stream.
float time_plan(cudnnHandle_t handle, cudaStream_t stream, const BackendDescriptor& plan, const BackendDescriptor& pack,
                int runs);

}  // namespace dpbench
