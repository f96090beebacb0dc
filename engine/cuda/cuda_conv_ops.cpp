// CudaBackend's convolutions on cuDNN's classic API. conv2d_workspace_bytes prepares a geometry
// once: descriptors, then the algorithm of each pass, timed on scratch buffers (cudnn_benchmark on)
// or taken from cuDNN's heuristics (off). The three passes only look the plan up and run it.
// fp32, fp16 and bf16 data alike: the geometry's type picks the descriptors and the math, and
// alpha and beta are floats for all three (cuDNN wants float scaling factors for 16-bit data).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend.h"

#include "engine/cuda/cublaslt_linear.h"
#include "engine/cuda/cudnn_attention.h"
#include "engine/cuda/cudnn_graph_conv.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cudnn_plans.h"
#include "engine/cuda/cudnn_rnn_plans.h"
#include "engine/cuda/stream_timing.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

// Algorithms needing more than this are not considered: a replica's one workspace is memory the
// batch cannot use. 512 MiB was too little: VGG-16's large early layers then fell back to a
// backward-filter algorithm 10x slower than the tensor-core one (seen on an H200 in tf32).
constexpr size_t kMaxConvWorkspaceBytes = size_t{2} << 30;

constexpr uint64_t kSearchSeed = 0x5eed;  // any: the search's inputs only need to look real

bool uses_tensor_cores(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// ALGO_0 of both backward passes adds partial sums straight into the output, so with 16-bit data
// every partial sum is rounded to the 16-bit type. Measured on an H200 (cuDNN 9.14) against a
// double reference on the [gpu] test's geometries: 4 to 31 times the tolerance of one final
// rounding plus fp32 accumulation error, which every other algorithm stayed within. That is not
// fp32 accumulation, so 16-bit geometries never take it.
bool rounds_partial_sums_to_output_type(cudnnConvolutionFwdAlgo_t) { return false; }
bool rounds_partial_sums_to_output_type(cudnnConvolutionBwdDataAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
}
bool rounds_partial_sums_to_output_type(cudnnConvolutionBwdFilterAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
}

// cuDNN lists candidates best first (by measured time, or by its heuristics' ranking). In pure
// fp32 (FMA math) tensor-core results are skipped: a TF32 algorithm would not compare with the
// reference backend. With TF32 allowed (--precision=tf32) or 16-bit data (tensor-op math) they
// are what we want. `deterministic` (--deterministic) also skips those cuDNN marks as not
// reproducible (split reductions that add by atomics).
template <typename Perf>
auto first_usable_algorithm(const std::vector<Perf>& results, int returned, size_t workspace_limit,
                            const char* pass, const ConvGeometry& g, cudnnMathType_t math,
                            bool deterministic = false) {
  const bool allow_tensor_cores = math != CUDNN_FMA_MATH;
  const bool sixteen_bit = g.input.type != DataType::f32;
  for (int i = 0; i < returned; ++i) {
    const Perf& result = results[static_cast<size_t>(i)];
    if (result.status == CUDNN_STATUS_SUCCESS &&
        (allow_tensor_cores || !uses_tensor_cores(result.mathType)) &&
        !(sixteen_bit && rounds_partial_sums_to_output_type(result.algo)) &&
        !(deterministic && result.determinism != CUDNN_DETERMINISTIC) &&
        result.memory <= workspace_limit) {
      return result.algo;
    }
  }
  throw RuntimeError(std::string("cuDNN offers no ") + (deterministic ? "deterministic " : "") +
                     data_type_name(g.input.type) + " " + pass +
                     " algorithm within " +
                     std::to_string(workspace_limit >> 20) + " MiB of workspace for " +
                     describe(g));
}

// Device memory held for one algorithm search only, recorded in the device's ledger as scratch
// meanwhile. Allocation failures are answers here (the search then works with less), so they are
// cleared rather than left as the thread's last error.
class SearchScratch {
 public:
  // The search's tensors are scratch; its workspace is recorded as a workspace, which memory
  // predictions keep fixed past the steps' (Note [memory from one run] in reports/step_prediction.h).
  explicit SearchScratch(MemoryLedger& memory, MemoryCategory category = MemoryCategory::scratch)
      : memory_(memory), tag_{category, "convolution algorithm search"} {}
  ~SearchScratch() {
    if (data_ != nullptr && cudaFree(data_) != cudaSuccess) (void)cudaGetLastError();
  }
  SearchScratch(const SearchScratch&) = delete;
  SearchScratch& operator=(const SearchScratch&) = delete;

  // Exactly `bytes` (at least one), or throws.
  void allocate(size_t bytes) {
    DPB_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(bytes, 1)));
    bytes_ = bytes;
    entry_ = memory_.record(tag_, MemoryPlace::device, bytes);
  }
  // Up to `bytes`, halving under memory pressure down to 1 MiB; may end with nothing.
  void allocate_at_most(size_t bytes) {
    while (bytes > 0) {
      if (cudaMalloc(&data_, bytes) == cudaSuccess) {
        bytes_ = bytes;
        entry_ = memory_.record(tag_, MemoryPlace::device, bytes);
        return;
      }
      (void)cudaGetLastError();
      bytes = bytes >= (size_t{2} << 20) ? bytes / 2 : 0;
    }
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  MemoryLedger& memory() const { return memory_; }

 private:
  MemoryLedger& memory_;
  MemoryTag tag_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  LedgerEntry entry_;
};

