// Shared initialisation helper of the CNN layers.
#include "models/layers/layer.h"

#include <cmath>

#include "engine/backend/counter_random.h"

namespace dpbench {

float he_uniform(uint64_t seed, int tensor_id, uint64_t logical_index, int64_t fan_in) {
  const float limit = std::sqrt(6.0f / static_cast<float>(fan_in));
  const uint64_t stream = kRandomStreamParameters + static_cast<uint64_t>(tensor_id);
  return (2.0f * counter_uniform(seed, stream, logical_index) - 1.0f) * limit;
}

}  // namespace dpbench
