// A linear layer's passes as the plain ops compose them (see linear_in_ops.h).
#include "engine/backend/linear_in_ops.h"

#include <string>

namespace dpbench {

void linear_forward_in_two_ops(Backend& ops, DataType type, const void* x, const void* weights, const float* bias,
                               int rows, int in, int out, void* y, const RowBiasEpilogue& then) {
  ops.gemm(Transpose::no, Transpose::yes, rows, out, in, 1.0f, type, x, in, weights, in, 0.0f, type, y, out);
  ops.add_row_bias(type, y, bias, rows, out, then);
}

void check_linear_backward(const void* dx, bool accumulate, const GeluInputGradient& gelu, const char* op) {
  if ((gelu.input == nullptr) != (gelu.bias_gradient == nullptr))
    throw RuntimeError(std::string(op) + ": a GELU's backward needs both its input and its bias gradient");
  if (gelu.input != nullptr && (dx == nullptr || accumulate))
    throw RuntimeError(std::string(op) + ": a GELU's backward writes dx: it needs dx and cannot accumulate");
}

void linear_weight_gradient_in_ops(Backend& ops, DataType type, const void* x, const void* dy, int rows, int in,
                                   int out, float* dweights, float* dbias) {
  if (dbias != nullptr) ops.bias_gradient(type, dy, dbias, rows, out);
  // dW (out, in) = dy^T (out, rows) x (rows, in), in fp32.
  ops.gemm(Transpose::yes, Transpose::no, out, in, rows, 1.0f, type, dy, out, x, in, 0.0f, DataType::f32, dweights,
           in);
}

void linear_input_gradient_in_ops(Backend& ops, DataType type, const void* dy, const void* weights, int rows, int in,
                                  int out, void* dx, bool accumulate, const GeluInputGradient& gelu) {
  if (dx == nullptr) return;
  ops.gemm(Transpose::no, Transpose::no, rows, in, out, 1.0f, type, dy, out, weights, in, accumulate ? 1.0f : 0.0f,
           type, dx, in);
  if (gelu.input == nullptr) return;
  ops.gelu_backward(type, gelu.input, dx, dx, static_cast<size_t>(rows) * in);
  ops.bias_gradient(type, dx, gelu.bias_gradient, rows, in);
}

void linear_backward_in_ops(Backend& ops, DataType type, const void* x, const void* dy, const void* weights, int rows,
                            int in, int out, float* dweights, float* dbias, void* dx, bool accumulate,
                            const GeluInputGradient& gelu) {
  linear_weight_gradient_in_ops(ops, type, x, dy, rows, in, out, dweights, dbias);
  linear_input_gradient_in_ops(ops, type, dy, weights, rows, in, out, dx, accumulate, gelu);
}

int linear_weight_gradient_in_ops_launches(bool bias) { return bias ? 2 : 1; }

int linear_input_gradient_in_ops_launches(bool input_gradient, bool gelu) {
  return input_gradient ? (gelu ? 3 : 1) : 0;
}

}  // namespace dpbench