// Fills a scratch tensor of `type` with x[i] = uniform(lo, hi) by index. fp32 is filled directly;
// 16-bit data is filled in fp32 and converted chunk by chunk through `staging`, which bounds the
// extra memory however large the tensor.
void fill_search_input(cudaStream_t stream, DataType type, void* data, size_t count,
                       uint64_t random_stream, float lo, float hi, SearchScratch& staging) {
  if (type == DataType::f32) {
    cuda_kernels::launch_fill_uniform_by_index(stream, static_cast<float*>(data), count,
                                               kSearchSeed, random_stream, 0, lo, hi);
    return;
  }
  const size_t chunk = staging.bytes() / sizeof(float);
  char* bytes = static_cast<char*>(data);
  for (size_t first = 0; first < count; first += chunk) {
    const size_t length = std::min(chunk, count - first);
    float* values = static_cast<float*>(staging.data());
    cuda_kernels::launch_fill_uniform_by_index(stream, values, length, kSearchSeed, random_stream,
                                               first, lo, hi);
    cuda_kernels::launch_convert(stream, DataType::f32, values, type,
                                 bytes + first * data_type_bytes(type), length, 1.0f);
  }
}

// The timed time of `algorithm` among cuDNN's Find results, in milliseconds.
template <typename Perf, typename Algorithm>
float time_of(const std::vector<Perf>& results, int returned, Algorithm algorithm) {
  for (int i = 0; i < returned; ++i)
    if (results[static_cast<size_t>(i)].algo == algorithm) return results[static_cast<size_t>(i)].time;
  return 0.0f;
}

// Scratch tensors of a geometry filled like the models' own data, and a workspace: what the
// algorithm searches time on.
struct SearchBuffers {
  explicit SearchBuffers(MemoryLedger& memory)
      : x(memory), w(memory), y(memory), workspace(memory, MemoryCategory::workspaces) {}
  SearchScratch x, w, y, workspace;
};

// The tensors' bytes a search of `g` holds besides its workspace (the 16-bit staging with them).
size_t search_tensor_bytes(const ConvGeometry& g, size_t staging_floats) {
  size_t bytes = g.input.bytes() + g.filter.bytes() + g.output.bytes();
  if (g.input.type != DataType::f32)
    bytes += std::min(std::max({g.input.count(), g.filter.count(), g.output.count()}), staging_floats) * sizeof(float);
  return bytes;
}

constexpr size_t kStagingFloats = size_t{1} << 24;  // 64 MiB

