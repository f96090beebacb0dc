// Cache keys and descriptor set-up for the cuDNN plans (see cudnn_plans.h).
#include "engine/cuda/cudnn_plans.h"

#include <string>

#include "engine/errors.h"

namespace dpbench {
namespace {

cudnnTensorFormat_t cudnn_format(DataFormat format) {
  return format == DataFormat::nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
}

bool is_16_bit(DataType type) { return type == DataType::f16 || type == DataType::bf16; }

}  // namespace

const char* conv_algorithm_name(cudnnConvolutionFwdAlgo_t algorithm) {
  switch (algorithm) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "unknown";
  }
}

const char* conv_algorithm_name(cudnnConvolutionBwdDataAlgo_t algorithm) {
  switch (algorithm) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "algo_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "algo_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "unknown";
  }
}

const char* conv_algorithm_name(cudnnConvolutionBwdFilterAlgo_t algorithm) {
  switch (algorithm) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "algo_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "algo_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "algo_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "fft_tiling";
    default: return "unknown";
  }
}

cudnnDataType_t cudnn_data_type(DataType type) {
  switch (type) {
    case DataType::f16: return CUDNN_DATA_HALF;
    case DataType::bf16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

void describe_tensor(const CudnnTensorDescriptor& descriptor, const Tensor4& shape) {
  DPB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(descriptor.get(), cudnn_format(shape.format),
                                             cudnn_data_type(shape.type), shape.n, shape.c,
                                             shape.h, shape.w));
}

cudnnMathType_t convolution_math_type(const ConvGeometry& g, cudnnMathType_t fp32_math) {
  return is_16_bit(g.input.type) ? CUDNN_TENSOR_OP_MATH : fp32_math;
}

void describe_convolution(ConvPlan& plan, const ConvGeometry& g, cudnnMathType_t math_type) {
  // cuDNN's filter layout follows the activations' (KCRS with NCHW, KRSC with NHWC); mixing them
  // would be legal for cuDNN but not for the Backend contract, so refuse it here.
  // One element type throughout, as the Backend contract has it (cuDNN's classic API could not
  // run most mixtures anyway).
  if (g.filter.format != g.input.format || g.output.format != g.input.format ||
      g.filter.c != g.input.c || g.output.c != g.filter.k || g.output.n != g.input.n ||
      g.filter.type != g.input.type || g.output.type != g.input.type) {
    throw RuntimeError("convolution geometry is inconsistent: " + describe(g) + " (filter " +
                       data_type_name(g.filter.type) + ")");
  }
  describe_tensor(plan.input, g.input);
  describe_tensor(plan.output, g.output);
  DPB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.filter.get(), cudnn_data_type(g.filter.type),
                                             cudnn_format(g.filter.format), g.filter.k,
                                             g.filter.c, g.filter.r, g.filter.s));
  // Compute type float: 16-bit data is multiplied and accumulated in fp32 (cuDNN's "pseudo
  // half" configurations), the mixed precision this benchmark measures.
  DPB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.convolution.get(), g.pad_h, g.pad_w,
                                                  g.stride_h, g.stride_w, 1, 1,
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DPB_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.convolution.get(), math_type));
  plan.math_type = math_type;

  int n = 0, c = 0, h = 0, w = 0;
  DPB_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan.convolution.get(), plan.input.get(),
                                                        plan.filter.get(), &n, &c, &h, &w));
  if (n != g.output.n || c != g.output.c || h != g.output.h || w != g.output.w) {
    throw RuntimeError("convolution geometry " + describe(g) + " disagrees with cuDNN's output (" +
                       std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(h) +
                       "," + std::to_string(w) + ")");
  }
}

}  // namespace dpbench
