// Softmax cross-entropy loss layer: owns the per-row loss scratch; forward also produces dlogits
// (the fused kernel computes both in one pass over the logits).
#pragma once

#include <cstdint>

#include "engine/backend/device.h"

namespace dpbench {

class SoftmaxCrossEntropy {
 public:
  SoftmaxCrossEntropy(Device& device, int batch, int classes);
  // logits (batch, classes) are overwritten by dlogits (batch, classes) = d(mean loss)/d(logits),
  // times *loss_scale when given (device pointer; fp16 loss scaling).
  void forward_backward(Backend& ops, float* logits_to_dlogits, const int32_t* labels,
                        float* loss_out, const float* loss_scale = nullptr);

 private:
  int batch_, classes_;
  Buffer row_losses_;  // (batch)
};

}  // namespace dpbench
