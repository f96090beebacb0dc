// `trivial`: a tiny dense network on small synthetic images — flatten (32x32x3) -> dense 256 ->
// ReLU -> dense 10 -> softmax cross-entropy — trained for real (forward, backward, update).
// It exercises the whole engine cheaply: smoke tests, CI and the independent-scaling benchmark.
#pragma once

#include <memory>

#include "engine/model.h"
#include "engine/run_config.h"

namespace dpbench {

std::unique_ptr<Model> create_trivial_model(const RunConfig& config);

}  // namespace dpbench
