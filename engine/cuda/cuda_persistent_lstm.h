// dpbench's own fused LSTM for 16-bit data and small hidden sizes, where cuDNN has no persistent
// kernel for the type (bf16 in cuDNN 9.14 to 9.19): per layer, the input projections of every
// step as one GEMM, the recurrence as one persistent kernel (Note [persistent LSTM] in
// cuda_kernels_persistent_lstm.cu), and the weight gradients as GEMMs over the whole sequence.
// The three functions keep Backend's lstm_* contracts (engine/backend/backend_ops.h) on the canonical weight
// layout, read in place; CudaBackend runs them for plans whose algorithm is "own_persistent"
// (Note [LSTM algorithm] in cudnn_rnn_plans.h). Nothing allocates or synchronises, so they can be
// captured in a CUDA graph.
#pragma once

#include <cstddef>

#include "engine/backend/rnn_geometry.h"

namespace dpbench {

class CudaBackend;

// Whether the persistent kernels take `g`: fp16 or bf16, one direction, 32, 64 or 128 units.
bool persistent_lstm_supports(const RnnGeometry& g);

// The buffers the three calls share, in bytes (the caller's workspace and reserve).
size_t persistent_lstm_workspace_bytes(const RnnGeometry& g);
size_t persistent_lstm_reserve_bytes(const RnnGeometry& g);

void persistent_lstm_forward(CudaBackend& ops, const RnnGeometry& g, const void* x, const void* hx,
                             const void* cx, const void* weights, void* y, void* hy, void* cy,
                             void* reserve, void* workspace);
void persistent_lstm_backward_data(CudaBackend& ops, const RnnGeometry& g, const void* dy,
                                   const void* dhy, const void* dcy, const void* weights, void* dx,
                                   void* dhx, void* dcx, void* reserve, void* workspace);
void persistent_lstm_backward_weights(CudaBackend& ops, const RnnGeometry& g, const void* x,
                                      const void* hx, const void* y, float* dweights,
                                      void* reserve, void* workspace);

}  // namespace dpbench
