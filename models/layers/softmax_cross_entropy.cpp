// Softmax cross-entropy loss layer (fused forward + backward on the backend).
#include "models/layers/softmax_cross_entropy.h"

namespace dpbench {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(Device& device, int batch, int classes)
    : batch_(batch),
      classes_(classes),
      row_losses_(device.allocate(sizeof(float) * batch, MemoryTag{MemoryCategory::scratch, "loss"})) {}

void SoftmaxCrossEntropy::forward_backward(Backend& ops, float* logits_to_dlogits,
                                           const int32_t* labels, float* loss_out,
                                           const float* loss_scale) {
  ops.softmax_cross_entropy(logits_to_dlogits, labels, batch_, classes_, row_losses_.as<float>(),
                            loss_out, logits_to_dlogits, loss_scale);
}

}  // namespace dpbench
