// CudaBackend's attention ops: each geometry runs cuDNN's fused flash attention
// (cudnn_attention.h) or dpbench's own kernels (cuda_kernels_attention.cu), as
// attention_workspace_bytes decided once (Note [attention paths]). Arguments are checked here, on
// the host, since a kernel cannot throw; the per-step calls allocate nothing, so a step made of
// them can be captured as a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cudnn_attention.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/stream_timing.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

// Note [attention paths]
// attention_workspace_bytes(g), which layers call at set-up outside any capture, decides once per
// geometry (AttentionGeometry::plan_fields()) which attention runs it:
//   - dpbench's kernels where cuDNN cannot take g (cudnn_attention_refusal: fp32, dropout, head
//     sizes, strides); under --deterministic, since cuDNN's fused backward adds dQ up with
//     atomics and its backend API (up to 9.19) has no attribute asking for a deterministic
//     algorithm (the frontend's deterministic Hopper backward is another graph form, one that
//     keeps a B x H x Sq x Sk dP in the workspace); with --cudnn_benchmark=false, since the
//     choice is a timing; and under set_attention_path(own);
//   - otherwise CudnnAttention::prepare builds and times cuDNN's plans on scratch tensors of g's
//     shapes, and where cuDNN has no plan for a pass, dpbench's kernels run, cuDNN's refusal
//     kept as the reason;
//   - under set_attention_path(cudnn) cuDNN's plans then run; under fastest (the default)
//     dpbench's kernels are timed on the same scratch (kAttentionTimedRuns runs after an untimed
//     one) and the faster forward + backward pair is kept.
// It returns the workspace of the chosen path, dpbench's kernels' included: each call runs the
// chosen path, except that dpbench's kernels take a call with key lengths (a padding mask the
// graphs do not have), a pointer off 16 bytes (a column slice at an odd offset) or one made
// under --deterministic; a geometry the query never saw runs dpbench's kernels. The lse is the
// same natural-log log-sum-exp on both paths (Note [attention graphs]), so a forward and a
// backward that went different ways still pair up. gpt's shape chose cuDNN on an H200, 4.4 ms
// of a step's attention against 20.9 (docs/BENCHMARKS.md); set-up compiles its plans in seconds.
std::string describe(const AttentionGeometry& g) {
  return "batch " + std::to_string(g.batch) + ", heads " + std::to_string(g.heads) + ", query_len " +
         std::to_string(g.query_len) + ", key_len " + std::to_string(g.key_len) + ", head_dim " +
         std::to_string(g.head_dim);
}

// What the kernels cannot handle or the semantics do not define, or "".
std::string attention_geometry_problem(const AttentionGeometry& g) {
  if (g.batch < 0 || g.heads < 0 || g.query_len < 0 || g.key_len < 0) return "negative size";
  if (g.head_dim < 1 || g.head_dim > 128) return "head_dim must lie in [1, 128]";
  if (g.causal && g.query_len != g.key_len) return "causal needs query_len == key_len";
  if (g.batch > 65535 || g.heads > 65535) return "batch and heads must be at most 65535";
  const int model_dim = g.model_dim();
  if (g.q_stride < model_dim || g.k_stride < model_dim || g.v_stride < model_dim || g.o_stride < model_dim) {
    return "a row stride below heads * head_dim";
  }
  if (g.dropout_rate < 0.0f || g.dropout_rate >= 1.0f) return "dropout rate outside [0, 1)";
  return "";
}

// Said before anything runs.
void check_attention(const AttentionGeometry& g, const int32_t* step, const char* op) {
  std::string problem = attention_geometry_problem(g);
  if (problem.empty() && g.dropout_rate > 0.0f && step == nullptr) problem = "dropout needs the step counter";
  if (!problem.empty()) {
    throw RuntimeError(std::string("CudaBackend::") + op + " (" + describe(g) + "): " + problem);
  }
}

// Device buffers of g's shapes for the timing at set-up, zeroed: uniform attention, and neither
// path's time depends on the values.
struct AttentionScratch {
  DeviceMemory q, k, v, o, d_o, lse, dq, dk, dv, own_workspace;

