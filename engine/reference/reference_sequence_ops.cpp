// PLACEHOLDER (to be replaced): the sequence ops of ReferenceBackend, not written yet.
#include "engine/reference/reference_backend.h"

#include "engine/errors.h"

namespace dpbench {

void ReferenceBackend::softmax_cross_entropy_rows(const float*, const int32_t*, int, int, float, float*, float*, const float*) {
  throw RuntimeError("ReferenceBackend::softmax_cross_entropy_rows is not implemented yet");
}
void ReferenceBackend::sum_scaled(const float*, size_t, float, float*) {
  throw RuntimeError("ReferenceBackend::sum_scaled is not implemented yet");
}
void ReferenceBackend::copy(void*, const void*, size_t) {
  throw RuntimeError("ReferenceBackend::copy is not implemented yet");
}
void ReferenceBackend::embedding_forward(const float*, const int32_t*, size_t, int, float*) {
  throw RuntimeError("ReferenceBackend::embedding_forward is not implemented yet");
}
void ReferenceBackend::embedding_backward(const int32_t*, const float*, size_t, int, float*) {
  throw RuntimeError("ReferenceBackend::embedding_backward is not implemented yet");
}
void ReferenceBackend::embedding_touched_rows(const int32_t*, size_t, int, int32_t*, int32_t*, void*) {
  throw RuntimeError("ReferenceBackend::embedding_touched_rows is not implemented yet");
}
size_t ReferenceBackend::embedding_touched_rows_workspace_bytes(size_t, int) {
  throw RuntimeError("ReferenceBackend::embedding_touched_rows_workspace_bytes is not implemented yet");
}
void ReferenceBackend::lstm_forward(const RnnGeometry&, const float*, const float*, const float*, const float*, float*, float*, float*, void*, void*) {
  throw RuntimeError("ReferenceBackend::lstm_forward is not implemented yet");
}
void ReferenceBackend::lstm_backward_data(const RnnGeometry&, const float*, const float*, const float*, const float*, const float*, const float*, const float*, float*, float*, float*, void*, void*) {
  throw RuntimeError("ReferenceBackend::lstm_backward_data is not implemented yet");
}
void ReferenceBackend::lstm_backward_weights(const RnnGeometry&, const float*, const float*, const float*, float*, void*, void*) {
  throw RuntimeError("ReferenceBackend::lstm_backward_weights is not implemented yet");
}
size_t ReferenceBackend::lstm_workspace_bytes(const RnnGeometry&) {
  throw RuntimeError("ReferenceBackend::lstm_workspace_bytes is not implemented yet");
}
size_t ReferenceBackend::lstm_reserve_bytes(const RnnGeometry&) {
  throw RuntimeError("ReferenceBackend::lstm_reserve_bytes is not implemented yet");
}
void ReferenceBackend::lstm_cell_forward(int, int, float*, const float*, const float*, const float*, float*, float*) {
  throw RuntimeError("ReferenceBackend::lstm_cell_forward is not implemented yet");
}
void ReferenceBackend::lstm_cell_backward(int, int, const float*, const float*, const float*, const float*, const float*, float*, float*) {
  throw RuntimeError("ReferenceBackend::lstm_cell_backward is not implemented yet");
}

}  // namespace dpbench
