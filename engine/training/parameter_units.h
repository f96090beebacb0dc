// The ranges and units a model's parameters are cut into, as plain records: what a strategy
// shards and gathers by, and what a traced result records of them (summary.timeline.units), which
// the reports read back without the engine's devices.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dpbench {

// [offset, offset + count) in elements of the flat buffers.
struct GradientRange {
  size_t offset = 0;
  size_t count = 0;
  size_t end() const { return offset + count; }
};

// Note [parameter units]: a model may cut its parameters into units, the groups the trace
// shows (embeddings, each block, the final norm): each unit one contiguous range of the layout,
// the units tiling it. A strategy that keeps only a shard of each unit (fully_sharded) gathers a
// unit just before the model uses it and reduces its gradients once the model is done with them,
// so the model brackets every use of a unit, in forward and in backward, with UnitHooks calls, in
// the order its `uses` list. A use that writes the unit's gradients says so (a tied projection's
// weight gradient is written in forward). Between its brackets a unit's tensors are read and
// written through the ParameterSet as always; outside them a sharding strategy has nothing there.
enum class UnitPass { forward, backward };

struct ParameterUnit {
  std::string name;     // "block 3": as the trace names its span
  GradientRange range;  // its tensors' extents
  // Elements of its tensors of rank 1 (biases, norm scales), which fully_sharded gathers in fp32
  // beside a unit gathered in 16 bits; 0 where not counted (vector_elements_of in
  // engine/training/parameter_set.h counts them).
  size_t vector_elements = 0;
};

struct UnitUse {
  int unit = 0;
  UnitPass pass = UnitPass::forward;
  bool writes_gradients = false;
};

struct ParameterUnits {
  std::vector<ParameterUnit> units;  // in layout order, tiling [0, total_count())
  std::vector<UnitUse> uses;         // one training step's brackets, in order
  bool empty() const { return units.empty(); }
};

}  // namespace dpbench