// False, allocating nothing, where the search's tensors and `kept_back` bytes (the caller's own
// scratch beside them) do not fit the room the device's memory limit leaves (Note [search
// memory] in device_memory.h): the caller then times nothing. The workspace is at most
// `most_workspace`.
bool make_search_buffers(cudaStream_t stream, const ConvGeometry& g, SearchBuffers& buffers, size_t kept_back = 0,
                         size_t most_workspace = kMaxConvWorkspaceBytes) {
  SearchScratch &x = buffers.x, &w = buffers.w, &y = buffers.y, &workspace = buffers.workspace;
  const uint64_t room = x.memory().room_for_transients();
  if (search_tensor_bytes(g, kStagingFloats) + uint64_t{kept_back} > room) return false;
  x.allocate(g.input.bytes());
  w.allocate(g.filter.bytes());
  y.allocate(g.output.bytes());
  // Uninitialised memory could hold NaNs or denormals, which slow some algorithms down; zeros
  // would flatter kernels whose speed depends on the data (tensor cores draw less power on
  // zeros). Values like the models' own activations are the honest input.
  {
    SearchScratch staging(x.memory());
    if (g.input.type != DataType::f32) {
      const size_t largest = std::max({g.input.count(), g.filter.count(), g.output.count()});
      staging.allocate(std::min(largest, kStagingFloats) * sizeof(float));
    }
    fill_search_input(stream, g.input.type, x.data(), g.input.count(), 0, -1.0f, 1.0f, staging);
    fill_search_input(stream, g.filter.type, w.data(), g.filter.count(), 1, -0.05f, 0.05f, staging);
    fill_search_input(stream, g.output.type, y.data(), g.output.count(), 2, -1.0f, 1.0f, staging);
    // The staging buffer is freed at the end of this scope; the conversions must be done with it.
    DPB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  size_t free_bytes = 0, total_bytes = 0;
  DPB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // Leave half of what is free: the search must not starve whatever is allocated next. And keep
  // within the limit: what room the tensors leave of it.
  const uint64_t room_left = room - (g.input.bytes() + g.filter.bytes() + g.output.bytes() + kept_back);
  workspace.allocate_at_most(static_cast<size_t>(std::min<uint64_t>({most_workspace, free_bytes / 2, room_left})));
  return true;
}

// Note [convolution paths]
// Each pass runs through the classic API (cudnnConvolutionForward and its backward twins, the
// algorithm found by cudnnFind*) or through cuDNN's graph API (CudnnGraphConvolutions, whose
// engines include the sm_90 kernels and runtime-fused ones the classic API cannot reach): both
// are timed on the same scratch tensors and the faster kept, per pass. An accumulating
// backward-data pass (a tensor read by two layers) is decided at its first call, in the eager
// first step: the graph API's accumulating plan (beta = 1, or a fused add) against the classic
// chosen algorithm with beta = 1, timed on scratch, within the workspace that call has. The forward with a bias and ReLU
// (conv2d_forward_bias) runs as one fused graph kernel where that beats the chosen forward plus
// the bias pass, both timed; the forward with batch norm's sums in its epilogue
// (conv2d_forward_statistics) where that beats the chosen forward plus the batch norm's
// statistics pass. Deterministic runs and --cudnn_benchmark=false time nothing and keep the
// classic heuristics' choices.

// Times every algorithm of each pass on scratch tensors (cuDNN writes the outputs, which here are
// scratch as well) and keeps the fastest that fits the workspace searched; with `graph`, also
// each pass's graph-API plan (Note [convolution paths]). False, choosing nothing, where the
// tensors do not fit under the device's memory limit.
bool search_conv_algorithms(cudnnHandle_t cudnn, cudaStream_t stream, MemoryLedger& memory, const ConvGeometry& g,
                            ConvPlan& plan, CudnnGraphConvolutions* graph) {
  const cudnnMathType_t math = plan.math_type;
  SearchBuffers buffers(memory);
  if (!make_search_buffers(stream, g, buffers)) return false;
  SearchScratch &x = buffers.x, &w = buffers.w, &y = buffers.y, &workspace = buffers.workspace;
  // The graph plan of `pass` when it prepares and beats `classic_ms`; its workspace is recorded.
  auto graph_wins = [&](ConvPass pass, float classic_ms, float* winning_ms) {
    if (graph == nullptr) return false;
    try {
      const size_t bytes = graph->prepare(g, pass, ConvEpilogue::none, workspace.bytes(), x.data(),
                                          w.data(), y.data(), nullptr, workspace.data());
      const double ms = graph->timed_milliseconds(g, pass, ConvEpilogue::none);
      if (!(ms < classic_ms)) return false;
      plan.graph_workspace_bytes = std::max(plan.graph_workspace_bytes, bytes);
      if (winning_ms != nullptr) *winning_ms = static_cast<float>(ms);
      return true;
    } catch (const GraphConvolutionUnsupported&) {
      return false;
    }
  };

  int returned = 0;
  int max_count = 0;
  DPB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> forward(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
      cudnn, plan.input.get(), x.data(), plan.filter.get(), w.data(), plan.convolution.get(),
      plan.output.get(), y.data(), max_count, &returned, forward.data(), workspace.data(),
      workspace.bytes()));
  plan.forward_algorithm =
      first_usable_algorithm(forward, returned, workspace.bytes(), "forward", g, math);
  plan.forward_ms = time_of(forward, returned, plan.forward_algorithm);
  plan.graph_forward = graph_wins(ConvPass::forward, plan.forward_ms, &plan.forward_ms);

  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> backward_data(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
      cudnn, plan.filter.get(), w.data(), plan.output.get(), y.data(), plan.convolution.get(),
      plan.input.get(), x.data(), max_count, &returned, backward_data.data(), workspace.data(),
      workspace.bytes()));
  plan.backward_data_algorithm =
      first_usable_algorithm(backward_data, returned, workspace.bytes(), "backward-data", g, math);
  plan.graph_backward_data = graph_wins(
      ConvPass::backward_data, time_of(backward_data, returned, plan.backward_data_algorithm), nullptr);

  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> backward_filter(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      cudnn, plan.input.get(), x.data(), plan.output.get(), y.data(), plan.convolution.get(),
      plan.filter.get(), w.data(), max_count, &returned, backward_filter.data(), workspace.data(),
      workspace.bytes()));
  plan.backward_filter_algorithm =
      first_usable_algorithm(backward_filter, returned, workspace.bytes(), "backward-filter", g, math);
  plan.graph_backward_filter = graph_wins(
      ConvPass::backward_filter, time_of(backward_filter, returned, plan.backward_filter_algorithm), nullptr);

  // The scratch is freed on return; nothing queued may still be using it.
  DPB_CUDA_CHECK(cudaStreamSynchronize(stream));
  return true;
}

