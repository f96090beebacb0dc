// CudnnAttention (cudnn_attention.h): attention as cuDNN operation graphs. First the layout of
// our tensors as the graphs see them, then the graph builder's small helpers, the two graphs,
// engine choice and timing, then the class.
#include "engine/cuda/cudnn_attention.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cudnn_graph_api.h"
#include "engine/cuda/cudnn_plans.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/stream_timing.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

// Note [attention graphs]
// cuDNN has no attention operation before 9.21 that its sm_90 engines take; its fused
// flash-attention engines ("sdpa_sm90_flash_fprop_wgmma" and "..._bprop_wgmma", what PyTorch's
// cuDNN attention runs) recognise a pattern of generic operations instead, the one NVIDIA's
// cudnn-frontend lowers its SDPA node to for cuDNN before 9.21. These graphs follow that
// pattern operation for operation, since an engine matches the pattern, not the mathematics.
// Tensors are [batch, heads, rows, columns] (B, H, S, D); ours are sequence-major (token t of
// sentence b is row t * batch + b, head h at columns h * D), so Q is [B, H, Sq, D] with strides
// [q_stride, D, B * q_stride, 1], K^T is K with its last two dimensions and strides swapped, and
// the softmax statistics are fp32 [B, H, Sq, 1] packed: (b * H + h) * Sq + i, our lse index.
// Scores, their exponentials and gradients are virtual fp32 [B, H, Sq, Sk]; nothing of them is
// stored. The scale, 1 and the mask's value are fp32 scalars passed by value at each execution.
//
// Forward:  S = Q K^T;  S *= scale;  [causal: S = row >= column ? S : -inf, the row and column
//           from GEN_INDEX, compared by CMP_GE, picked by BINARY_SELECT: top-left aligned, query
//           i sees keys j <= i];  m = max_j S (a reduction);  E = exp(S - m);  l = sum_j E;
//           Stats = m + log l;  P = E / l, a virtual tensor of the data's type (the engine feeds
//           16-bit P to the second product, as our tensor-core kernels do);  O = P V.
//   Stats is the natural-log log-sum-exp of the scaled scores, lse_i = m_i + log l_i: what our
//   kernels keep, so a forward on one path pairs with a backward on the other.
// Backward: D = sum_d (dO * O) (a product and a sum reduction), times 1 into RowSums (stored
//           fp32 in our workspace: the frontend's softmax_sum, the engine's "dot_do_o" pass);
//           S = Q K^T * scale;  S -= Stats;  [causal mask as above];  P = exp(S);
//           dV = P^T dO (P^T a reshape of P to the data's type);  dP = dO V^T;
//           dS = (dP - RowSums) * P * scale;  dK = dS^T Q (dS^T likewise);
//           dQacc = dS K (K a reshape of K^T; dQacc stored fp32 in our workspace, which the
//           engine accumulates into with atomics) and dQ = identity(dQacc), rounded once.
//   The multiply by 1 and the identity are there because the pattern has them.
// The frontend swaps in -FLT_MAX for -inf before cuDNN 9.10; we do too. Before 9.6 it also
// zeroed dQacc before each backward, which the engines do themselves since; we do it before 9.6.
// On an H200 with cuDNN 9.14 both graphs found runtime-compiled plans at every shape tried
// (engines 2 and 1; 9.19's heuristics, asked offline for a described H200, list engines 2 and 1
// forward and 6 and 7 backward), and at gpt's shape they ran a layer's forward in 0.083 ms and
// its backward in 0.29 ms against our kernels' 0.47 and 1.27 ms (docs/BENCHMARKS.md, "cuDNN's
// fused flash attention for gpt").

// Scalars the graphs take by value (host memory each execution reads).
constexpr float kOne = 1.0f;

// Engine configs finalized and timed per pass, in the heuristics' order: each runtime-compiled
// one costs a compilation (on the H200 a test that prepared gpt's shape twice, four plans each
// time, ran in 5 s).
constexpr int kMaxCandidatePlans = 2;
// The plans' own workspace, above which a config is skipped.
constexpr size_t kMaxPlanWorkspaceBytes = size_t{256} << 20;

size_t round_up_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

int cudnn_runtime_version() { return static_cast<int>(cudnnGetVersion()); }

