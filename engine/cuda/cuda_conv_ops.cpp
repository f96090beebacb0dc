// CudaBackend's convolutions on cuDNN's classic API. conv2d_workspace_bytes prepares a geometry
// once: descriptors, then the algorithm of each pass, timed on scratch buffers (cudnn_benchmark on)
// or taken from cuDNN's heuristics (off). The three passes only look the plan up and run it.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cudnn_plans.h"
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

// cuDNN lists candidates best first (by measured time, or by its heuristics' ranking). In pure
// fp32 (FMA math) tensor-core results are skipped: a TF32 algorithm would not compare with the
// reference backend. With TF32 allowed (--precision=tf32) they are what we want.
template <typename Perf>
auto first_usable_algorithm(const std::vector<Perf>& results, int returned, size_t workspace_limit,
                            const char* pass, const ConvGeometry& g, cudnnMathType_t math) {
  const bool allow_tensor_cores = math != CUDNN_FMA_MATH;
  for (int i = 0; i < returned; ++i) {
    const Perf& result = results[static_cast<size_t>(i)];
    if (result.status == CUDNN_STATUS_SUCCESS &&
        (allow_tensor_cores || !uses_tensor_cores(result.mathType)) &&
        result.memory <= workspace_limit) {
      return result.algo;
    }
  }
  throw RuntimeError(std::string("cuDNN offers no fp32 ") + pass + " algorithm within " +
                     std::to_string(workspace_limit >> 20) + " MiB of workspace for " +
                     describe(g));
}

// Device memory held for one algorithm search only. Allocation failures are answers here (the
// search then works with less), so they are cleared rather than left as the thread's last error.
class SearchScratch {
 public:
  SearchScratch() = default;
  ~SearchScratch() {
    if (data_ != nullptr && cudaFree(data_) != cudaSuccess) (void)cudaGetLastError();
  }
  SearchScratch(const SearchScratch&) = delete;
  SearchScratch& operator=(const SearchScratch&) = delete;

  // Exactly `bytes` (at least one), or throws.
  void allocate(size_t bytes) {
    DPB_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(bytes, 1)));
    bytes_ = bytes;
  }
  // Up to `bytes`, halving under memory pressure; may end with nothing.
  void allocate_at_most(size_t bytes) {
    for (; bytes >= (size_t{1} << 20); bytes /= 2) {
      if (cudaMalloc(&data_, bytes) == cudaSuccess) {
        bytes_ = bytes;
        return;
      }
      (void)cudaGetLastError();
    }
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Times every algorithm of each pass on zeroed scratch tensors (cuDNN writes the outputs, which
// here are scratch as well) and keeps the fastest that fits the workspace searched.
void search_conv_algorithms(cudnnHandle_t cudnn, cudaStream_t stream, const ConvGeometry& g,
                            ConvPlan& plan, cudnnMathType_t math) {
  SearchScratch x, w, y, workspace;
  x.allocate(g.input.count() * sizeof(float));
  w.allocate(g.filter.count() * sizeof(float));
  y.allocate(g.output.count() * sizeof(float));
  // Uninitialised memory could hold NaNs or denormals, which slow some algorithms down; zeros
  // would flatter kernels whose speed depends on the data (tensor cores draw less power on
  // zeros). Values like the models' own activations are the honest input.
  cuda_kernels::launch_fill_uniform_by_index(stream, static_cast<float*>(x.data()), g.input.count(),
                                             kSearchSeed, 0, 0, -1.0f, 1.0f);
  cuda_kernels::launch_fill_uniform_by_index(stream, static_cast<float*>(w.data()), g.filter.count(),
                                             kSearchSeed, 1, 0, -0.05f, 0.05f);
  cuda_kernels::launch_fill_uniform_by_index(stream, static_cast<float*>(y.data()), g.output.count(),
                                             kSearchSeed, 2, 0, -1.0f, 1.0f);
  size_t free_bytes = 0, total_bytes = 0;
  DPB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // Leave half of what is free: the search must not starve whatever is allocated next.
  workspace.allocate_at_most(std::min(kMaxConvWorkspaceBytes, free_bytes / 2));

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

  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> backward_data(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
      cudnn, plan.filter.get(), w.data(), plan.output.get(), y.data(), plan.convolution.get(),
      plan.input.get(), x.data(), max_count, &returned, backward_data.data(), workspace.data(),
      workspace.bytes()));
  plan.backward_data_algorithm =
      first_usable_algorithm(backward_data, returned, workspace.bytes(), "backward-data", g, math);

  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> backward_filter(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      cudnn, plan.input.get(), x.data(), plan.output.get(), y.data(), plan.convolution.get(),
      plan.filter.get(), w.data(), max_count, &returned, backward_filter.data(), workspace.data(),
      workspace.bytes()));
  plan.backward_filter_algorithm =
      first_usable_algorithm(backward_filter, returned, workspace.bytes(), "backward-filter", g, math);

  // The scratch is freed on return; nothing queued may still be using it.
  DPB_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// cuDNN's heuristics: no allocation, no synchronisation, nothing run on the GPU.
void choose_conv_algorithms_by_heuristics(cudnnHandle_t cudnn, const ConvGeometry& g,
                                          ConvPlan& plan, cudnnMathType_t math) {
  int returned = 0;
  int max_count = 0;
  DPB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> forward(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
      cudnn, plan.input.get(), plan.filter.get(), plan.convolution.get(), plan.output.get(),
      max_count, &returned, forward.data()));
  plan.forward_algorithm =
      first_usable_algorithm(forward, returned, kMaxConvWorkspaceBytes, "forward", g, math);

  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> backward_data(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      cudnn, plan.filter.get(), plan.output.get(), plan.convolution.get(), plan.input.get(),
      max_count, &returned, backward_data.data()));
  plan.backward_data_algorithm =
      first_usable_algorithm(backward_data, returned, kMaxConvWorkspaceBytes, "backward-data", g, math);

  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnn, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> backward_filter(static_cast<size_t>(max_count));
  DPB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      cudnn, plan.input.get(), plan.output.get(), plan.convolution.get(), plan.filter.get(),
      max_count, &returned, backward_filter.data()));
  plan.backward_filter_algorithm = first_usable_algorithm(
      backward_filter, returned, kMaxConvWorkspaceBytes, "backward-filter", g, math);
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
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DPB_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
  if (benchmark && capture == cudaStreamCaptureStatusNone) {
    search_conv_algorithms(cudnn_, stream_, g, plan, conv_math_type_);
  } else {
    choose_conv_algorithms_by_heuristics(cudnn_, g, plan, conv_math_type_);
  }
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
  describe_convolution(plan, g, conv_math_type_);
  choose_conv_algorithms(g, plan, benchmark);
  return plans_->convolutions.emplace(key, std::move(plan)).first->second;
}