  AttentionScratch(const AttentionGeometry& g, cudaStream_t stream, MemoryLedger& memory) {
    const size_t element = data_type_bytes(g.type);
    const size_t q_rows = static_cast<size_t>(g.query_len) * g.batch,
                 kv_rows = static_cast<size_t>(g.key_len) * g.batch;
    DeviceMemory* buffers[] = {&q, &k, &v, &o, &d_o, &lse, &dq, &dk, &dv, &own_workspace};
    const size_t bytes[] = {q_rows * g.q_stride * element,  kv_rows * g.k_stride * element,
                            kv_rows * g.v_stride * element, q_rows * g.o_stride * element,
                            q_rows * g.o_stride * element,  g.lse_count() * sizeof(float),
                            q_rows * g.q_stride * element,  kv_rows * g.k_stride * element,
                            kv_rows * g.v_stride * element, cuda_kernels::attention_workspace_bytes(g)};
    for (size_t i = 0; i < std::size(buffers); ++i) {
      // Within the device's memory limit, or not at all (Note [search memory] in device_memory.h).
      *buffers[i] =
          DeviceMemory::transient(bytes[i], memory, MemoryTag{MemoryCategory::scratch, "attention path timing"});
      DPB_CUDA_CHECK(cudaMemsetAsync(buffers[i]->data(), 0, std::max<size_t>(bytes[i], 1), stream));
    }
  }

  AttentionTensors tensors() const {
    return {q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.as<float>(), dq.data(), dk.data(), dv.data()};
  }
};

std::string milliseconds_text(double forward_ms, double backward_ms) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.3f + %.3f ms", forward_ms, backward_ms);
  return text;
}

}  // namespace

CudnnAttention& CudaBackend::cudnn_attention() {
  if (!attention_plans_->cudnn) attention_plans_->cudnn = std::make_unique<CudnnAttention>(cudnn_, memory_);
  return *attention_plans_->cudnn;
}

AttentionChoice CudaBackend::choose_attention_path(const AttentionGeometry& g) {
  AttentionChoice choice;
  const std::string refusal = cudnn_attention_refusal(g);
  if (!refusal.empty()) {
    choice.reason = "dpbench's kernels: cuDNN's fused attention does not take " + refusal;
    return choice;
  }
  if (attention_path_ == AttentionPath::own) {
    choice.reason = "dpbench's kernels: asked for (set_attention_path)";
    return choice;
  }
  if (deterministic_) {
    choice.reason = "dpbench's kernels: deterministic (cuDNN's fused backward adds dQ up with atomics)";
    return choice;
  }
  if (!cudnn_benchmark_ && attention_path_ == AttentionPath::fastest) {
    choice.reason = "dpbench's kernels: --cudnn_benchmark=false (the choice is a timing)";
    return choice;
  }
  try {
    AttentionScratch scratch(g, stream_, memory_);
    const AttentionTensors t = scratch.tensors();
    CudnnAttention& cudnn = cudnn_attention();
    const std::string cudnn_refusal = cudnn.prepare(g, t);
    if (!cudnn_refusal.empty()) {
      choice.reason = "dpbench's kernels: cuDNN refused: " + cudnn_refusal;
      return choice;
    }
    choice.cudnn_forward_ms = cudnn.forward_milliseconds(g);
    choice.cudnn_backward_ms = cudnn.backward_milliseconds(g);
    const std::string cudnn_plans = " (" + cudnn.describe(g) + ")";
    if (attention_path_ == AttentionPath::cudnn) {
      choice.cudnn = true;
      choice.reason = "cuDNN's fused attention: asked for (set_attention_path)" + cudnn_plans;
      return choice;
    }
    choice.own_forward_ms = timed_on_stream(
        stream_,
        [&] {
          cuda_kernels::launch_attention_forward(stream_, g, tf32(), t.q, t.k, t.v, nullptr, nullptr,
                                                 const_cast<void*>(t.o), const_cast<float*>(t.lse));
        },
        kAttentionTimedRuns);
    choice.own_backward_ms = timed_on_stream(
        stream_,
        [&] {
          cuda_kernels::launch_attention_backward(stream_, g, tf32(), t.q, t.k, t.v, t.o, t.d_o, t.lse, nullptr,
                                                  nullptr, const_cast<void*>(t.dq), const_cast<void*>(t.dk),
                                                  const_cast<void*>(t.dv), scratch.own_workspace.data());
        },
        kAttentionTimedRuns);
    const double cudnn_ms = choice.cudnn_forward_ms + choice.cudnn_backward_ms;
    const double own_ms = choice.own_forward_ms + choice.own_backward_ms;
    choice.cudnn = cudnn_ms < own_ms;
    choice.reason = std::string(choice.cudnn ? "cuDNN's fused attention" : "dpbench's kernels") + ": cuDNN " +
                    milliseconds_text(choice.cudnn_forward_ms, choice.cudnn_backward_ms) + ", dpbench's " +
                    milliseconds_text(choice.own_forward_ms, choice.own_backward_ms) + cudnn_plans;
  } catch (const RuntimeError& error) {
    // A failed allocation of the scratch, mostly: the kernels that need none run.
    choice = AttentionChoice{};
    choice.reason = std::string("dpbench's kernels: preparing cuDNN's failed: ") + error.what();
  }
  return choice;
}

