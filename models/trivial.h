// `trivial`: a tiny dense network on small synthetic images — flatten (32x32x3) -> dense 256 ->
// ReLU -> dense 10 -> softmax cross-entropy — trained for real (forward, backward, update).
// It exercises the whole engine cheaply: smoke tests, CI and the independent-scaling benchmark.
#pragma once

#include <memory>

#include "engine/training/model.h"
#include "models/model_inputs.h"
#include "models/model_settings.h"

namespace dpbench {

std::unique_ptr<Model> create_trivial_model(const ModelSettings& config);
// Its synthetic images (fp32, NCHW, whatever the flags say) and CIFAR-10, which has their shape.
ModelInputs trivial_inputs();

}  // namespace dpbench
