// Where fully_sharded keeps the units it gathers, planned once from the model's declared uses
// (Note [parameter units] in engine/training/model.h): a fixed pool of parameter slots and one of
// gradient slots, each use of a unit given its slot, so every step enqueues the same work into
// the same buffers and a CUDA graph of it keeps replaying. Host-only and pure, so tests can hold
// it to its rules.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/training/model.h"

namespace dpbench {

struct PlannedUse {
  int unit = 0;
  UnitPass pass = UnitPass::forward;
  int parameter_slot = 0;
  bool gathers = false;     // its unit is gathered for it (else the slot still holds it)
  int gather_issued_at = 0; // the use whose before_unit issues that gather (prefetch)
  // The last use of the slot's previous unit: the gather waits for its compute to finish; -1: none.
  int slot_freed_by = -1;
  // Gradients: the unit's gradient slot (-1: this use writes none); the first writing use zeroes
  // it (after the reduction of the slot's previous unit), the last one reduce-scatters it.
  int gradient_slot = -1;
  bool zeroes_gradients = false;
  int gradient_slot_freed_by_unit = -1;  // the slot's previous unit this step; -1: none
  bool reduces_gradients = false;
};

struct UnitSlotPlan {
  std::vector<size_t> parameter_slot_elements;  // per slot: the largest padded unit it holds
  std::vector<size_t> gradient_slot_elements;
  std::vector<PlannedUse> uses;                 // as the model declared them
  std::vector<std::vector<int>> gathers_issued_at;  // per use: the uses whose gathers it issues, in order
};

// `unit_elements`: each unit's padded size (group size x its chunk). `prefetch`: gathers run this
// many uses ahead. `reshard_after_forward` false keeps a unit's forward copy until its next use.
// Throws RuntimeError for uses that name no unit or write gradients of a unit it has no use of.
UnitSlotPlan plan_unit_slots(const std::vector<size_t>& unit_elements, const std::vector<UnitUse>& uses, int prefetch,
                             bool reshard_after_forward);

}  // namespace dpbench
