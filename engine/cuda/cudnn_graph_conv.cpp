// CudnnGraphConvolutions (cudnn_graph_conv.h): convolutions as cuDNN operation graphs. First the
// graphs of each pass, then engine choice (note filters, timing; the plumbing they share with the
// attention graphs is cudnn_graph_api.h), then the class.
#include "engine/cuda/cudnn_graph_conv.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cudnn_graph_api.h"
#include "engine/cuda/cudnn_plans.h"
#include "engine/cuda/cudnn_raii.h"
#include "engine/cuda/stream_timing.h"

namespace dpbench {
namespace {

// Note [graph convolution plans]
// A plan is one finalized cuDNN execution plan for one (geometry with its types, pass, epilogue)
// of an object whose TF32 choice is fixed. It is chosen once, in prepare():
//   1. the operation graph: the convolution, then for bias_relu an fp32 add of the (1, K, 1, 1)
//      bias and a ReLU, both on fp32 virtual tensors so the epilogue rounds once, to the output
//      type. accumulate asks the convolution for beta = 1 (the pre-compiled engines blend with
//      the old dx); where no engine takes that, dgrad + dx becomes a fused pointwise add whose
//      second input is dx itself, read before it is written. On an H100 with cuDNN 9.14 every
//      geometry of the [gpu] tests took beta = 1; the fused add, forced, ran right in NHWC
//      16-bit and found no engine elsewhere;
//   2. engine configs from heuristics mode A, or from the fallback list where mode A yields no
//      usable plan; configs whose numerical notes break the fp32-compute contract are skipped:
//      tensor cores on fp32 data (that is TF32) unless allowed, inputs converted down, reductions
//      in reduced precision;
//   3. execution plans finalized for the first kMaxCandidatePlans configs that cuDNN accepts and
//      whose workspace fits the caller's limit;
//   4. each timed on the caller's buffers (one warm-up, then kTimedRuns between CUDA events); the
//      fastest is kept. Timing, not the heuristics' order: the order is a model's guess, which
//      is why the classic path times its algorithms too (cuda_conv_ops.cpp).
//      Runtime-compiled candidates cost a compilation each: on that H100 a fused bias + ReLU plan
//      took 0.3 to 4.6 s to prepare, the four plain passes of a 16-bit geometry 0.2 to 2.6 s.
// The statistics epilogues add cuDNN's GenStats operation (sum and sum of squares per channel)
// reading the convolution's stored output, or where no engine takes that, a sum reduction of y
// and one of y * y (the generic runtime-fusion engines' form); input_scale_bias_relu_statistics adds, before the
// convolution, a multiply by the per-channel scale, an add of the bias and a ReLU on virtual
// tensors, scale, bias and virtual tensors in x's type (cudnn-frontend's conv_genstats graph;
// with fp32 ones no engine on sm_90 took the graph; NVIDIA's MLPerf ResNet-50 runs its batch
// norms this way). Only runtime-fused engines take these graphs.
// A graph no engine runs is remembered as unsupported, so a caller that falls back asks once.
constexpr int kMaxCandidatePlans = 8;
constexpr int kTimedRuns = 3;

// The variant pack's tensors are at most x, w, y, the input's scale and bias, and the two sums.
constexpr int kMaxGraphInputsOutputs = 7;

enum TensorUid : int64_t {
  kUidX = 1,  // x, or dx
  kUidW,      // w, or dw
  kUidY,      // y, or dy
  kUidBias,
  kUidOldDx,  // dx before the accumulation: the same buffer as kUidX
  kUidConvolved,  // virtual: the convolution's fp32 result before the epilogue
  kUidBiased,     // virtual: conv + bias, before the ReLU
  kUidSum,        // statistics: per output channel, the sum of y
  kUidSquareSum,  // ... and the sum of its squares
  kUidInputScale, // input_scale_bias_relu_statistics: per input channel
  kUidScaled,     // virtual: x * scale
  kUidShifted,    // virtual: x * scale + bias
  kUidActivated,  // virtual: relu(x * scale + bias), the convolution's input
  kUidSquares,    // virtual: y * y (the statistics by reductions)
};

// ---- the operation graphs -----------------------------------------------------------------------

// A graph and every descriptor it was built from. cuDNN does not promise that a finalized plan
// stands alone, so the parts live as long as the plan does (cudnn-frontend keeps them too).
struct OperationGraph {
  std::deque<BackendDescriptor> parts;  // a deque: add_tensor hands out references into it
  BackendDescriptor graph;
  std::array<int64_t, kMaxGraphInputsOutputs> io_uids{};  // the non-virtual tensors
  int io_count = 0;
};

using Dims = std::array<int64_t, 4>;

// Dims are logical (n, c, h, w) in either layout, as the graph API wants them; the layout is in
// the strides. A filter is (k, c, r, s) with the same rule (KCRS or KRSC).
Dims packed_strides(const Dims& dims, DataFormat format) {
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  if (format == DataFormat::nchw) return {c * h * w, h * w, w, 1};
  return {h * w * c, 1, w * c, c};
}

const BackendDescriptor& add_tensor(OperationGraph& graph, TensorUid uid, cudnnDataType_t type,
                                    const Dims& dims, DataFormat format, bool is_virtual) {
  BackendDescriptor tensor(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const Dims strides = packed_strides(dims, format);
  const int64_t id = uid;
  set_attribute(tensor, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  set_attribute(tensor, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  set_attribute(tensor, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  set_attribute(tensor, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id);
  set_attribute(tensor, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kTensorByteAlignment);
  set_attribute(tensor, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  finalize(tensor, "a tensor descriptor");
  if (!is_virtual) graph.io_uids[static_cast<size_t>(graph.io_count++)] = uid;
  graph.parts.push_back(std::move(tensor));
  return graph.parts.back();
}

const BackendDescriptor& add_convolution_descriptor(OperationGraph& graph, const ConvGeometry& g) {
  BackendDescriptor convolution(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;  // fp32 arithmetic whatever the data type
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial_dims = 2;
  const std::array<int64_t, 2> strides{g.stride_h, g.stride_w}, padding{g.pad_h, g.pad_w},
      dilations{1, 1};
  set_attribute(convolution, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  set_attribute(convolution, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
                &mode);
  set_attribute(convolution, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
                &spatial_dims);
  set_attribute(convolution, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
                strides.data());
  // Symmetric padding: the same zeros after as before (ConvGeometry's rule).
  set_attribute(convolution, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2,
                padding.data());
  set_attribute(convolution, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2,
                padding.data());
  set_attribute(convolution, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2,
                dilations.data());
  finalize(convolution, "the convolution descriptor");
  graph.parts.push_back(std::move(convolution));
  return graph.parts.back();
}

// The attribute names of one convolution pass's operation descriptor, in (alpha, beta,
// descriptor, x, w, y) order; for backward_data x is dx and y is dy, for backward_filter w is dw.
struct ConvolutionAttributes {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t alpha, beta, convolution, x, w, y;
};

ConvolutionAttributes convolution_attributes(ConvPass pass) {
  switch (pass) {
    case ConvPass::backward_data:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY};
    case ConvPass::backward_filter:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY};
    default:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y};
  }
}

void add_pointwise(OperationGraph& graph, cudnnPointwiseMode_t mode, const BackendDescriptor& x,
                   const BackendDescriptor* b, const BackendDescriptor& y) {
  GraphOperation made = pointwise_operation(mode, CUDNN_DATA_FLOAT, x, b, nullptr, y);
  graph.parts.push_back(std::move(made.descriptor));
  graph.parts.push_back(std::move(made.operation));
}

// How a graph expresses its epilogue where cuDNN offers two forms (Note [graph convolution
// plans], step 1): dgrad's accumulation by beta = 1 or a fused add; the statistics by the GenStats
// operation or by two sum reductions (of y and of y * y), which the generic runtime-fusion engines
// take where the GenStats pattern has no engine.
enum class AccumulateBy { beta, fused_add };
enum class StatisticsBy { gen_stats, reductions };
struct GraphForm {
  AccumulateBy accumulate_by = AccumulateBy::beta;
  StatisticsBy statistics_by = StatisticsBy::gen_stats;
};

// A sum over (n, h, w) per channel of `x` into `sum`, in fp32.
void add_channel_sum(OperationGraph& graph, const BackendDescriptor& x, const BackendDescriptor& sum) {
  GraphOperation made = reduction_operation(CUDNN_REDUCE_TENSOR_ADD, x, sum);
  graph.parts.push_back(std::move(made.descriptor));
  graph.parts.push_back(std::move(made.operation));
}

// The graph of (g, pass, epilogue); false, with cuDNN's reason in `refusal`, when cuDNN refuses
// the graph itself as unsupported.
bool build_operation_graph(cudnnHandle_t handle, const ConvGeometry& g, ConvPass pass,
                           ConvEpilogue epilogue, GraphForm form,
                           OperationGraph& graph, std::string& refusal) {
  const cudnnDataType_t type = cudnn_data_type(g.input.type);
  const DataFormat format = g.input.format;
  const Dims x_dims{g.input.n, g.input.c, g.input.h, g.input.w};
  const Dims w_dims{g.filter.k, g.filter.c, g.filter.r, g.filter.s};
  const Dims y_dims{g.output.n, g.output.c, g.output.h, g.output.w};
  const bool fused_bias_relu = epilogue == ConvEpilogue::bias_relu;
  const bool fused_add =
      epilogue == ConvEpilogue::accumulate && form.accumulate_by == AccumulateBy::fused_add;
  const bool input_prologue = epilogue == ConvEpilogue::input_scale_bias_relu_statistics;
  const bool statistics = input_prologue || epilogue == ConvEpilogue::statistics;
  std::vector<cudnnBackendDescriptor_t> operations;

  // The convolution's own output is virtual fp32 when an epilogue follows it.
  const bool output_is_x = pass == ConvPass::backward_data;
  const bool convolved_virtual = fused_bias_relu || fused_add;
  const BackendDescriptor* input = nullptr;
  if (input_prologue) {
    // relu(x * scale + bias) on virtual tensors of x's type, the convolution's input.
    const Dims channel_dims{1, g.input.c, 1, 1};
    const auto& stored_x = add_tensor(graph, kUidX, type, x_dims, format, false);
    const auto& scale = add_tensor(graph, kUidInputScale, type, channel_dims, format, false);
    const auto& bias = add_tensor(graph, kUidBias, type, channel_dims, format, false);
    const auto& scaled = add_tensor(graph, kUidScaled, type, x_dims, format, true);
    const auto& shifted = add_tensor(graph, kUidShifted, type, x_dims, format, true);
    const auto& activated = add_tensor(graph, kUidActivated, type, x_dims, format, true);
    add_pointwise(graph, CUDNN_POINTWISE_MUL, stored_x, &scale, scaled);
    operations.push_back(graph.parts.back().get());
    add_pointwise(graph, CUDNN_POINTWISE_ADD, scaled, &bias, shifted);
    operations.push_back(graph.parts.back().get());
    add_pointwise(graph, CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, activated);
    operations.push_back(graph.parts.back().get());
    input = &activated;
  }
  const auto& x = input != nullptr ? *input
                  : convolved_virtual && output_is_x
                      ? add_tensor(graph, kUidConvolved, CUDNN_DATA_FLOAT, x_dims, format, true)
                      : add_tensor(graph, kUidX, type, x_dims, format, false);
  const auto& w = add_tensor(graph, kUidW, type, w_dims, format, false);
  const auto& y = convolved_virtual && !output_is_x
                      ? add_tensor(graph, kUidConvolved, CUDNN_DATA_FLOAT, y_dims, format, true)
                      : add_tensor(graph, kUidY, type, y_dims, format, false);
  const auto& convolution = add_convolution_descriptor(graph, g);

  const ConvolutionAttributes names = convolution_attributes(pass);
  BackendDescriptor operation(names.type);
  const float alpha = 1.0f;
  const float beta = epilogue == ConvEpilogue::accumulate && !fused_add ? 1.0f : 0.0f;
  set_attribute(operation, names.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  set_attribute(operation, names.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  set_descriptor(operation, names.convolution, convolution);
  set_descriptor(operation, names.x, x);
  set_descriptor(operation, names.w, w);
  set_descriptor(operation, names.y, y);
  finalize(operation, "the convolution operation");
  graph.parts.push_back(std::move(operation));
  operations.push_back(graph.parts.back().get());

  if (fused_bias_relu) {
    const Dims bias_dims{1, g.output.c, 1, 1};
    const auto& bias = add_tensor(graph, kUidBias, CUDNN_DATA_FLOAT, bias_dims, format, false);
    const auto& biased = add_tensor(graph, kUidBiased, CUDNN_DATA_FLOAT, y_dims, format, true);
    const auto& output = add_tensor(graph, kUidY, type, y_dims, format, false);
    add_pointwise(graph, CUDNN_POINTWISE_ADD, y, &bias, biased);
    operations.push_back(graph.parts.back().get());
    add_pointwise(graph, CUDNN_POINTWISE_RELU_FWD, biased, nullptr, output);
    operations.push_back(graph.parts.back().get());
  } else if (fused_add) {
    const auto& old_dx = add_tensor(graph, kUidOldDx, type, x_dims, format, false);
    const auto& dx = add_tensor(graph, kUidX, type, x_dims, format, false);
    add_pointwise(graph, CUDNN_POINTWISE_ADD, x, &old_dx, dx);
    operations.push_back(graph.parts.back().get());
  } else if (statistics && form.statistics_by == StatisticsBy::reductions) {
    const Dims channel_dims{1, g.output.c, 1, 1};
    const auto& sum = add_tensor(graph, kUidSum, CUDNN_DATA_FLOAT, channel_dims, format, false);
    const auto& square_sum = add_tensor(graph, kUidSquareSum, CUDNN_DATA_FLOAT, channel_dims, format, false);
    const auto& squares = add_tensor(graph, kUidSquares, CUDNN_DATA_FLOAT, y_dims, format, true);
    add_channel_sum(graph, y, sum);
    operations.push_back(graph.parts.back().get());
    add_pointwise(graph, CUDNN_POINTWISE_MUL, y, &y, squares);
    operations.push_back(graph.parts.back().get());
    add_channel_sum(graph, squares, square_sum);
    operations.push_back(graph.parts.back().get());
  } else if (statistics) {
    const Dims channel_dims{1, g.output.c, 1, 1};
    const auto& sum = add_tensor(graph, kUidSum, CUDNN_DATA_FLOAT, channel_dims, format, false);
    const auto& square_sum = add_tensor(graph, kUidSquareSum, CUDNN_DATA_FLOAT, channel_dims, format, false);
    BackendDescriptor stats(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set_attribute(stats, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
    set_attribute(stats, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    set_descriptor(stats, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y);
    set_descriptor(stats, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum);
    set_descriptor(stats, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, square_sum);
    finalize(stats, "the statistics operation");
    graph.parts.push_back(std::move(stats));
    operations.push_back(graph.parts.back().get());
  }

  graph.graph = BackendDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set_attribute(graph.graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                static_cast<int64_t>(operations.size()), operations.data());
  // Deprecated since cuDNN 9.8 in favour of device-property descriptors, which only matter when
  // building for a device other than the handle's; still accepted, and required before 9.8.
  set_attribute(graph.graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  const cudnnStatus_t status = cudnnBackendFinalize(graph.graph.get());
  if (is_not_supported(status)) {
    refusal = last_cudnn_message();
    return false;
  }
  DPB_CUDNN_CHECK(status);
  return true;
}

// ---- engine choice ------------------------------------------------------------------------------

// Steps 2 and 3 of Note [graph convolution plans] for one heuristics mode.
std::vector<CandidatePlan> conv_candidate_plans(cudnnHandle_t handle, const OperationGraph& graph,
                                                cudnnBackendHeurMode_t mode, bool fp32_data, bool allow_tf32,
                                                size_t workspace_limit, CandidateCounts& counts) {
  return candidate_plans(handle, graph.graph, mode, workspace_limit, kMaxCandidatePlans,
                         [&](const EngineNotes& notes) {
                           return (fp32_data && notes.tensor_cores && !allow_tf32) || notes.down_converts_inputs ||
                                  notes.reduces_in_reduced_precision;
                         },
                         counts);
}

// The device buffers of one run, by the geometry's roles (see prepare()).
struct ConvPointers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* y = nullptr;
  const void* bias = nullptr;  // bias_relu's, or the input's (input_scale_bias_relu_statistics)
  ConvStatisticsBuffers statistics;
};

void require_aligned(const void* pointer, const char* what) {
  if (!is_tensor_aligned(pointer)) {
    throw RuntimeError(std::string("CudnnGraphConvolutions: the ") + what +
                       " buffer is not 16-byte aligned, as every plan was promised");
  }
}

void require_aligned(const ConvPointers& pointers) {
  require_aligned(pointers.x, "x");
  require_aligned(pointers.w, "w");
  require_aligned(pointers.y, "y");
  require_aligned(pointers.bias, "bias");
  require_aligned(pointers.statistics.sum, "sum");
  require_aligned(pointers.statistics.square_sum, "square_sum");
  require_aligned(pointers.statistics.input_scale, "input scale");
}

// Host-side only: cuDNN copies the pointers into a descriptor, no device memory is touched.
BackendDescriptor variant_pack(const OperationGraph& graph, const ConvPointers& pointers,
                               void* workspace) {
  std::array<void*, kMaxGraphInputsOutputs> data{};
  for (int i = 0; i < graph.io_count; ++i) {
    const int64_t uid = graph.io_uids[static_cast<size_t>(i)];
    const void* pointer = uid == kUidW ? pointers.w
                          : uid == kUidY ? pointers.y
                          : uid == kUidBias ? pointers.bias
                          : uid == kUidSum ? pointers.statistics.sum
                          : uid == kUidSquareSum ? pointers.statistics.square_sum
                          : uid == kUidInputScale ? pointers.statistics.input_scale
                          : pointers.x;  // kUidX and kUidOldDx: dx is read and written in place
    // The variant pack takes inputs and outputs alike as void*; inputs are only read.
    data[static_cast<size_t>(i)] = const_cast<void*>(pointer);
  }
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, graph.io_count,
                graph.io_uids.data());
  set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, graph.io_count,
                data.data());
  set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  finalize(pack, "the variant pack");
  return pack;
}

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::backward_data: return "backward-data";
    case ConvPass::backward_filter: return "backward-filter";
    default: return "forward";
  }
}

const char* epilogue_name(ConvEpilogue epilogue) {
  switch (epilogue) {
    case ConvEpilogue::bias_relu: return " + bias + relu";
    case ConvEpilogue::accumulate: return " accumulating";
    case ConvEpilogue::statistics: return " + statistics";
    case ConvEpilogue::input_scale_bias_relu_statistics: return " of relu(x * scale + bias) + statistics";
    default: return "";
  }
}

bool is_statistics(ConvEpilogue epilogue) {
  return epilogue == ConvEpilogue::statistics || epilogue == ConvEpilogue::input_scale_bias_relu_statistics;
}

std::string describe_choice(const CandidatePlan& chosen, int timed, bool fallback_list,
                            ConvEpilogue epilogue, GraphForm form) {
  char workspace[32];
  std::snprintf(workspace, sizeof(workspace), "%.1f MiB",
                static_cast<double>(chosen.workspace_bytes) / (1 << 20));
  std::string text = "engine " + std::to_string(chosen.notes.index) +
                     (chosen.notes.runtime_compiled ? " (runtime compiled)" : "") + ", " +
                     workspace + " workspace, fastest of " + std::to_string(timed) + " timed";
  if (fallback_list) text += ", from the fallback list";
  if (epilogue == ConvEpilogue::accumulate) {
    text += form.accumulate_by == AccumulateBy::beta ? ", beta 1" : ", fused add";
  }
  if (is_statistics(epilogue)) {
    text += form.statistics_by == StatisticsBy::gen_stats ? ", GenStats" : ", sum reductions";
  }
  return text;
}

}  // namespace

// ---- the class ----------------------------------------------------------------------------------

struct CudnnGraphConvolutions::Impl {
  struct Plan {
    OperationGraph graph;
    CandidatePlan chosen;
    std::string description;
    float milliseconds = 0.0f;  // the chosen plan's best timed run
    std::string unsupported;  // non-empty: no engine runs this graph, and why
  };
  using Key = std::tuple<ConvKey, ConvPass, ConvEpilogue>;

  // First member, destroyed last: the plans refer to it.
  std::unique_ptr<CudnnHandle> owned_handle;
  cudnnHandle_t handle = nullptr;
  bool allow_tf32 = false;
  std::map<Key, Plan> plans;

  Plan build(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue, size_t workspace_limit,
             const ConvPointers& pointers, void* workspace);
  const Plan& find(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue,
                   void* workspace, size_t workspace_bytes) const;
  void run(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue,
           const ConvPointers& pointers, void* workspace, size_t workspace_bytes) const;
  // Builds and caches the plan on first use (CudnnGraphConvolutions::prepare's contract).
  size_t prepare(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue, size_t workspace_limit,
                 const ConvPointers& pointers, void* workspace);
};

CudnnGraphConvolutions::Impl::Plan CudnnGraphConvolutions::Impl::build(
    const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue, size_t workspace_limit,
    const ConvPointers& pointers, void* workspace) {
  cudaStream_t stream = nullptr;
  DPB_CUDNN_CHECK(cudnnGetStream(handle, &stream));
  const std::string what = std::string(data_type_name(g.input.type)) + " " + pass_name(pass) +
                           epilogue_name(epilogue) + " of " + dpbench::describe(g);
  Plan plan;
  CandidateCounts counts;
  std::vector<GraphForm> ways = {GraphForm{}};
  if (epilogue == ConvEpilogue::accumulate) ways.push_back({AccumulateBy::fused_add, StatisticsBy::gen_stats});
  if (is_statistics(epilogue)) ways.push_back({AccumulateBy::beta, StatisticsBy::reductions});
  for (const GraphForm& form : ways) {
    OperationGraph graph;
    if (!build_operation_graph(handle, g, pass, epilogue, form, graph,
                               counts.last_refusal)) {
      continue;
    }
    bool fallback_list = false;
    std::vector<CandidatePlan> candidates =
        conv_candidate_plans(handle, graph, CUDNN_HEUR_MODE_A, g.input.type == DataType::f32,
                             allow_tf32, workspace_limit, counts);
    if (candidates.empty()) {
      fallback_list = true;
      candidates = conv_candidate_plans(handle, graph, CUDNN_HEUR_MODE_FALLBACK,
                                        g.input.type == DataType::f32, allow_tf32, workspace_limit,
                                        counts);
    }
    const BackendDescriptor pack = variant_pack(graph, pointers, workspace);
    int fastest = -1, timed = 0;
    float fastest_ms = 0.0f;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const float ms = time_plan(handle, stream, candidates[i].plan, pack, kTimedRuns);
      if (ms < 0.0f) {
        ++counts.failed_to_run;
        continue;
      }
      ++timed;
      if (fastest < 0 || ms < fastest_ms) {
        fastest = static_cast<int>(i);
        fastest_ms = ms;
      }
    }
    if (fastest < 0) continue;
    plan.chosen = std::move(candidates[static_cast<size_t>(fastest)]);
    plan.milliseconds = fastest_ms;
    plan.description = describe_choice(plan.chosen, timed, fallback_list, epilogue, form);
    plan.graph = std::move(graph);
    return plan;
  }
  plan.unsupported = "cuDNN's graph API runs no " + what + " within " +
                     std::to_string(workspace_limit >> 20) + " MiB of workspace (" +
                     counts.text() + ")";
  return plan;
}

const CudnnGraphConvolutions::Impl::Plan& CudnnGraphConvolutions::Impl::find(
    const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue, void* workspace,
    size_t workspace_bytes) const {
  const auto found = plans.find(Key{conv_key(g), pass, epilogue});
  if (found == plans.end()) {
    throw RuntimeError(std::string("CudnnGraphConvolutions: the ") + pass_name(pass) +
                       epilogue_name(epilogue) + " of " + dpbench::describe(g) +
                       " was not prepared");
  }
  const Plan& plan = found->second;
  if (!plan.unsupported.empty()) throw GraphConvolutionUnsupported(plan.unsupported);
  if (workspace_bytes < plan.chosen.workspace_bytes ||
      (plan.chosen.workspace_bytes > 0 && workspace == nullptr)) {
    throw RuntimeError("CudnnGraphConvolutions: a workspace of " +
                       std::to_string(workspace == nullptr ? 0 : workspace_bytes) +
                       " bytes is smaller than the " + std::to_string(plan.chosen.workspace_bytes) +
                       " bytes prepare() asked for");
  }
  return plan;
}

void CudnnGraphConvolutions::Impl::run(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue,
                                       const ConvPointers& pointers, void* workspace,
                                       size_t workspace_bytes) const {
  const Plan& plan = find(g, pass, epilogue, workspace, workspace_bytes);
  require_aligned(pointers);
  // Built per call rather than cached by pointers: a handful of host-side attribute copies, no
  // device memory, and nothing to go stale when the caller's buffers move.
  const BackendDescriptor pack = variant_pack(plan.graph, pointers, workspace);
  DPB_CUDNN_CHECK(cudnnBackendExecute(handle, plan.chosen.plan.get(), pack.get()));
}

CudnnGraphConvolutions::CudnnGraphConvolutions(cudnnHandle_t handle, bool allow_tf32)
    : impl_(std::make_unique<Impl>()) {
  impl_->handle = handle;
  impl_->allow_tf32 = allow_tf32;
}

CudnnGraphConvolutions::CudnnGraphConvolutions(Device& device, StreamKind stream, bool allow_tf32)
    : impl_(std::make_unique<Impl>()) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError("CudnnGraphConvolutions: not a CUDA device");
  impl_->owned_handle = std::make_unique<CudnnHandle>();
  DPB_CUDNN_CHECK(cudnnSetStream(impl_->owned_handle->get(), cuda_device->stream(stream)));
  impl_->handle = impl_->owned_handle->get();
  impl_->allow_tf32 = allow_tf32;
}

CudnnGraphConvolutions::~CudnnGraphConvolutions() = default;

size_t CudnnGraphConvolutions::prepare(const ConvGeometry& g, ConvPass pass,
                                       ConvEpilogue epilogue, size_t workspace_limit, void* x,
                                       void* w, void* y, const float* bias, void* workspace) {
  if (is_statistics(epilogue)) {
    throw RuntimeError(std::string("CudnnGraphConvolutions: the ") + pass_name(pass) +
                       epilogue_name(epilogue) + " needs its sums' buffers: prepare_statistics()");
  }
  return impl_->prepare(g, pass, epilogue, workspace_limit, ConvPointers{x, w, y, bias, {}}, workspace);
}

size_t CudnnGraphConvolutions::prepare_statistics(const ConvGeometry& g, ConvEpilogue epilogue,
                                                  size_t workspace_limit, void* x, void* w, void* y,
                                                  const ConvStatisticsBuffers& statistics,
                                                  void* workspace) {
  const bool input_prologue = epilogue == ConvEpilogue::input_scale_bias_relu_statistics;
  if (!is_statistics(epilogue) || statistics.sum == nullptr || statistics.square_sum == nullptr ||
      (input_prologue && (statistics.input_scale == nullptr || statistics.input_bias == nullptr))) {
    throw RuntimeError(std::string("CudnnGraphConvolutions: prepare_statistics() takes the statistics "
                                   "epilogues with both sums (and the input's scale and bias for the "
                                   "prologue), not the forward") + epilogue_name(epilogue));
  }
  return impl_->prepare(g, ConvPass::forward, epilogue, workspace_limit,
                        ConvPointers{x, w, y, statistics.input_bias, statistics}, workspace);
}

size_t CudnnGraphConvolutions::Impl::prepare(const ConvGeometry& g, ConvPass pass, ConvEpilogue epilogue,
                                             size_t workspace_limit, const ConvPointers& pointers,
                                             void* workspace) {
  const Key key{conv_key(g), pass, epilogue};
  auto found = plans.find(key);
  if (found == plans.end()) {
    if ((epilogue == ConvEpilogue::bias_relu && pass != ConvPass::forward) ||
        (epilogue == ConvEpilogue::accumulate && pass != ConvPass::backward_data) ||
        (is_statistics(epilogue) && pass != ConvPass::forward) ||
        (epilogue == ConvEpilogue::bias_relu && pointers.bias == nullptr)) {
      throw RuntimeError(std::string("CudnnGraphConvolutions: no ") + pass_name(pass) +
                         epilogue_name(epilogue) + " (bias_relu and the statistics are forward "
                         "only, bias_relu needs a bias, accumulate is backward-data only)");
    }
    // The classic descriptors check the geometry's consistency and its output shape against
    // cuDNN's own arithmetic; built once here for that alone, so the rule lives in one place.
    ConvPlan checked;
    describe_convolution(checked, g, CUDNN_DEFAULT_MATH);
    require_aligned(pointers);
    require_aligned(workspace, "workspace");
    // Timing synchronises, which a stream being captured into a graph forbids.
    cudaStream_t stream = nullptr;
    DPB_CUDNN_CHECK(cudnnGetStream(handle, &stream));
    if (stream_capturing(stream)) {
      throw RuntimeError("CudnnGraphConvolutions: prepare() of a new geometry (" +
                         dpbench::describe(g) + ") during a stream capture");
    }
    found = plans.emplace(key, build(g, pass, epilogue, workspace_limit, pointers, workspace)).first;
  }
  const Plan& plan = found->second;
  if (!plan.unsupported.empty()) throw GraphConvolutionUnsupported(plan.unsupported);
  return plan.chosen.workspace_bytes;
}

void CudnnGraphConvolutions::forward(const ConvGeometry& g, const void* x, const void* w, void* y,
                                     void* workspace, size_t workspace_bytes) {
  impl_->run(g, ConvPass::forward, ConvEpilogue::none, ConvPointers{x, w, y, nullptr, {}}, workspace,
             workspace_bytes);
}

void CudnnGraphConvolutions::forward_bias_relu(const ConvGeometry& g, const void* x,
                                               const void* w, const float* bias, void* y,
                                               void* workspace, size_t workspace_bytes) {
  impl_->run(g, ConvPass::forward, ConvEpilogue::bias_relu, ConvPointers{x, w, y, bias, {}},
             workspace, workspace_bytes);
}

void CudnnGraphConvolutions::forward_statistics(const ConvGeometry& g, ConvEpilogue epilogue,
                                                const void* x, const void* w, void* y,
                                                const ConvStatisticsBuffers& statistics,
                                                void* workspace, size_t workspace_bytes) {
  if (!is_statistics(epilogue)) {
    throw RuntimeError(std::string("CudnnGraphConvolutions::forward_statistics: not a statistics "
                                   "epilogue: forward") + epilogue_name(epilogue));
  }
  impl_->run(g, ConvPass::forward, epilogue, ConvPointers{x, w, y, statistics.input_bias, statistics},
             workspace, workspace_bytes);
}

void CudnnGraphConvolutions::backward_data(const ConvGeometry& g, const void* dy, const void* w,
                                           void* dx, void* workspace, size_t workspace_bytes,
                                           bool accumulate) {
  impl_->run(g, ConvPass::backward_data,
             accumulate ? ConvEpilogue::accumulate : ConvEpilogue::none,
             ConvPointers{dx, w, dy, nullptr, {}}, workspace, workspace_bytes);
}

void CudnnGraphConvolutions::backward_filter(const ConvGeometry& g, const void* x, const void* dy,
                                             void* dw, void* workspace, size_t workspace_bytes) {
  impl_->run(g, ConvPass::backward_filter, ConvEpilogue::none, ConvPointers{x, dw, dy, nullptr, {}},
             workspace, workspace_bytes);
}

double CudnnGraphConvolutions::timed_milliseconds(const ConvGeometry& g, ConvPass pass,
                                                  ConvEpilogue epilogue) const {
  const auto found = impl_->plans.find(Impl::Key{conv_key(g), pass, epilogue});
  if (found == impl_->plans.end()) {
    throw RuntimeError(std::string("CudnnGraphConvolutions::timed_milliseconds: the ") + pass_name(pass) +
                       epilogue_name(epilogue) + " of " + dpbench::describe(g) + " was not prepared");
  }
  if (!found->second.unsupported.empty()) throw GraphConvolutionUnsupported(found->second.unsupported);
  return found->second.milliseconds;
}

std::string CudnnGraphConvolutions::describe(const ConvGeometry& g, ConvPass pass,
                                             ConvEpilogue epilogue) const {
  const auto found = impl_->plans.find(Impl::Key{conv_key(g), pass, epilogue});
  if (found == impl_->plans.end()) {
    throw RuntimeError(std::string("CudnnGraphConvolutions::describe: the ") + pass_name(pass) +
                       epilogue_name(epilogue) + " of " + dpbench::describe(g) +
                       " was not prepared");
  }
  return found->second.unsupported.empty() ? found->second.description
                                           : "unsupported: " + found->second.unsupported;
}

size_t CudnnGraphConvolutions::plans_built() const { return impl_->plans.size(); }

}  // namespace dpbench