// cuDNN's heuristics: no allocation, no synchronisation, nothing run on the GPU.
void choose_conv_algorithms_by_heuristics(cudnnHandle_t cudnn, const ConvGeometry& g,
                                          ConvPlan& plan, bool deterministic) {
  const cudnnMathType_t math = plan.math_type;
  int returned = 0;
  int max_count = 0;
  DPB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> forward(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
      cudnn, plan.input.get(), plan.filter.get(), plan.convolution.get(), plan.output.get(),
      max_count, &returned, forward.data()));
  plan.forward_algorithm =
      first_usable_algorithm(forward, returned, kMaxConvWorkspaceBytes, "forward", g, math,
                             deterministic);

  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> backward_data(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      cudnn, plan.filter.get(), plan.output.get(), plan.convolution.get(), plan.input.get(),
      max_count, &returned, backward_data.data()));
  plan.backward_data_algorithm =
      first_usable_algorithm(backward_data, returned, kMaxConvWorkspaceBytes, "backward-data", g,
                             math, deterministic);

  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> backward_filter(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      cudnn, plan.input.get(), plan.output.get(), plan.convolution.get(), plan.filter.get(),
      max_count, &returned, backward_filter.data()));
  plan.backward_filter_algorithm = first_usable_algorithm(
      backward_filter, returned, kMaxConvWorkspaceBytes, "backward-filter", g, math, deterministic);
}

// The graph API's plans were promised 16-byte aligned tensors; a tensor that starts elsewhere (a
// parameter after an odd-sized one in the flat buffer, say) takes the classic path, which the
// plan always has too.
bool graph_aligned(std::initializer_list<const void*> pointers) {
  for (const void* pointer : pointers)
    if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0) return false;
  return true;
}

// The Backend contract: every pass gets at least conv2d_workspace_bytes(g).
void require_workspace(const ConvPlan& plan, const void* workspace, size_t workspace_bytes,
                       const char* caller) {
  const size_t needed = plan.workspace_bytes();
  if (workspace_bytes < needed || (needed > 0 && workspace == nullptr)) {
    throw RuntimeError(std::string("CudaBackend::") + caller + ": a workspace of " +
                       std::to_string(workspace == nullptr ? 0 : workspace_bytes) +
                       " bytes is smaller than the " + std::to_string(needed) +
                       " bytes conv2d_workspace_bytes asked for");
  }
}

}  // namespace

void CudaBackend::choose_conv_algorithms(const ConvGeometry& g, ConvPlan& plan, bool benchmark) {
  // A search allocates and synchronises, which a stream being captured into a graph forbids.
  // Deterministic runs never time: a timed choice can differ from run to run and process to
  // process, and with it the bits.
  // A search whose tensors would pass the device's memory limit leaves it to the heuristics
  // (Note [search memory] in device_memory.h).
  const bool searched = benchmark && !deterministic_ && !stream_capturing(stream_) &&
                        search_conv_algorithms(cudnn_, stream_, memory_, g, plan, &graph_convolutions());
  if (!searched) choose_conv_algorithms_by_heuristics(cudnn_, g, plan, deterministic_);
  DPB_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
      cudnn_, plan.input.get(), plan.filter.get(), plan.convolution.get(), plan.output.get(),
      plan.forward_algorithm, &plan.forward_workspace_bytes));
  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
      cudnn_, plan.filter.get(), plan.output.get(), plan.convolution.get(), plan.input.get(),
      plan.backward_data_algorithm, &plan.backward_data_workspace_bytes));
  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
      cudnn_, plan.input.get(), plan.output.get(), plan.convolution.get(), plan.filter.get(),
      plan.backward_filter_algorithm, &plan.backward_filter_workspace_bytes));
  ++conv_algorithm_searches_;
}