size_t CudaBackend::conv2d_workspace_bytes(const ConvGeometry& g) {
  return conv_plan(g, cudnn_benchmark_).workspace_bytes();
}

// The passes below find their geometry prepared, because the caller had to ask
// conv2d_workspace_bytes for the workspace it passes. If it did not (a caller bug), the geometry
// is prepared here by heuristics, which neither allocate nor synchronise, and the workspace check
// then most likely reports the mistake.

void CudaBackend::conv2d_forward(const ConvGeometry& g, const float* x, const float* w, float* y,
                                 void* workspace, size_t workspace_bytes) {
  const ConvPlan& plan = conv_plan(g, /*benchmark=*/false);
  require_workspace(plan, workspace, workspace_bytes, "conv2d_forward");
  const float one = 1.0f, zero = 0.0f;  // y = 1 * conv + 0 * y: overwrite
  DPB_CUDNN_CHECK(cudnnConvolutionForward(cudnn_, &one, plan.input.get(), x, plan.filter.get(), w,
                                          plan.convolution.get(), plan.forward_algorithm,
                                          workspace, workspace_bytes, &zero, plan.output.get(), y));
}

void CudaBackend::conv2d_backward_data(const ConvGeometry& g, const float* dy, const float* w,
                                       float* dx, void* workspace, size_t workspace_bytes,
                                       bool accumulate) {
  const ConvPlan& plan = conv_plan(g, /*benchmark=*/false);
  require_workspace(plan, workspace, workspace_bytes, "conv2d_backward_data");
  // beta = 1 folds a second reader's gradient into the tensor's, with no scratch or extra pass.
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  DPB_CUDNN_CHECK(cudnnConvolutionBackwardData(
      cudnn_, &one, plan.filter.get(), w, plan.output.get(), dy, plan.convolution.get(),
      plan.backward_data_algorithm, workspace, workspace_bytes, &beta, plan.input.get(), dx));
}

void CudaBackend::conv2d_backward_filter(const ConvGeometry& g, const float* x, const float* dy,
                                         float* dw, void* workspace, size_t workspace_bytes) {
  const ConvPlan& plan = conv_plan(g, /*benchmark=*/false);
  require_workspace(plan, workspace, workspace_bytes, "conv2d_backward_filter");
  const float one = 1.0f, zero = 0.0f;
  DPB_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      cudnn_, &one, plan.input.get(), x, plan.output.get(), dy, plan.convolution.get(),
      plan.backward_filter_algorithm, workspace, workspace_bytes, &zero, plan.filter.get(), dw));
}

}  // namespace dpbench
