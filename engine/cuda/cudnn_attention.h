// Scaled-dot-product attention as cuDNN operation graphs, built with the backend API: the
// forward with each query row's log-sum-exp, and its backward, for the geometries cuDNN's fused
// flash-attention engines take (cudnn_attention_refusal says which). prepare() builds, finalizes
// and times both passes' plans of a geometry once; the per-step calls only run them, allocate
// nothing and can be captured into a CUDA graph. Note [attention graphs] in cudnn_attention.cpp
// gives the graphs' shape and why each operation is there; CudaBackend decides per geometry
// whether this or dpbench's own kernels run (Note [attention paths] in cuda_attention_ops.cpp).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "engine/backend/attention_geometry.h"
#include "engine/cuda/cuda_controls.h"
#include "engine/machine/memory_ledger.h"

namespace dpbench {

// Runs behind each timing at set-up, of cuDNN's candidates and of dpbench's kernels alike (after
// an untimed one).
inline constexpr int kAttentionTimedRuns = 3;

// What of `g` cuDNN's fused attention does not take ("fp32 data (16-bit only)"), or "" where it
// may (cuDNN may still refuse the graphs): it takes 16-bit data without dropout, heads of a
// multiple of 8 up to 128 elements, rows 16-byte aligned (strides multiples of 8 elements), not a
// single query with a single key, and not on cuDNN 9.10.0 or 9.10.1 (known wrong forwards). The
// key lengths are a per-call argument: the caller checks them.
std::string cudnn_attention_refusal(const AttentionGeometry& g);

// The tensors of a forward and a backward, by role (the Backend ops' arguments): o and lse the
// forward writes, dq, dk and dv the backward. The variant pack takes every pointer as void*.
struct AttentionTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* d_o = nullptr;
  const float* lse = nullptr;
  const void* dq = nullptr;
  const void* dk = nullptr;
  const void* dv = nullptr;
};

// Whether every pointer the passes' graphs read or write is 16-byte aligned, as the plans were
// promised (a column slice at an odd offset is not, and then runs dpbench's kernels).
bool attention_tensors_aligned(const AttentionTensors& t);

// Plan caches are keyed by AttentionGeometry::plan_fields().
struct AttentionKey {
  AttentionGeometry geometry;
  bool operator<(const AttentionKey& o) const { return geometry.plan_fields() < o.geometry.plan_fields(); }
};

// One per stream, like CudaBackend: the handle's stream is where everything runs, and the plan
// cache is not locked. The device must be current on the calling thread.
class CudnnAttention {
 public:
  // `handle` is bound to its stream by the owner and must outlive this object; the timing
  // workspace is recorded in `memory`, the device's ledger.
  CudnnAttention(cudnnHandle_t handle, MemoryLedger& memory);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Builds both passes' graphs of `g` (whose cudnn_attention_refusal is empty), finalizes a few
  // engine configs of each and times them on `scratch` (device buffers of g's shapes, whose o,
  // lse, dq, dk and dv they overwrite), keeping each pass's fastest. Returns "" when both passes
  // have a plan, else why not in cuDNN's words (which descriptor it refused, its status); the
  // answer is kept, so a second call costs a map lookup. Allocates its timing workspace and
  // synchronises the stream: throws RuntimeError for a new geometry during a stream capture.
  std::string prepare(const AttentionGeometry& g, const AttentionTensors& scratch);

  // The workspace a prepared g needs: the larger plan's own and the backward's fp32 buffers.
  size_t workspace_bytes(const AttentionGeometry& g) const;
  // The prepared plans' timed runs, in milliseconds.
  double forward_milliseconds(const AttentionGeometry& g) const;
  double backward_milliseconds(const AttentionGeometry& g) const;
  // "forward: engine 6 (runtime compiled), fastest of 1 timed; backward: ...", for the choice's
  // reason.
  std::string describe(const AttentionGeometry& g) const;

  // The per-step calls: a variant pack (host memory only) and one cudnnBackendExecute on the
  // handle's stream; no device allocation, no synchronisation, so they can be captured. Each
  // throws RuntimeError when g's plans were not prepared, a pointer is misaligned or the
  // workspace is missing.
  void forward(const AttentionGeometry& g, const AttentionTensors& t, void* workspace) const;
  void backward(const AttentionGeometry& g, const AttentionTensors& t, void* workspace) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What CudaBackend keeps for attention: the cuDNN plans of its stream (made on first use) and,
// per geometry its workspace query saw, the path chosen.
struct AttentionPlans {
  std::unique_ptr<CudnnAttention> cudnn;
  std::map<AttentionKey, AttentionChoice> choices;
};

}  // namespace dpbench