// cuDNN before 9.10 wants the lowest finite float as the masked scores' value (the frontend's
// rule); later ones -inf.
float masked_score_value() {
  return cudnn_runtime_version() < 91000 ? std::numeric_limits<float>::lowest()
                                         : -std::numeric_limits<float>::infinity();
}

enum AttentionUid : int64_t {
  kUidQ = 1,
  kUidK,  // as K^T
  kUidV,  // as V in the forward, V^T in the backward
  kUidO,
  kUidStats,
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
  kUidScale,
  kUidOne,
  kUidMaskValue,
  kUidRowSums,        // the backward's sum_d dO * O, in the workspace
  kUidDqAccumulator,  // the backward's fp32 dQ, in the workspace
  kFirstVirtualUid = 100,
};

using Dims = std::array<int64_t, 4>;
struct Layout {
  Dims dims, strides;
};

// ---- our tensors as [B, H, S, D] ------------------------------------------------------------------

struct AttentionShapes {
  int64_t b, h, sq, sk, d;
  explicit AttentionShapes(const AttentionGeometry& g)
      : b(g.batch), h(g.heads), sq(g.query_len), sk(g.key_len), d(g.head_dim) {}

  // A sequence-major tensor of `rows` tokens with rows `stride` elements apart.
  Layout rows_of(int64_t rows, int64_t stride) const { return {{b, h, rows, d}, {stride, d, b * stride, 1}}; }
  // Its transpose [B, H, D, rows] (K^T, V^T): the same memory, the last two dimensions swapped.
  Layout transposed_rows_of(int64_t rows, int64_t stride) const {
    return {{b, h, d, rows}, {stride, d, 1, b * stride}};
  }
  Layout scores() const { return {{b, h, sq, sk}, {h * sq * sk, sq * sk, sk, 1}}; }
  Layout transposed_scores() const { return {{b, h, sk, sq}, {h * sq * sk, sq * sk, 1, sk}}; }
  Layout row_statistics() const { return {{b, h, sq, 1}, {h * sq, sq, 1, 1}}; }
  Layout packed_rows() const { return {{b, h, sq, d}, {h * sq * d, sq * d, d, 1}}; }
  // The frontend's layout of the virtual dO * O, kept as it is (the pattern's, not a real layout).
  Layout row_products() const { return {{b, h, sq, d}, {h * sq * d, sq * d, h * d, 1}}; }
  static Layout scalar() { return {{1, 1, 1, 1}, {1, 1, 1, 1}}; }
};

// The backward's fp32 buffers at the start of the workspace, then the plan's own workspace.
size_t row_sums_bytes(const AttentionGeometry& g) { return round_up_256(g.lse_count() * sizeof(float)); }
size_t dq_accumulator_bytes(const AttentionGeometry& g) {
  return round_up_256(g.lse_count() * static_cast<size_t>(g.head_dim) * sizeof(float));
}
size_t plan_workspace_offset(const AttentionGeometry& g) { return row_sums_bytes(g) + dq_accumulator_bytes(g); }

// ---- the graph builder ----------------------------------------------------------------------------

// A graph and every descriptor it was built from (a finalized plan may refer to them).
struct AttentionGraph {
  std::deque<BackendDescriptor> parts;  // a deque: helpers hand out references into it
  std::vector<cudnnBackendDescriptor_t> operations;
  std::vector<int64_t> io_uids;  // the non-virtual tensors, by value or in memory
  BackendDescriptor graph;
  int64_t next_virtual_uid = kFirstVirtualUid;
};

enum class Storage { memory, by_value, virtual_tensor };

