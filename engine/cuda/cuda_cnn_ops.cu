// PLACEHOLDER while the image ops are written (issue 3, in progress): replaced by the real ops.
#include "engine/cuda/cuda_backend.h"
#include "engine/errors.h"

namespace dpbench {
void CudaBackend::conv2d_forward(const ConvGeometry&, const float*, const float*, float*, void*, size_t) { throw RuntimeError("CudaBackend::conv2d_forward: being written (issue 3)"); }
void CudaBackend::conv2d_backward_data(const ConvGeometry&, const float*, const float*, float*, void*, size_t) { throw RuntimeError("CudaBackend::conv2d_backward_data: being written (issue 3)"); }
void CudaBackend::conv2d_backward_filter(const ConvGeometry&, const float*, const float*, float*, void*, size_t) { throw RuntimeError("CudaBackend::conv2d_backward_filter: being written (issue 3)"); }
size_t CudaBackend::conv2d_workspace_bytes(const ConvGeometry&) { throw RuntimeError("CudaBackend::conv2d_workspace_bytes: being written (issue 3)"); }
void CudaBackend::add_channel_bias(const Tensor4&, float*, const float*) { throw RuntimeError("CudaBackend::add_channel_bias: being written (issue 3)"); }
void CudaBackend::channel_bias_gradient(const Tensor4&, const float*, float*) { throw RuntimeError("CudaBackend::channel_bias_gradient: being written (issue 3)"); }
void CudaBackend::batch_norm_forward_training(const Tensor4&, const float*, const float*, const float*, float, float*, float*, float*) { throw RuntimeError("CudaBackend::batch_norm_forward_training: being written (issue 3)"); }
void CudaBackend::batch_norm_backward(const Tensor4&, const float*, const float*, const float*, const float*, const float*, float, float*, float*, float*) { throw RuntimeError("CudaBackend::batch_norm_backward: being written (issue 3)"); }
void CudaBackend::pool_forward(const PoolGeometry&, const float*, float*) { throw RuntimeError("CudaBackend::pool_forward: being written (issue 3)"); }
void CudaBackend::pool_backward(const PoolGeometry&, const float*, const float*, const float*, float*) { throw RuntimeError("CudaBackend::pool_backward: being written (issue 3)"); }
void CudaBackend::dropout_forward(const float*, float*, size_t, float, uint64_t, const int32_t*) { throw RuntimeError("CudaBackend::dropout_forward: being written (issue 3)"); }
void CudaBackend::dropout_backward(const float*, float*, size_t, float, uint64_t, const int32_t*) { throw RuntimeError("CudaBackend::dropout_backward: being written (issue 3)"); }
void CudaBackend::copy_into_channels(const Tensor4&, const float*, const Tensor4&, float*, int) { throw RuntimeError("CudaBackend::copy_into_channels: being written (issue 3)"); }
void CudaBackend::copy_from_channels(const Tensor4&, const float*, int, const Tensor4&, float*) { throw RuntimeError("CudaBackend::copy_from_channels: being written (issue 3)"); }
}  // namespace dpbench