size_t CudaBackend::attention_workspace_bytes(const AttentionGeometry& g) {
  const size_t own_bytes = cuda_kernels::attention_workspace_bytes(g);
  const auto found = attention_plans_->choices.find(AttentionKey{g});
  if (found != attention_plans_->choices.end()) return found->second.workspace_bytes;
  // An impossible geometry is the ops' to refuse; a query during a capture cannot time, and
  // leaves the choice to a later one (meanwhile dpbench's kernels run it).
  if (!attention_geometry_problem(g).empty() || stream_capturing(stream_)) return own_bytes;
  AttentionChoice choice = choose_attention_path(g);
  choice.workspace_bytes = choice.cudnn ? std::max(own_bytes, cudnn_attention().workspace_bytes(g)) : own_bytes;
  attention_plans_->choices.emplace(AttentionKey{g}, choice);
  return choice.workspace_bytes;
}

AttentionChoice* CudaBackend::cudnn_attention_call(const AttentionGeometry& g, const int32_t* key_lengths,
                                                   const AttentionTensors& t) {
  if (key_lengths != nullptr || deterministic_ || !attention_tensors_aligned(t)) return nullptr;
  const auto found = attention_plans_->choices.find(AttentionKey{g});
  if (found == attention_plans_->choices.end() || !found->second.cudnn) return nullptr;
  return &found->second;
}

void CudaBackend::attention_forward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                                    const int32_t* key_lengths, const int32_t* step, void* o, float* lse,
                                    void* workspace) {
  check_attention(g, step, "attention_forward");
  AttentionTensors t;
  t.q = q;
  t.k = k;
  t.v = v;
  t.o = o;
  t.lse = lse;
  if (AttentionChoice* choice = cudnn_attention_call(g, key_lengths, t)) {
    cudnn_attention().forward(g, t, workspace);
    ++choice->cudnn_forward_calls;
    return;
  }
  cuda_kernels::launch_attention_forward(stream_, g, tf32(), q, k, v, key_lengths, step, o, lse);
}

void CudaBackend::attention_backward(const AttentionGeometry& g, const void* q, const void* k, const void* v,
                                     const void* o, const void* d_o, const float* lse, const int32_t* key_lengths,
                                     const int32_t* step, void* dq, void* dk, void* dv, void* workspace) {
  check_attention(g, step, "attention_backward");
  const AttentionTensors t{q, k, v, o, d_o, lse, dq, dk, dv};
  if (AttentionChoice* choice = cudnn_attention_call(g, key_lengths, t)) {
    cudnn_attention().backward(g, t, workspace);
    ++choice->cudnn_backward_calls;
    return;
  }
  cuda_kernels::launch_attention_backward(stream_, g, tf32(), q, k, v, o, d_o, lse, key_lengths, step, dq, dk, dv,
                                          workspace);
}

std::optional<AttentionChoice> CudaBackend::attention_choice(const AttentionGeometry& g) const {
  const auto found = attention_plans_->choices.find(AttentionKey{g});
  if (found == attention_plans_->choices.end()) return std::nullopt;
  return found->second;
}

}  // namespace dpbench
