// The fused LSTM's plan cache seen from code built without the CUDA headers (the tests): thin
// forwarders to CudaBackend that check what they were given.
#pragma once

#include <cstddef>
#include <string>

#include "engine/backend/rnn_geometry.h"

namespace dpbench {

class Backend;

// CudaBackend::lstm_plans_created. Throws RuntimeError unless `backend` is a CUDA backend.
size_t lstm_plans_created(const Backend& backend);

// CudaBackend::lstm_weights_zero_copy (prepares the plan of `g` if needed). Throws RuntimeError
// unless `backend` is a CUDA backend.
bool lstm_weights_zero_copy(Backend& backend, const RnnGeometry& g);

// CudaBackend::set_lstm_always_repack (tests of the repacking path). Throws RuntimeError unless
// `backend` is a CUDA backend.
void set_lstm_always_repack(Backend& backend, bool always);

// The algorithm `g`'s plan runs ("standard", "persist_static", "persist_static_small_h",
// "own_persistent"; prepares the plan), and, for tests, the one later plans are built with: one of
// those names, or "fastest" (the default: Note [LSTM algorithm] in cudnn_rnn_plans.h). Throw
// RuntimeError unless `backend` is a CUDA backend.
std::string lstm_algorithm(Backend& backend, const RnnGeometry& g);
void set_lstm_algorithm(Backend& backend, const std::string& name);

}  // namespace dpbench