ConvPlan& CudaBackend::conv_plan(const ConvGeometry& g, bool benchmark) {
  const ConvKey key = conv_key(g);
  const auto found = plans_->convolutions.find(key);
  if (found != plans_->convolutions.end()) return found->second;
  ConvPlan plan;
  describe_convolution(plan, g, convolution_math_type(g, conv_math_type_));
  choose_conv_algorithms(g, plan, benchmark);
  return plans_->convolutions.emplace(key, std::move(plan)).first->second;
}

size_t CudaBackend::conv2d_workspace_bytes(const ConvGeometry& g) {
  return conv_plan(g, cudnn_benchmark_).workspace_bytes();
}

nlohmann::json CudaBackend::math_paths() const {
  int shapes = 0, forward = 0, fused = 0, fused_statistics = 0;
  int backward_data = 0, backward_data_accumulating = 0, backward_filter = 0;
  // Per pass, the shapes that run it through the classic API, by the algorithm their plan chose.
  nlohmann::json classic = {{"forward", nlohmann::json::object()},
                            {"backward_data", nlohmann::json::object()},
                            {"backward_filter", nlohmann::json::object()}};
  // One more shape under `name` in a {name: shapes} object.
  auto count_one = [](nlohmann::json& counts, const char* name) {
    nlohmann::json& count = counts[name];
    count = count.is_null() ? 1 : count.get<int>() + 1;
  };
  for (const auto& [key, plan] : plans_->convolutions) {
    ++shapes;
    if (!plan.graph_forward && !plan.fused_bias_relu && !plan.fused_statistics)
      count_one(classic["forward"], conv_algorithm_name(plan.forward_algorithm));
    if (!plan.graph_backward_data)
      count_one(classic["backward_data"], conv_algorithm_name(plan.backward_data_algorithm));
    if (!plan.graph_backward_filter)
      count_one(classic["backward_filter"], conv_algorithm_name(plan.backward_filter_algorithm));
    forward += plan.graph_forward;
    fused += plan.fused_bias_relu;
    fused_statistics += plan.fused_statistics;
    backward_data += plan.graph_backward_data;
    backward_data_accumulating += plan.graph_backward_data_accumulate;
    backward_filter += plan.graph_backward_filter;
  }
  nlohmann::json lstm = {{"shapes", rnn_plans_->plans.size()}, {"algorithms", nlohmann::json::object()}};
  for (const auto& [key, plan] : rnn_plans_->plans) count_one(lstm["algorithms"], rnn_algorithm_name(*plan));
  int pool_shapes = 0, own_pool_forward = 0, own_pool_backward = 0, two_pass_backward = 0;
  for (const auto& [key, plan] : plans_->pools) {
    ++pool_shapes;
    own_pool_forward += plan.forward.own;
    own_pool_backward += plan.backward.own;
    two_pass_backward += plan.max_positions.data() != nullptr;  // kept only while the two-pass kernel runs
  }
  size_t cudnn_fused_attention = 0;
  for (const auto& [key, choice] : attention_plans_->choices) cudnn_fused_attention += choice.cudnn;
  return {{"convolutions",
           {{"shapes", shapes}, {"graph_api_forward", forward}, {"fused_bias_relu", fused},
            {"fused_batch_norm_statistics", fused_statistics},
            {"graph_api_backward_data", backward_data},
            {"graph_api_backward_data_accumulating", backward_data_accumulating},
            {"graph_api_backward_filter", backward_filter},
            {"classic_algorithms", classic}}},
          {"pooling",
           {{"shapes", pool_shapes}, {"own_forward", own_pool_forward}, {"own_backward", own_pool_backward},
            {"two_pass_backward", two_pass_backward}}},
          {"lstm", lstm},
          {"linear",
           {{"shapes", linear_epilogues_ ? linear_epilogues_->shapes() : 0},
            {"cublaslt_epilogues", linear_epilogues_ ? linear_epilogues_->running_fused_shapes() : 0},
            {"timed", linear_epilogues_ ? linear_epilogues_->timings() : nlohmann::json::array()}}},
          {"attention", {{"shapes", attention_plans_->choices.size()}, {"cudnn_fused", cudnn_fused_attention}}}};
}

CudnnGraphConvolutions& CudaBackend::graph_convolutions() {
  if (!graph_convolutions_)
    graph_convolutions_ = std::make_unique<CudnnGraphConvolutions>(cudnn_, conv_math_type_ != CUDNN_FMA_MATH);
  return *graph_convolutions_;
}

