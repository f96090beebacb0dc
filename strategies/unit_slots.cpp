// plan_unit_slots (see the header).
#include "strategies/unit_slots.h"

#include <algorithm>
#include <string>

#include "engine/errors.h"

namespace dpbench {
namespace {

struct Slot {
  size_t elements = 0;
  int holder = -1;     // the unit it holds (or last held)
  int busy_until = -1; // the last use planned to read it
};

// The next use of `unit` after `after`; uses.size() when none.
size_t next_use_of(const std::vector<UnitUse>& uses, int unit, size_t after) {
  for (size_t i = after + 1; i < uses.size(); ++i)
    if (uses[i].unit == unit) return i;
  return uses.size();
}

// A free slot for `elements` (its holder's next use farthest, then the best fit), or a new one.
int choose_slot(std::vector<Slot>& slots, size_t elements, int free_before, const std::vector<UnitUse>& uses,
                size_t now) {
  int best = -1;
  size_t best_next = 0;
  bool best_fits = false;
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slots[s].busy_until >= free_before) continue;
    const size_t next = slots[s].holder < 0 ? uses.size() : next_use_of(uses, slots[s].holder, now);
    const bool fits = slots[s].elements >= elements;
    if (best < 0 || next > best_next || (next == best_next && fits && !best_fits)) {
      best = static_cast<int>(s);
      best_next = next;
      best_fits = fits;
    }
  }
  if (best < 0) {
    slots.push_back(Slot{});
    best = static_cast<int>(slots.size()) - 1;
  }
  slots[best].elements = std::max(slots[best].elements, elements);
  return best;
}

}  // namespace

UnitSlotPlan plan_unit_slots(const std::vector<size_t>& unit_elements, const std::vector<UnitUse>& uses, int prefetch,
                             bool reshard_after_forward) {
  UnitSlotPlan plan;
  plan.gathers_issued_at.resize(uses.size());
  std::vector<Slot> slots;
  for (size_t j = 0; j < uses.size(); ++j) {
    const int unit = uses[j].unit;
    if (unit < 0 || static_cast<size_t>(unit) >= unit_elements.size())
      throw RuntimeError("the model declares a use of unit " + std::to_string(unit) + " but has " +
                         std::to_string(unit_elements.size()) + " units");
    PlannedUse use;
    use.unit = unit;
    use.pass = uses[j].pass;
    const int issue = std::max(0, static_cast<int>(j) - std::max(0, prefetch));
    // Still held, since nothing was gathered into its slot after it: no gather.
    int held = -1;
    for (size_t s = 0; s < slots.size(); ++s)
      if (slots[s].holder == unit) held = static_cast<int>(s);
    if (held >= 0) {
      use.parameter_slot = held;
    } else {
      use.parameter_slot = choose_slot(slots, unit_elements[unit], issue, uses, j);
      use.gathers = true;
      use.gather_issued_at = issue;
      use.slot_freed_by = slots[use.parameter_slot].busy_until;
      slots[use.parameter_slot].holder = unit;
      plan.gathers_issued_at[issue].push_back(static_cast<int>(j));
    }
    Slot& slot = slots[use.parameter_slot];
    // Resharded after forward: free once this use ends; else held until the unit's next use.
    const size_t next = next_use_of(uses, unit, j);
    const bool keep = use.pass == UnitPass::forward && !reshard_after_forward && next < uses.size();
    slot.busy_until = std::max(slot.busy_until, keep ? static_cast<int>(next) : static_cast<int>(j));
    plan.uses.push_back(use);
  }
  for (const Slot& slot : slots) plan.parameter_slot_elements.push_back(slot.elements);

  // Gradient slots: a unit's from its first writing use to its last, then its reduction; a slot
  // is taken again only a use after that reduction began, so the reduction can run meanwhile.
  std::vector<int> first(unit_elements.size(), -1), last(unit_elements.size(), -1);
  for (size_t j = 0; j < uses.size(); ++j) {
    if (!uses[j].writes_gradients) continue;
    const int unit = uses[j].unit;
    if (first[unit] < 0) first[unit] = static_cast<int>(j);
    last[unit] = static_cast<int>(j);
  }
  struct GradientSlot {
    size_t elements = 0;
    int unit = -1;
    int last = -1;
  };
  std::vector<GradientSlot> gradient_slots;
  std::vector<int> slot_of(unit_elements.size(), -1);
  for (size_t j = 0; j < uses.size(); ++j) {
    const int unit = uses[j].unit;
    if (!uses[j].writes_gradients) continue;
    if (first[unit] == static_cast<int>(j)) {
      int chosen = -1;
      for (size_t s = 0; s < gradient_slots.size(); ++s) {
        if (gradient_slots[s].last + 1 >= static_cast<int>(j)) continue;
        if (chosen < 0 || (gradient_slots[s].elements >= unit_elements[unit]) >
                              (gradient_slots[chosen].elements >= unit_elements[unit]))
          chosen = static_cast<int>(s);
      }
      if (chosen < 0) {
        gradient_slots.push_back(GradientSlot{});
        chosen = static_cast<int>(gradient_slots.size()) - 1;
      }
      GradientSlot& slot = gradient_slots[chosen];
      plan.uses[j].zeroes_gradients = true;
      plan.uses[j].gradient_slot_freed_by_unit = slot.unit;
      slot.elements = std::max(slot.elements, unit_elements[unit]);
      slot.unit = unit;
      slot.last = last[unit];
      slot_of[unit] = chosen;
    }
    plan.uses[j].gradient_slot = slot_of[unit];
    plan.uses[j].reduces_gradients = last[unit] == static_cast<int>(j);
  }
  for (const GradientSlot& slot : gradient_slots) plan.gradient_slot_elements.push_back(slot.elements);
  return plan;
}

}  // namespace dpbench
