// A linear layer's two passes composed of the plain ops (gemm, add_row_bias, bias_gradient,
// gelu_backward): what the reference backend runs for Backend::linear_forward and
// Backend::linear_backward, and what the cuda backend runs where cuBLASLt cannot fuse them.
#pragma once

#include "engine/backend/backend.h"

namespace dpbench {

// gemm, then add_row_bias: two launches.
void linear_forward_in_two_ops(Backend& ops, DataType type, const void* x, const void* weights, const float* bias,
                               int rows, int in, int out, void* y, const RowBiasEpilogue& then);

// linear_backward in plain ops, in two halves: the parameters' gradients (bias_gradient where
// dbias is wanted, then the weight gradient's gemm) and, where dx is wanted, the input's (its gemm,
// then with GELU its backward in place on dx and the bias gradient of u).
void linear_weight_gradient_in_ops(Backend& ops, DataType type, const void* x, const void* dy, int rows, int in,
                                   int out, float* dweights, float* dbias);
void linear_input_gradient_in_ops(Backend& ops, DataType type, const void* dy, const void* weights, int rows, int in,
                                  int out, void* dx, bool accumulate, const GeluInputGradient& gelu);
// Both halves; and the launches each makes.
void linear_backward_in_ops(Backend& ops, DataType type, const void* x, const void* dy, const void* weights, int rows,
                            int in, int out, float* dweights, float* dbias, void* dx, bool accumulate,
                            const GeluInputGradient& gelu);
int linear_weight_gradient_in_ops_launches(bool bias);
int linear_input_gradient_in_ops_launches(bool input_gradient, bool gelu);

// Throws RuntimeError, naming `op`, where a linear backward's GELU is half given, has no dx to
// apply to, or would accumulate.
void check_linear_backward(const void* dx, bool accumulate, const GeluInputGradient& gelu, const char* op);

}  // namespace dpbench