const BackendDescriptor& add_tensor(AttentionGraph& graph, int64_t uid, cudnnDataType_t type, const Layout& layout,
                                    Storage storage) {
  if (storage == Storage::virtual_tensor) uid = graph.next_virtual_uid++;
  BackendDescriptor tensor(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  set_attribute(tensor, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  set_attribute(tensor, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, layout.dims.data());
  set_attribute(tensor, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, layout.strides.data());
  set_attribute(tensor, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  set_attribute(tensor, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kTensorByteAlignment);
  const bool is_virtual = storage == Storage::virtual_tensor, by_value = storage == Storage::by_value;
  if (is_virtual) set_attribute(tensor, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  if (by_value) set_attribute(tensor, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
  finalize(tensor, "a tensor descriptor");
  if (!is_virtual) graph.io_uids.push_back(uid);
  graph.parts.push_back(std::move(tensor));
  return graph.parts.back();
}

const BackendDescriptor& add_virtual(AttentionGraph& graph, cudnnDataType_t type, const Layout& layout) {
  return add_tensor(graph, 0, type, layout, Storage::virtual_tensor);
}

void add_operation(AttentionGraph& graph, BackendDescriptor operation, const char* what) {
  finalize(operation, what);
  graph.parts.push_back(std::move(operation));
  graph.operations.push_back(graph.parts.back().get());
}

// y = mode(x[, b][, t]) computed in `precision`; GEN_INDEX takes an axis.
void add_pointwise(AttentionGraph& graph, cudnnPointwiseMode_t mode, cudnnDataType_t precision,
                   const BackendDescriptor& x, const BackendDescriptor* b, const BackendDescriptor* t,
                   const BackendDescriptor& y, std::optional<int64_t> axis = std::nullopt) {
  GraphOperation made = pointwise_operation(mode, precision, x, b, t, y, axis);
  graph.parts.push_back(std::move(made.descriptor));
  graph.parts.push_back(std::move(made.operation));
  graph.operations.push_back(graph.parts.back().get());
}

// The common binary form: y = x (mode) b in fp32.
void add_binary(AttentionGraph& graph, cudnnPointwiseMode_t mode, const BackendDescriptor& x,
                const BackendDescriptor& b, const BackendDescriptor& y) {
  add_pointwise(graph, mode, CUDNN_DATA_FLOAT, x, &b, nullptr, y);
}

void add_unary(AttentionGraph& graph, cudnnPointwiseMode_t mode, const BackendDescriptor& x,
               const BackendDescriptor& y) {
  add_pointwise(graph, mode, CUDNN_DATA_FLOAT, x, nullptr, nullptr, y);
}

// c = a b over the last two dimensions, batched over the first two, accumulated in fp32.
void add_matmul(AttentionGraph& graph, const BackendDescriptor& a, const BackendDescriptor& b,
                const BackendDescriptor& c) {
  BackendDescriptor matmul(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set_attribute(matmul, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  finalize(matmul, "a matmul descriptor");
  BackendDescriptor operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  set_descriptor(operation, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
  set_descriptor(operation, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
  set_descriptor(operation, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
  set_descriptor(operation, CUDNN_ATTR_OPERATION_MATMUL_DESC, matmul);
  graph.parts.push_back(std::move(matmul));
  add_operation(graph, std::move(operation), "a matmul operation");
}

// y = reduce(x) over the dimensions where y has extent 1 (here: the last).
void add_reduction(AttentionGraph& graph, cudnnReduceTensorOp_t reduce, const BackendDescriptor& x,
                   const BackendDescriptor& y) {
  GraphOperation made = reduction_operation(reduce, x, y);
  graph.parts.push_back(std::move(made.descriptor));
  graph.parts.push_back(std::move(made.operation));
  graph.operations.push_back(graph.parts.back().get());
}

// y: x viewed with y's dimensions, strides and type (a transpose, for the engines).
void add_reshape(AttentionGraph& graph, const BackendDescriptor& x, const BackendDescriptor& y) {
  BackendDescriptor operation(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  set_descriptor(operation, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
  set_descriptor(operation, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
  add_operation(graph, std::move(operation), "a reshape operation");
}

// scores where the key is visible, the mask's value elsewhere (Note [attention graphs]).
const BackendDescriptor& add_causal_mask(AttentionGraph& graph, const AttentionShapes& s,
                                         const BackendDescriptor& scores) {
  const Layout layout = s.scores();
  const auto& row = add_virtual(graph, CUDNN_DATA_INT32, layout);
  const auto& column = add_virtual(graph, CUDNN_DATA_INT32, layout);
  const auto& visible = add_virtual(graph, CUDNN_DATA_BOOLEAN, layout);
  const auto& mask_value =
      add_tensor(graph, kUidMaskValue, CUDNN_DATA_FLOAT, AttentionShapes::scalar(), Storage::by_value);
  const auto& masked = add_virtual(graph, CUDNN_DATA_FLOAT, layout);
  add_pointwise(graph, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, nullptr, nullptr, row, 2);
  add_pointwise(graph, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, nullptr, nullptr, column, 3);
  add_pointwise(graph, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &column, nullptr, visible);
  add_pointwise(graph, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scores, &mask_value, &visible, masked);
  return masked;
}

// Finalizes the graph; false, with cuDNN's reason in `refusal`, where no engine pattern takes it.
bool finish_graph(cudnnHandle_t handle, AttentionGraph& graph, std::string& refusal) {
  graph.graph = BackendDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set_attribute(graph.graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                static_cast<int64_t>(graph.operations.size()), graph.operations.data());
  // Deprecated since cuDNN 9.8 (see cudnn_graph_conv.cpp's graphs), still accepted.
  set_attribute(graph.graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  const cudnnStatus_t status = cudnnBackendFinalize(graph.graph.get());
  if (status == CUDNN_STATUS_SUCCESS) return true;
  refusal = std::string("the operation graph: ") + cudnnGetErrorString(status) + " (" + last_cudnn_message() + ")";
  return false;
}

// ---- the two graphs (Note [attention graphs]) ---------------------------------------------------

bool build_forward_graph(cudnnHandle_t handle, const AttentionGeometry& g, AttentionGraph& graph,
                         std::string& refusal) {
  const AttentionShapes s(g);
  const cudnnDataType_t io = cudnn_data_type(g.type), f32 = CUDNN_DATA_FLOAT;
  const auto& q = add_tensor(graph, kUidQ, io, s.rows_of(s.sq, g.q_stride), Storage::memory);
  const auto& k_t = add_tensor(graph, kUidK, io, s.transposed_rows_of(s.sk, g.k_stride), Storage::memory);
  const auto& v = add_tensor(graph, kUidV, io, s.rows_of(s.sk, g.v_stride), Storage::memory);
  const auto& scale = add_tensor(graph, kUidScale, f32, AttentionShapes::scalar(), Storage::by_value);
  const auto& o = add_tensor(graph, kUidO, io, s.rows_of(s.sq, g.o_stride), Storage::memory);
  const auto& stats = add_tensor(graph, kUidStats, f32, s.row_statistics(), Storage::memory);

  const auto& products = add_virtual(graph, f32, s.scores());
  add_matmul(graph, q, k_t, products);
  const auto& scaled = add_virtual(graph, f32, s.scores());
  add_binary(graph, CUDNN_POINTWISE_MUL, products, scale, scaled);
  const auto& scores = g.causal ? add_causal_mask(graph, s, scaled) : scaled;
  const auto& row_max = add_virtual(graph, f32, s.row_statistics());
  add_reduction(graph, CUDNN_REDUCE_TENSOR_MAX, scores, row_max);
  const auto& centred = add_virtual(graph, f32, s.scores());
  add_binary(graph, CUDNN_POINTWISE_SUB, scores, row_max, centred);
  const auto& exponentials = add_virtual(graph, f32, s.scores());
  add_unary(graph, CUDNN_POINTWISE_EXP, centred, exponentials);
  const auto& row_sum = add_virtual(graph, f32, s.row_statistics());
  add_reduction(graph, CUDNN_REDUCE_TENSOR_ADD, exponentials, row_sum);
  const auto& log_sum = add_virtual(graph, f32, s.row_statistics());
  add_unary(graph, CUDNN_POINTWISE_LOG, row_sum, log_sum);
  add_binary(graph, CUDNN_POINTWISE_ADD, row_max, log_sum, stats);
  const auto& probabilities = add_virtual(graph, io, s.scores());
  add_binary(graph, CUDNN_POINTWISE_DIV, exponentials, row_sum, probabilities);
  add_matmul(graph, probabilities, v, o);
  return finish_graph(handle, graph, refusal);
}

bool build_backward_graph(cudnnHandle_t handle, const AttentionGeometry& g, AttentionGraph& graph,
                          std::string& refusal) {
  const AttentionShapes s(g);
  const cudnnDataType_t io = cudnn_data_type(g.type), f32 = CUDNN_DATA_FLOAT;
  const Layout q_layout = s.rows_of(s.sq, g.q_stride), o_layout = s.rows_of(s.sq, g.o_stride);
  const auto& q = add_tensor(graph, kUidQ, io, q_layout, Storage::memory);
  const auto& k_t = add_tensor(graph, kUidK, io, s.transposed_rows_of(s.sk, g.k_stride), Storage::memory);
  const auto& v_t = add_tensor(graph, kUidV, io, s.transposed_rows_of(s.sk, g.v_stride), Storage::memory);
  const auto& o = add_tensor(graph, kUidO, io, o_layout, Storage::memory);
  const auto& d_o = add_tensor(graph, kUidDO, io, o_layout, Storage::memory);
  const auto& stats = add_tensor(graph, kUidStats, f32, s.row_statistics(), Storage::memory);
  const auto& scale = add_tensor(graph, kUidScale, f32, AttentionShapes::scalar(), Storage::by_value);
  const auto& one = add_tensor(graph, kUidOne, f32, AttentionShapes::scalar(), Storage::by_value);
  const auto& row_sums = add_tensor(graph, kUidRowSums, f32, s.row_statistics(), Storage::memory);
  const auto& dq_accumulator = add_tensor(graph, kUidDqAccumulator, f32, s.packed_rows(), Storage::memory);
  const auto& dq = add_tensor(graph, kUidDQ, io, q_layout, Storage::memory);
  const auto& dk = add_tensor(graph, kUidDK, io, s.rows_of(s.sk, g.k_stride), Storage::memory);
  const auto& dv = add_tensor(graph, kUidDV, io, s.rows_of(s.sk, g.v_stride), Storage::memory);

  // RowSums = sum_d dO * O, times 1.
  const auto& row_products = add_virtual(graph, f32, s.row_products());
  add_binary(graph, CUDNN_POINTWISE_MUL, d_o, o, row_products);
  const auto& row_dots = add_virtual(graph, f32, s.row_statistics());
  add_reduction(graph, CUDNN_REDUCE_TENSOR_ADD, row_products, row_dots);
  add_binary(graph, CUDNN_POINTWISE_MUL, row_dots, one, row_sums);

  // P = exp(scale Q K^T - Stats), masked.
  const auto& products = add_virtual(graph, f32, s.scores());
  add_matmul(graph, q, k_t, products);
  const auto& scaled = add_virtual(graph, f32, s.scores());
  add_binary(graph, CUDNN_POINTWISE_MUL, products, scale, scaled);
  const auto& centred = add_virtual(graph, f32, s.scores());
  add_binary(graph, CUDNN_POINTWISE_SUB, scaled, stats, centred);
  const auto& exponent = g.causal ? add_causal_mask(graph, s, centred) : centred;
  const auto& probabilities = add_virtual(graph, f32, s.scores());
  add_unary(graph, CUDNN_POINTWISE_EXP, exponent, probabilities);

  // dV = P^T dO.
  const auto& probabilities_t = add_virtual(graph, io, s.transposed_scores());
  add_reshape(graph, probabilities, probabilities_t);
  add_matmul(graph, probabilities_t, d_o, dv);

  // dS = (dO V^T - RowSums) * P * scale.
  const auto& d_probabilities = add_virtual(graph, f32, s.scores());
  add_matmul(graph, d_o, v_t, d_probabilities);
  const auto& d_centred = add_virtual(graph, f32, s.scores());
  add_binary(graph, CUDNN_POINTWISE_SUB, d_probabilities, row_sums, d_centred);
  const auto& d_exponent = add_virtual(graph, f32, s.scores());
  add_binary(graph, CUDNN_POINTWISE_MUL, d_centred, probabilities, d_exponent);
  const auto& d_scores = add_virtual(graph, f32, s.scores());
  add_binary(graph, CUDNN_POINTWISE_MUL, d_exponent, scale, d_scores);

  // dK = dS^T Q.
  const auto& d_scores_t = add_virtual(graph, io, s.transposed_scores());
  add_reshape(graph, d_scores, d_scores_t);
  add_matmul(graph, d_scores_t, q, dk);

  // dQ = dS K through the fp32 accumulator.
  const auto& k = add_virtual(graph, io, s.rows_of(s.sk, g.k_stride));
  add_reshape(graph, k_t, k);
  add_matmul(graph, d_scores, k, dq_accumulator);
  add_unary(graph, CUDNN_POINTWISE_IDENTITY, dq_accumulator, dq);
  return finish_graph(handle, graph, refusal);
}

// ---- running a graph ----------------------------------------------------------------------------

// Host-side only: cuDNN copies the pointers (and reads the by-value scalars) into a descriptor.
BackendDescriptor variant_pack(const AttentionGraph& graph, const AttentionGeometry& g, const AttentionTensors& t,
                               const float& scale, const float& mask_value, void* workspace) {
  auto* base = static_cast<unsigned char*>(workspace);
  std::vector<void*> data;
  for (const int64_t uid : graph.io_uids) {
    const void* pointer = nullptr;
    switch (uid) {
      case kUidQ:
        pointer = t.q;
        break;
      case kUidK:
        pointer = t.k;
        break;
      case kUidV:
        pointer = t.v;
        break;
      case kUidO:
        pointer = t.o;
        break;
      case kUidStats:
        pointer = t.lse;
        break;
      case kUidDO:
        pointer = t.d_o;
        break;
      case kUidDQ:
        pointer = t.dq;
        break;
      case kUidDK:
        pointer = t.dk;
        break;
      case kUidDV:
        pointer = t.dv;
        break;
      case kUidScale:
        pointer = &scale;
        break;
      case kUidOne:
        pointer = &kOne;
        break;
      case kUidMaskValue:
        pointer = &mask_value;
        break;
      case kUidRowSums:
        pointer = base;
        break;
      case kUidDqAccumulator:
        pointer = base + row_sums_bytes(g);
        break;
      default:
        throw RuntimeError("CudnnAttention: a graph tensor of no known role (" + std::to_string(uid) + ")");
    }
    // Inputs and outputs alike are void* to the variant pack; inputs are only read.
    data.push_back(const_cast<void*>(pointer));
  }
  void* plan_workspace = base + plan_workspace_offset(g);
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(graph.io_uids.size()),
                graph.io_uids.data());
  set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(data.size()),
                data.data());
  set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &plan_workspace);
  finalize(pack, "the variant pack");
  return pack;
}

// One pass's chosen plan.
struct PassPlan {
  AttentionGraph graph;
  CandidatePlan chosen;
  float milliseconds = 0.0f;
  int timed = 0;
};

std::string describe_pass(const char* name, const PassPlan& pass) {
  const EngineNotes& notes = pass.chosen.notes;
  char text[160];
  std::snprintf(text, sizeof(text), "%s: engine %lld%s%s, %.1f MiB workspace, %.3f ms, fastest of %d timed", name,
                static_cast<long long>(notes.index), notes.runtime_compiled ? " (runtime compiled)" : "",
                notes.nondeterministic ? " (nondeterministic)" : "",
                static_cast<double>(pass.chosen.workspace_bytes) / (1 << 20), static_cast<double>(pass.milliseconds),
                pass.timed);
  return text;
}

// Steps of choosing one pass's plan: candidates from heuristics mode A (the fallback list where A
// has none), each timed on the scratch tensors, the fastest kept. No numerical note excludes a
// config: the pattern fixes the precision (16-bit P and dS, fp32 elsewhere).
std::string choose_pass_plan(cudnnHandle_t handle, cudaStream_t stream, MemoryLedger& memory,
                             const AttentionGeometry& g, const AttentionTensors& scratch, PassPlan& pass,
                             const char* name, DeviceMemory& workspace) {
  CandidateCounts counts;
  auto no_exclusions = [](const EngineNotes&) { return false; };
  std::vector<CandidatePlan> candidates = candidate_plans(
      handle, pass.graph.graph, CUDNN_HEUR_MODE_A, kMaxPlanWorkspaceBytes, kMaxCandidatePlans, no_exclusions, counts);
  if (candidates.empty()) {
    candidates = candidate_plans(handle, pass.graph.graph, CUDNN_HEUR_MODE_FALLBACK, kMaxPlanWorkspaceBytes,
                                 kMaxCandidatePlans, no_exclusions, counts);
  }
  if (candidates.empty()) return std::string("no ") + name + " plan (" + counts.text() + ")";
  size_t largest = 0;
  for (const CandidatePlan& candidate : candidates) largest = std::max(largest, candidate.workspace_bytes);
  const size_t needed = plan_workspace_offset(g) + largest;
  if (workspace.bytes() < needed)
    workspace = DeviceMemory::transient(needed, memory, MemoryTag{MemoryCategory::scratch, "attention path timing"});
  const float scale = g.scale, mask_value = masked_score_value();
  const BackendDescriptor pack = variant_pack(pass.graph, g, scratch, scale, mask_value, workspace.data());
  int fastest = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const float ms = time_plan(handle, stream, candidates[i].plan, pack, kAttentionTimedRuns);
    if (ms < 0.0f) {
      ++counts.failed_to_run;
      counts.last_refusal = last_cudnn_message();
      continue;
    }
    ++pass.timed;
    if (fastest < 0 || ms < pass.milliseconds) {
      fastest = static_cast<int>(i);
      pass.milliseconds = ms;
    }
  }
  if (fastest < 0) return std::string("no ") + name + " plan ran (" + counts.text() + ")";
  pass.chosen = std::move(candidates[static_cast<size_t>(fastest)]);
  return "";
}

void require_aligned(const AttentionTensors& t, bool backward) {
  if (!attention_tensors_aligned(t) || (backward && (t.d_o == nullptr || t.dq == nullptr))) {
    throw RuntimeError("CudnnAttention: a tensor is not 16-byte aligned, as the plans were promised");
  }
}

}  // namespace

std::string cudnn_attention_refusal(const AttentionGeometry& g) {
  if (g.type != DataType::f16 && g.type != DataType::bf16) {
    return std::string(data_type_name(g.type)) + " data (16-bit only)";
  }
  if (g.dropout_rate > 0.0f) return "dropout";
  if (g.head_dim % 8 != 0 || g.head_dim > 128) {
    return "heads of " + std::to_string(g.head_dim) + " (a multiple of 8 up to 128 only)";
  }
  if (g.q_stride % 8 != 0 || g.k_stride % 8 != 0 || g.v_stride % 8 != 0 || g.o_stride % 8 != 0) {
    return "row strides off 16 bytes (multiples of 8 elements only)";
  }
  if (g.query_len == 1 && g.key_len == 1) return "a single query and key";
  if (g.causal && g.query_len != g.key_len) return "causal attention with query_len != key_len";
  const int version = cudnn_runtime_version();
  if (version >= 91000 && version < 91002) {
    return "attention on cuDNN 9.10.0 and 9.10.1 (wrong 16-bit forwards)";
  }
  return "";
}

bool attention_tensors_aligned(const AttentionTensors& t) {
  for (const void* pointer : {t.q, t.k, t.v, t.o, t.d_o, static_cast<const void*>(t.lse), t.dq, t.dk, t.dv}) {
    if (!is_tensor_aligned(pointer)) return false;
  }
  return true;
}

// ---- the class ----------------------------------------------------------------------------------

struct CudnnAttention::Impl {
  struct Plan {
    PassPlan forward, backward;
    std::string refusal;  // non-empty: no plan for one of the passes, and why
  };

  cudnnHandle_t handle = nullptr;
  MemoryLedger* memory = nullptr;
  std::map<AttentionKey, Plan> plans;

  const Plan& find(const AttentionGeometry& g) const {
    const auto found = plans.find(AttentionKey{g});
    if (found == plans.end() || !found->second.refusal.empty()) {
      throw RuntimeError("CudnnAttention: no prepared plans for this geometry (batch " + std::to_string(g.batch) +
                         ", heads " + std::to_string(g.heads) + ", query_len " + std::to_string(g.query_len) + ")");
    }
    return found->second;
  }
  cudaStream_t stream() const {
    cudaStream_t stream = nullptr;
    DPB_CUDNN_CHECK(cudnnGetStream(handle, &stream));
    return stream;
  }
  Plan build(const AttentionGeometry& g, const AttentionTensors& scratch);
};

CudnnAttention::Impl::Plan CudnnAttention::Impl::build(const AttentionGeometry& g, const AttentionTensors& scratch) {
  Plan plan;
  const std::string refusal = cudnn_attention_refusal(g);
  if (!refusal.empty()) {
    plan.refusal = refusal;
    return plan;
  }
  // A descriptor cuDNN refuses outright (an attribute this version lacks, a rule it enforces)
  // throws from the setters; its message, with the attribute and cuDNN's words, is the refusal.
  try {
    std::string why;
    if (!build_forward_graph(handle, g, plan.forward.graph, why)) {
      plan.refusal = "forward " + why;
      return plan;
    }
    if (!build_backward_graph(handle, g, plan.backward.graph, why)) {
      plan.refusal = "backward " + why;
      return plan;
    }
    DeviceMemory workspace;  // grown to the largest candidate's need
    // The forward first: its runs leave the scratch's o and lse for the backward to read.
    plan.refusal = choose_pass_plan(handle, stream(), *memory, g, scratch, plan.forward, "forward", workspace);
    if (plan.refusal.empty()) {
      plan.refusal = choose_pass_plan(handle, stream(), *memory, g, scratch, plan.backward, "backward", workspace);
    }
  } catch (const RuntimeError& error) {
    plan.refusal = error.what();
  }
  return plan;
}

CudnnAttention::CudnnAttention(cudnnHandle_t handle, MemoryLedger& memory) : impl_(std::make_unique<Impl>()) {
  impl_->handle = handle;
  impl_->memory = &memory;
}

CudnnAttention::~CudnnAttention() = default;

std::string CudnnAttention::prepare(const AttentionGeometry& g, const AttentionTensors& scratch) {
  auto found = impl_->plans.find(AttentionKey{g});
  if (found == impl_->plans.end()) {
    require_aligned(scratch, /*backward=*/true);
    if (stream_capturing(impl_->stream())) {
      throw RuntimeError("CudnnAttention: prepare() of a new geometry during a stream capture");
    }
    found = impl_->plans.emplace(AttentionKey{g}, impl_->build(g, scratch)).first;
  }
  return found->second.refusal;
}

size_t CudnnAttention::workspace_bytes(const AttentionGeometry& g) const {
  const Impl::Plan& plan = impl_->find(g);
  return plan_workspace_offset(g) + std::max(plan.forward.chosen.workspace_bytes, plan.backward.chosen.workspace_bytes);
}

double CudnnAttention::forward_milliseconds(const AttentionGeometry& g) const {
  return impl_->find(g).forward.milliseconds;
}

double CudnnAttention::backward_milliseconds(const AttentionGeometry& g) const {
  return impl_->find(g).backward.milliseconds;
}

std::string CudnnAttention::describe(const AttentionGeometry& g) const {
  const Impl::Plan& plan = impl_->find(g);
  return describe_pass("forward", plan.forward) + "; " + describe_pass("backward", plan.backward) + "; cuDNN " +
         std::to_string(cudnn_runtime_version());
}

void CudnnAttention::forward(const AttentionGeometry& g, const AttentionTensors& t, void* workspace) const {
  const Impl::Plan& plan = impl_->find(g);
  require_aligned(t, /*backward=*/false);
  if (workspace == nullptr) throw RuntimeError("CudnnAttention::forward: no workspace");
  const float scale = g.scale, mask_value = masked_score_value();
  const BackendDescriptor pack = variant_pack(plan.forward.graph, g, t, scale, mask_value, workspace);
  DPB_CUDNN_CHECK(cudnnBackendExecute(impl_->handle, plan.forward.chosen.plan.get(), pack.get()));
}

void CudnnAttention::backward(const AttentionGeometry& g, const AttentionTensors& t, void* workspace) const {
  const Impl::Plan& plan = impl_->find(g);
  require_aligned(t, /*backward=*/true);
  if (workspace == nullptr) throw RuntimeError("CudnnAttention::backward: no workspace");
  if (cudnn_runtime_version() < 90600) {
    // Before 9.6 the engines add into dQacc without clearing it first (Note [attention graphs]).
    DPB_CUDA_CHECK(cudaMemsetAsync(static_cast<unsigned char*>(workspace) + row_sums_bytes(g), 0,
                                   dq_accumulator_bytes(g), impl_->stream()));
  }
  const float scale = g.scale, mask_value = masked_score_value();
  const BackendDescriptor pack = variant_pack(plan.backward.graph, g, t, scale, mask_value, workspace);
  DPB_CUDNN_CHECK(cudnnBackendExecute(impl_->handle, plan.backward.chosen.plan.get(), pack.get()));
}

}  // namespace dpbench