namespace {

// Whether a fused forward of `plan` is to be decided now: once, by timing, so never in a
// deterministic run, without --cudnn_benchmark, before the forward was timed, or in a capture.
bool may_time_fused_forward(cudaStream_t stream, const ConvPlan& plan, bool decided, bool benchmark,
                            bool deterministic) {
  return !decided && benchmark && !deterministic && plan.forward_ms > 0.0f && !stream_capturing(stream);
}

// True where `prepare` (the graph's fused forward, returning its workspace) finds an engine whose
// timed run beats `unfused_ms`; the plan then makes room for its workspace.
template <typename Prepare>
bool fused_forward_wins(CudnnGraphConvolutions& graph, const ConvGeometry& g, ConvEpilogue epilogue,
                        float unfused_ms, ConvPlan& plan, Prepare prepare) {
  try {
    const size_t bytes = prepare();
    if (graph.timed_milliseconds(g, ConvPass::forward, epilogue) >= unfused_ms) return false;
    plan.graph_workspace_bytes = std::max(plan.graph_workspace_bytes, bytes);
    return true;
  } catch (const GraphConvolutionUnsupported&) {
    return false;  // no fused engine for this shape or type: the separate passes it is
  }
}

}  // namespace

size_t CudaBackend::conv2d_bias_workspace_bytes(const ConvGeometry& g, bool relu) {
  ConvPlan& plan = conv_plan(g, cudnn_benchmark_);
  // The fused kernel computes bias and ReLU together: a bias without ReLU keeps the two passes.
  if (!relu || !may_time_fused_forward(stream_, plan, plan.fused_bias_relu_decided, cudnn_benchmark_, deterministic_))
    return plan.workspace_bytes();
  plan.fused_bias_relu_decided = true;
  SearchBuffers buffers(memory_);
  const size_t bias_bytes = sizeof(float) * static_cast<size_t>(g.output.c);
  if (!make_search_buffers(stream_, g, buffers, bias_bytes)) return plan.workspace_bytes();
  SearchScratch bias(memory_);
  bias.allocate(bias_bytes);
  DPB_CUDA_CHECK(cudaMemsetAsync(bias.data(), 0, bias.bytes(), stream_));
  // What the fused kernel replaces: the chosen forward (timed by the search) and the bias pass.
  const float bias_ms = timed_on_stream(stream_, [&] {
    add_channel_bias(g.output, buffers.y.data(), static_cast<const float*>(bias.data()), true);
  });
  plan.fused_bias_relu =
      fused_forward_wins(graph_convolutions(), g, ConvEpilogue::bias_relu, plan.forward_ms + bias_ms, plan, [&] {
        return graph_convolutions().prepare(g, ConvPass::forward, ConvEpilogue::bias_relu, buffers.workspace.bytes(),
                                            buffers.x.data(), buffers.w.data(), buffers.y.data(),
                                            static_cast<const float*>(bias.data()), buffers.workspace.data());
      });
  DPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return plan.workspace_bytes();
}

bool CudaBackend::conv2d_forward_bias_fused(const ConvGeometry& g, bool relu) {
  const auto found = plans_->convolutions.find(conv_key(g));
  return relu && found != plans_->convolutions.end() && found->second.fused_bias_relu;
}

void CudaBackend::conv2d_forward_bias(const ConvGeometry& g, const void* x, const void* w,
                                      const float* bias, bool relu, void* y, void* workspace,
                                      size_t workspace_bytes) {
  const ConvPlan& plan = conv_plan(g, /*benchmark=*/false);
  if (relu && plan.fused_bias_relu && graph_aligned({x, w, bias, y, workspace})) {
    require_workspace(plan, workspace, workspace_bytes, "conv2d_forward_bias");
    graph_convolutions().forward_bias_relu(g, x, w, bias, y, workspace, workspace_bytes);
    return;
  }
  conv2d_forward(g, x, w, y, workspace, workspace_bytes);
  add_channel_bias(g.output, y, bias, relu);
}

