// ReferenceBackend: the host oracle. Plain, synchronous C++ for every Backend op, accumulating in
// double where order matters, so [gpu] tests and the CI end-to-end runs have a trustworthy baseline.
// 16-bit buffers (fp16, bf16) are read as floats and every result is rounded once to the storage
// type, which is what the GPU's fp32-inside kernels store. The 16-bit GEMMs, losses and LSTMs are
// the fp32 op on the widened inputs with its outputs rounded (reference_storage.h's Widened).
#pragma once

#include "engine/backend/backend.h"

namespace dpbench {

// Stateless: one instance can serve every stream of a reference device, and since each reference
// device is driven by a single runner thread, "enqueue on a stream" simply means "run now".
class ReferenceBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::reference; }

  // Tests only: makes conv2d_forward_statistics_fused true, so a network hands its batch norms
  // the convolutions' sums as it would on a GPU whose cuDNN fuses them (off by default).
  void set_fuse_convolution_statistics(bool fuse) { fuse_convolution_statistics_ = fuse; }
  // Tests only: linear_forward rounds as one cuBLASLt matmul with its epilogue does (the product,
  // the 16-bit bias copy and a residual summed in fp32, rounded once), where CudaBackend's
  // cuBLASLt path takes the epilogue, so a GPU forced onto that path has an oracle with its
  // rounding points; off, the op-by-op rounding of the plain path (off by default).
  void set_fuse_linear_epilogues(bool fuse) { fuse_linear_epilogues_ = fuse; }

  // Every Backend op (engine/backend/backend_ops.h). Defined in reference_backend.cpp (dense,
  // element-wise, loss, optimizer, bookkeeping and timing ops), reference_conv.cpp
  // (convolutions), reference_cnn_ops.cpp (the other image ops), reference_sequence_ops.cpp
  // (sequence ops) and reference_transformer_ops.cpp (Transformer ops).
#include "engine/backend/backend_overrides.h"

 private:
  bool fuse_convolution_statistics_ = false;
  bool fuse_linear_epilogues_ = false;
  // The fp32 ops; a 16-bit op widens its inputs, runs one of these and rounds its outputs once.
  void gemm_f32(Transpose trans_a, Transpose trans_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
  void lstm_forward_f32(const RnnGeometry& g, const float* x, const float* hx, const float* cx,
                        const float* weights, float* y, float* hy, float* cy, void* reserve);
  void lstm_backward_data_f32(const RnnGeometry& g, const float* dy, const float* dhy,
                              const float* dcy, const float* weights, const float* cx, float* dx,
                              float* dhx, float* dcx, void* reserve, void* workspace);
  void lstm_backward_weights_f32(const RnnGeometry& g, const float* x, const float* hx,
                                 const float* y, float* dweights, void* reserve);
};

}  // namespace dpbench
