// PLACEHOLDER (to be replaced): the sequence ops of CudaBackend, not written yet.
#include "engine/cuda/cuda_backend.h"

#include "engine/errors.h"

namespace dpbench {

void CudaBackend::softmax_cross_entropy_rows(const float*, const int32_t*, int, int, float, float*, float*, const float*) {
  throw RuntimeError("CudaBackend::softmax_cross_entropy_rows is not implemented yet");
}
void CudaBackend::sum_scaled(const float*, size_t, float, float*) {
  throw RuntimeError("CudaBackend::sum_scaled is not implemented yet");
}
void CudaBackend::copy(void*, const void*, size_t) {
  throw RuntimeError("CudaBackend::copy is not implemented yet");
}
void CudaBackend::embedding_forward(const float*, const int32_t*, size_t, int, float*) {
  throw RuntimeError("CudaBackend::embedding_forward is not implemented yet");
}
void CudaBackend::embedding_backward(const int32_t*, const float*, size_t, int, float*) {
  throw RuntimeError("CudaBackend::embedding_backward is not implemented yet");
}
void CudaBackend::embedding_touched_rows(const int32_t*, size_t, int, int32_t*, int32_t*, void*) {
  throw RuntimeError("CudaBackend::embedding_touched_rows is not implemented yet");
}
size_t CudaBackend::embedding_touched_rows_workspace_bytes(size_t, int) {
  throw RuntimeError("CudaBackend::embedding_touched_rows_workspace_bytes is not implemented yet");
}
void CudaBackend::lstm_forward(const RnnGeometry&, const float*, const float*, const float*, const float*, float*, float*, float*, void*, void*) {
  throw RuntimeError("CudaBackend::lstm_forward is not implemented yet");
}
void CudaBackend::lstm_backward_data(const RnnGeometry&, const float*, const float*, const float*, const float*, const float*, const float*, const float*, float*, float*, float*, void*, void*) {
  throw RuntimeError("CudaBackend::lstm_backward_data is not implemented yet");
}
void CudaBackend::lstm_backward_weights(const RnnGeometry&, const float*, const float*, const float*, float*, void*, void*) {
  throw RuntimeError("CudaBackend::lstm_backward_weights is not implemented yet");
}
size_t CudaBackend::lstm_workspace_bytes(const RnnGeometry&) {
  throw RuntimeError("CudaBackend::lstm_workspace_bytes is not implemented yet");
}
size_t CudaBackend::lstm_reserve_bytes(const RnnGeometry&) {
  throw RuntimeError("CudaBackend::lstm_reserve_bytes is not implemented yet");
}
void CudaBackend::lstm_cell_forward(int, int, float*, const float*, const float*, const float*, float*, float*) {
  throw RuntimeError("CudaBackend::lstm_cell_forward is not implemented yet");
}
void CudaBackend::lstm_cell_backward(int, int, const float*, const float*, const float*, const float*, const float*, float*, float*) {
  throw RuntimeError("CudaBackend::lstm_cell_backward is not implemented yet");
}

}  // namespace dpbench
