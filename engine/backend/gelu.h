// GELU in its tanh form (GPT-2's, PyTorch's F.gelu(x, approximate="tanh")) and its derivative,
// one definition for the reference backend and the CUDA kernels (engine/backend/host_device.h):
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2 / pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2)
// All in fp32 with tanhf, grouped as PyTorch's kernels group them. The two backends still differ
// by an ulp or two, as their tanhf and their contraction of products into fused multiply-adds do.
#pragma once

#include <cmath>

#include "engine/backend/host_device.h"

namespace dpbench {

constexpr float kGeluTanhScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluTanhCubic = 0.044715f;

DPB_HOST_DEVICE float gelu_tanh_argument(float x, float x_squared) {
  return kGeluTanhScale * (x + kGeluTanhCubic * (x_squared * x));
}

DPB_HOST_DEVICE float gelu_tanh(float x) {
  const float t = tanhf(gelu_tanh_argument(x, x * x));
  return 0.5f * x * (1.0f + t);
}

DPB_HOST_DEVICE float gelu_tanh_derivative(float x) {
  const float x_squared = x * x;
  const float t = tanhf(gelu_tanh_argument(x, x_squared));
  const float argument_derivative = kGeluTanhScale * (1.0f + 3.0f * kGeluTanhCubic * x_squared);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * argument_derivative;
}

}  // namespace dpbench