// Fused where cuDNN's graph API has an engine for the convolution with batch norm's sums in its
// epilogue (16-bit NHWC with channels in eights on sm_90) and it times faster than the chosen
// forward plus the statistics pass it saves; never in deterministic runs (the fused sums'
// order is cuDNN's) or with --cudnn_benchmark=false.
size_t CudaBackend::conv2d_statistics_workspace_bytes(const ConvGeometry& g) {
  ConvPlan& plan = conv_plan(g, cudnn_benchmark_);
  if (!may_time_fused_forward(stream_, plan, plan.fused_statistics_decided, cudnn_benchmark_, deterministic_))
    return plan.workspace_bytes();
  plan.fused_statistics_decided = true;
  const size_t channels = static_cast<size_t>(g.output.c);
  // Per channel: the sums (2), gamma, beta; then the two saved arrays (batch_norm_saved_floats each).
  const size_t saved = batch_norm_saved_floats(g.output.c);
  const size_t per_channel_bytes = sizeof(float) * (4 * channels + 2 * saved);
  const size_t norm_workspace_bytes = cuda_kernels::batch_norm_workspace_bytes(g.output);
  SearchBuffers buffers(memory_);
  if (!make_search_buffers(stream_, g, buffers, per_channel_bytes + g.output.bytes() + norm_workspace_bytes))
    return plan.workspace_bytes();
  SearchScratch per_channel(memory_), normalised(memory_), norm_workspace(memory_);
  per_channel.allocate(per_channel_bytes);
  normalised.allocate(g.output.bytes());
  norm_workspace.allocate(norm_workspace_bytes);
  float* sums = static_cast<float*>(per_channel.data());
  float* gamma = sums + 2 * channels;
  float* saved_mean = gamma + 2 * channels;
  float* saved_inv_std = saved_mean + saved;
  DPB_CUDA_CHECK(cudaMemsetAsync(per_channel.data(), 0, per_channel.bytes(), stream_));
  // What the fused kernel saves: the batch norm's statistics pass over y, timed as the batch norm
  // with its own statistics less the batch norm from given sums.
  // Best of three: these kernels take tens of microseconds, where one timing is noisy.
  auto batch_norm = [&](const float* given_sums) {
    float best = 0.0f;
    for (int run = 0; run < 3; ++run) {
      const float ms = timed_on_stream(stream_, [&] {
        cuda_kernels::launch_batch_norm_forward(stream_, g.output, buffers.y.data(), nullptr, gamma, gamma + channels,
                                                1e-5f, true, normalised.data(), saved_mean, saved_inv_std,
                                                norm_workspace.data(), given_sums);
      });
      best = run == 0 ? ms : std::min(best, ms);
    }
    return best;
  };
  const float statistics_pass_ms = std::max(0.0f, batch_norm(nullptr) - batch_norm(sums));
  plan.fused_statistics = fused_forward_wins(
      graph_convolutions(), g, ConvEpilogue::statistics, plan.forward_ms + statistics_pass_ms, plan, [&] {
        return graph_convolutions().prepare_statistics(g, ConvEpilogue::statistics, buffers.workspace.bytes(),
                                                       buffers.x.data(), buffers.w.data(), buffers.y.data(),
                                                       ConvStatisticsBuffers{sums, sums + channels},
                                                       buffers.workspace.data());
      });
  DPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return plan.workspace_bytes();
}

bool CudaBackend::conv2d_forward_statistics_fused(const ConvGeometry& g) {
  const auto found = plans_->convolutions.find(conv_key(g));
  return found != plans_->convolutions.end() && found->second.fused_statistics;
}

void CudaBackend::conv2d_forward_statistics(const ConvGeometry& g, const void* x, const void* w, void* y,
                                            float* statistics, void* workspace, size_t workspace_bytes) {
  const ConvPlan& plan = conv_plan(g, /*benchmark=*/false);
  float* square_sums = statistics + g.output.c;
  if (!plan.fused_statistics || !graph_aligned({x, w, y, statistics, square_sums, workspace}))
    throw RuntimeError("conv2d_forward_statistics: " + describe(g) +
                       " has no fused plan for these buffers (ask conv2d_forward_statistics_fused first)");
  require_workspace(plan, workspace, workspace_bytes, "conv2d_forward_statistics");
  graph_convolutions().forward_statistics(g, ConvEpilogue::statistics, x, w, y,
                                          ConvStatisticsBuffers{statistics, square_sums}, workspace,
                                          workspace_bytes);
}

// The passes below find their geometry prepared, because the caller had to ask
// conv2d_workspace_bytes for the workspace it passes. If it did not (a caller bug), the geometry
// is prepared here by heuristics, which neither allocate nor synchronise, and the workspace check
// then most likely reports the mistake.

void CudaBackend::conv2d_forward(const ConvGeometry& g, const void* x, const void* w, void* y,
                                 void* workspace, size_t workspace_bytes) {
  const ConvPlan& plan = conv_plan(g, /*benchmark=*/false);
  require_workspace(plan, workspace, workspace_bytes, "conv2d_forward");
  if (plan.graph_forward && graph_aligned({x, w, y, workspace})) {
    graph_convolutions().forward(g, x, w, y, workspace, workspace_bytes);
    return;
  }
  const float one = 1.0f, zero = 0.0f;  // y = 1 * conv + 0 * y: overwrite
  DPB_CUDNN_CHECK(cudnnConvolutionForward(cudnn_, &one, plan.input.get(), x, plan.filter.get(), w,
                                          plan.convolution.get(), plan.forward_algorithm,
                                          workspace, workspace_bytes, &zero, plan.output.get(), y));
}

