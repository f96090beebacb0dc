// Cache keys and descriptor set-up for the cuDNN plans (see cudnn_plans.h).
#include "engine/cuda/cudnn_plans.h"

#include <string>

#include "engine/errors.h"

namespace dpbench {
namespace {

cudnnTensorFormat_t cudnn_format(DataFormat format) {
  return format == DataFormat::nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
}

}  // namespace

ConvKey conv_key(const ConvGeometry& g) {
  return {g.input.n,  g.input.c,  g.input.h,  g.input.w,  static_cast<int>(g.input.format),
          g.filter.k, g.filter.c, g.filter.r, g.filter.s, static_cast<int>(g.filter.format),
          g.stride_h, g.stride_w, g.pad_h,    g.pad_w,    g.output.c,
          g.output.h, g.output.w, g.output.n};
}

PoolKey pool_key(const PoolGeometry& g) {
  return {g.input.n,  g.input.c,  g.input.h,  g.input.w, static_cast<int>(g.input.format),
          static_cast<int>(g.mode), g.window_h, g.window_w, g.stride_h, g.stride_w,
          g.pad_h,    g.pad_w,    g.output.h, g.output.w, g.output.c, g.output.n};
}

void describe_tensor(const CudnnTensorDescriptor& descriptor, const Tensor4& shape) {
  DPB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(descriptor.get(), cudnn_format(shape.format),
                                             CUDNN_DATA_FLOAT, shape.n, shape.c, shape.h, shape.w));
}

void describe_convolution(ConvPlan& plan, const ConvGeometry& g, cudnnMathType_t math_type) {
  // cuDNN's filter layout follows the activations' (KCRS with NCHW, KRSC with NHWC); mixing them
  // would be legal for cuDNN but not for the Backend contract, so refuse it here.
  if (g.filter.format != g.input.format || g.output.format != g.input.format ||
      g.filter.c != g.input.c || g.output.c != g.filter.k || g.output.n != g.input.n) {
    throw RuntimeError("convolution geometry is inconsistent: " + describe(g));
  }
  describe_tensor(plan.input, g.input);
  describe_tensor(plan.output, g.output);
  DPB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.filter.get(), CUDNN_DATA_FLOAT,
                                             cudnn_format(g.filter.format), g.filter.k,
                                             g.filter.c, g.filter.r, g.filter.s));
  DPB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.convolution.get(), g.pad_h, g.pad_w,
                                                  g.stride_h, g.stride_w, 1, 1,
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DPB_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.convolution.get(), math_type));

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
