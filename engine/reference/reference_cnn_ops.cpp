// PLACEHOLDER while the image ops are written (issue 3, in progress): replaced by the real ops.
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"

namespace dpbench {
void ReferenceBackend::conv2d_forward(const ConvGeometry&, const float*, const float*, float*, void*, size_t) { throw RuntimeError("ReferenceBackend::conv2d_forward: being written (issue 3)"); }
void ReferenceBackend::conv2d_backward_data(const ConvGeometry&, const float*, const float*, float*, void*, size_t) { throw RuntimeError("ReferenceBackend::conv2d_backward_data: being written (issue 3)"); }
void ReferenceBackend::conv2d_backward_filter(const ConvGeometry&, const float*, const float*, float*, void*, size_t) { throw RuntimeError("ReferenceBackend::conv2d_backward_filter: being written (issue 3)"); }
size_t ReferenceBackend::conv2d_workspace_bytes(const ConvGeometry&) { throw RuntimeError("ReferenceBackend::conv2d_workspace_bytes: being written (issue 3)"); }
void ReferenceBackend::add_channel_bias(const Tensor4&, float*, const float*) { throw RuntimeError("ReferenceBackend::add_channel_bias: being written (issue 3)"); }
void ReferenceBackend::channel_bias_gradient(const Tensor4&, const float*, float*) { throw RuntimeError("ReferenceBackend::channel_bias_gradient: being written (issue 3)"); }
void ReferenceBackend::batch_norm_forward_training(const Tensor4&, const float*, const float*, const float*, float, float*, float*, float*) { throw RuntimeError("ReferenceBackend::batch_norm_forward_training: being written (issue 3)"); }
void ReferenceBackend::batch_norm_backward(const Tensor4&, const float*, const float*, const float*, const float*, const float*, float, float*, float*, float*) { throw RuntimeError("ReferenceBackend::batch_norm_backward: being written (issue 3)"); }
void ReferenceBackend::pool_forward(const PoolGeometry&, const float*, float*) { throw RuntimeError("ReferenceBackend::pool_forward: being written (issue 3)"); }
void ReferenceBackend::pool_backward(const PoolGeometry&, const float*, const float*, const float*, float*) { throw RuntimeError("ReferenceBackend::pool_backward: being written (issue 3)"); }
void ReferenceBackend::dropout_forward(const float*, float*, size_t, float, uint64_t, const int32_t*) { throw RuntimeError("ReferenceBackend::dropout_forward: being written (issue 3)"); }
void ReferenceBackend::dropout_backward(const float*, float*, size_t, float, uint64_t, const int32_t*) { throw RuntimeError("ReferenceBackend::dropout_backward: being written (issue 3)"); }
void ReferenceBackend::copy_into_channels(const Tensor4&, const float*, const Tensor4&, float*, int) { throw RuntimeError("ReferenceBackend::copy_into_channels: being written (issue 3)"); }
void ReferenceBackend::copy_from_channels(const Tensor4&, const float*, int, const Tensor4&, float*) { throw RuntimeError("ReferenceBackend::copy_from_channels: being written (issue 3)"); }
}  // namespace dpbench
