// CudaBackend's sequence ops other than the fused LSTM (which is cuda_rnn_ops.cpp): the row-wise
// softmax cross-entropy and the reproducible scaled sum of the summed-token losses, device copies,
// embeddings, the rows they touched and their packing for a sparse exchange, and the LSTM cell of
// the unrolled RNN, on fp32 or 16-bit data (gradients of tables are fp32). The kernels are in
// cuda_kernels_sequence.cu and cuda_kernels_lstm.cu; everything is asynchronous on the
// backend's stream and allocates nothing once warm (the deterministic scatter-add grows its
// workspace in the eager first step), so a step made of these ops can be captured as a CUDA graph.
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cudnn_rnn_plans.h"
#include "engine/cuda/stream_timing.h"
#include "engine/errors.h"

namespace dpbench {

void CudaBackend::softmax_cross_entropy_rows(DataType logits_type, const void* logits,
                                             const int32_t* labels, int rows, int classes,
                                             float gradient_scale, float* row_losses,
                                             void* dlogits, const float* loss_scale,
                                             const float* row_weights, int row_stride) {
  if (rows > 0 && classes <= 0) {
    throw RuntimeError("CudaBackend::softmax_cross_entropy_rows: " + std::to_string(classes) +
                       " classes");
  }
  if (rows > 0 && row_stride != 0 && row_stride < classes) {
    throw RuntimeError("CudaBackend::softmax_cross_entropy_rows: row_stride " + std::to_string(row_stride) +
                       " < " + std::to_string(classes) + " classes");
  }
  cuda_kernels::launch_softmax_cross_entropy_rows(stream_, logits_type, logits, labels, rows,
                                                  classes, row_stride > 0 ? row_stride : classes,
                                                  gradient_scale, row_losses, dlogits, loss_scale,
                                                  row_weights);
}

void CudaBackend::sum_scaled(const float* x, size_t n, float scale, float* out) {
  cuda_kernels::launch_sum_scaled(stream_, x, n, scale, out);
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  // Default, not DeviceToDevice: strategies copy between GPUs (peer) and to and from pinned host
  // memory with the same op; unified addressing tells the driver where each pointer lives.
  DPB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
}

void CudaBackend::embedding_forward(DataType type, const void* table, const int32_t* ids, size_t n,
                                    int dim, void* y) {
  cuda_kernels::launch_embedding_forward(stream_, type, table, ids, n, dim, y);
}

void CudaBackend::embedding_backward(const int32_t* ids, DataType dy_type, const void* dy, size_t n,
                                     int dim, float* dtable) {
  if (!deterministic_) {
    cuda_kernels::launch_embedding_backward(stream_, ids, dy_type, dy, n, dim, dtable);
    return;
  }
  const size_t needed = cuda_kernels::embedding_backward_sorted_workspace_bytes(n);
  if (!embedding_scratch_ || embedding_scratch_->bytes() < needed) {
    if (stream_capturing(stream_))
      throw RuntimeError("CudaBackend::embedding_backward: the ordered scatter-add of " +
                         std::to_string(n) + " ids needs " + std::to_string(needed) +
                         " bytes of workspace, first asked for inside a graph capture (run the "
                         "step eagerly once first)");
    // The old workspace may still be read by queued work.
    DPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    embedding_scratch_.reset();
    embedding_scratch_ = std::make_unique<DeviceMemory>(
        needed, memory_, MemoryTag{MemoryCategory::workspaces, "ordered embedding scatter-add"});
  }
  cuda_kernels::launch_embedding_backward_sorted(stream_, ids, dy_type, dy, n, dim, dtable,
                                                 embedding_scratch_->data());
}

void CudaBackend::embedding_touched_rows(const int32_t* ids, size_t n, int vocab, int32_t* rows,
                                         int32_t* count, void* workspace) {
  cuda_kernels::launch_embedding_touched_rows(stream_, ids, n, vocab, rows, count, workspace);
}

size_t CudaBackend::embedding_touched_rows_workspace_bytes(size_t n, int vocab) {
  // A flag per vocabulary row, whatever n: the workspace depends on the vocabulary alone.
  return cuda_kernels::embedding_touched_rows_workspace_bytes(vocab);
}

void CudaBackend::gather_rows(const float* table, int dim, const int32_t* rows, const int32_t* count,
                              size_t capacity, int32_t* rows_out, float* values_out) {
  cuda_kernels::launch_gather_rows(stream_, table, dim, rows, count, capacity, rows_out, values_out);
}

void CudaBackend::lstm_cell_forward(DataType type, int batch, int hidden, void* gates,
                                    const void* bias_input, const void* bias_recurrent,
                                    const void* c_prev, void* c, void* h) {
  cuda_kernels::launch_lstm_cell_forward(stream_, type, batch, hidden, gates, bias_input,
                                         bias_recurrent, c_prev, c, h);
}

void CudaBackend::lstm_cell_backward(DataType type, int batch, int hidden, const void* gates,
                                     const void* c_prev, const void* c, const void* dh,
                                     const void* dc, void* dgates, void* dc_prev) {
  cuda_kernels::launch_lstm_cell_backward(stream_, type, batch, hidden, gates, c_prev, c, dh, dc,
                                          dgates, dc_prev);
}

}  // namespace dpbench