void CudaBackend::prepare_conv2d_backward_data_accumulate(const ConvGeometry& g, size_t workspace_bytes) {
  decide_graph_accumulate(g, conv_plan(g, cudnn_benchmark_), workspace_bytes);
}

void CudaBackend::decide_graph_accumulate(const ConvGeometry& g, ConvPlan& plan, size_t workspace_bytes) {
  if (plan.graph_accumulate_decided || !cudnn_benchmark_ || deterministic_ || stream_capturing(stream_)) return;
  plan.graph_accumulate_decided = true;
  SearchBuffers buffers(memory_);
  // No more workspace than the call has: the timing runs within that.
  if (!make_search_buffers(stream_, g, buffers, 0, workspace_bytes)) return;
  const size_t limit = std::min(workspace_bytes, buffers.workspace.bytes());
  if (limit < plan.backward_data_workspace_bytes) return;  // the classic pass could not run to be timed
  const float one = 1.0f;
  const float classic_ms = timed_on_stream(stream_, [&] {
    DPB_CUDNN_CHECK(cudnnConvolutionBackwardData(
        cudnn_, &one, plan.filter.get(), buffers.w.data(), plan.output.get(), buffers.y.data(),
        plan.convolution.get(), plan.backward_data_algorithm, buffers.workspace.data(), limit, &one,
        plan.input.get(), buffers.x.data()));
  });
  try {
    const size_t bytes = graph_convolutions().prepare(g, ConvPass::backward_data, ConvEpilogue::accumulate, limit,
                                                      buffers.x.data(), buffers.w.data(), buffers.y.data(), nullptr,
                                                      buffers.workspace.data());
    if (graph_convolutions().timed_milliseconds(g, ConvPass::backward_data, ConvEpilogue::accumulate) < classic_ms) {
      plan.graph_backward_data_accumulate = true;
      plan.graph_accumulate_workspace_bytes = bytes;
    }
  } catch (const GraphConvolutionUnsupported&) {
    // No accumulating graph engine for this shape: beta = 1 on the classic algorithm it is.
  }
  // The scratch is freed on return; nothing queued may still be using it.
  DPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::conv2d_backward_data(const ConvGeometry& g, const void* dy, const void* w,
                                       void* dx, void* workspace, size_t workspace_bytes,
                                       bool accumulate) {
  ConvPlan& plan = conv_plan(g, /*benchmark=*/false);
  require_workspace(plan, workspace, workspace_bytes, "conv2d_backward_data");
  if (plan.graph_backward_data && !accumulate && graph_aligned({dy, w, dx, workspace})) {
    graph_convolutions().backward_data(g, dy, w, dx, workspace, workspace_bytes);
    return;
  }
  if (accumulate) {
    decide_graph_accumulate(g, plan, workspace_bytes);
    if (plan.graph_backward_data_accumulate && workspace_bytes >= plan.graph_accumulate_workspace_bytes &&
        graph_aligned({dy, w, dx, workspace})) {
      graph_convolutions().backward_data(g, dy, w, dx, workspace, workspace_bytes, /*accumulate=*/true);
      return;
    }
  }
  // beta = 1 folds a second reader's gradient into the tensor's, with no scratch or extra pass;
  // in 16-bit the blend happens in fp32 before the one rounding of the result.
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  DPB_CUDNN_CHECK(cudnnConvolutionBackwardData(
      cudnn_, &one, plan.filter.get(), w, plan.output.get(), dy, plan.convolution.get(),
      plan.backward_data_algorithm, workspace, workspace_bytes, &beta, plan.input.get(), dx));
}

// In 16-bit, dw has the filter's type: cuDNN's convolution API takes x, dy and dw of one type.
void CudaBackend::conv2d_backward_filter(const ConvGeometry& g, const void* x, const void* dy,
                                         void* dw, void* workspace, size_t workspace_bytes) {
  const ConvPlan& plan = conv_plan(g, /*benchmark=*/false);
  require_workspace(plan, workspace, workspace_bytes, "conv2d_backward_filter");
  if (plan.graph_backward_filter && graph_aligned({x, dy, dw, workspace})) {
    graph_convolutions().backward_filter(g, x, dy, dw, workspace, workspace_bytes);
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  DPB_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      cudnn_, &one, plan.input.get(), x, plan.output.get(), dy, plan.convolution.get(),
      plan.backward_filter_algorithm, workspace, workspace_bytes, &zero, plan.filter.get(), dw));
}

}  // namespace dpbench
