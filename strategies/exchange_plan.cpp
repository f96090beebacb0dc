// Exchange planning (see exchange_plan.h).
#include "strategies/exchange_plan.h"

#include <algorithm>

#include "engine/errors.h"

namespace dpbench {
namespace {

// A tensor as an exchange sees it: its extent (the gap that aligns the next tensor included, so
// the plan covers the buffer exactly) and its own size (what makes it small).
struct PlannedTensor {
  GradientRange extent;
  size_t count = 0;
};

// Tensors by offset: the order backward makes their gradients ready.
std::vector<PlannedTensor> tensors_in_readiness_order(const ParameterLayout& layout) {
  std::vector<PlannedTensor> tensors;
  for (size_t id = 0; id < layout.tensors().size(); ++id) {
    const GradientRange extent = layout.extent(static_cast<int>(id));
    if (extent.count > 0) tensors.push_back(PlannedTensor{extent, layout.tensors()[id].count});
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const PlannedTensor& a, const PlannedTensor& b) { return a.extent.offset < b.extent.offset; });
  return tensors;
}

}  // namespace

std::vector<GradientRange> split_range(GradientRange range, int parts) {
  std::vector<GradientRange> pieces;
  if (range.count == 0 || parts <= 0) return pieces;
  const size_t n = std::min(range.count, static_cast<size_t>(parts));
  const size_t base = range.count / n, larger = range.count % n;
  size_t offset = range.offset;
  for (size_t i = 0; i < n; ++i) {
    const size_t count = base + (i < larger ? 1 : 0);
    pieces.push_back(GradientRange{offset, count});
    offset += count;
  }
  return pieces;
}

std::vector<GradientRange> plan_exchanges(const ParameterLayout& layout, const ExchangePlanOptions& options) {
  if (!layout.finalized()) throw RuntimeError("plan_exchanges: the layout is not finalized");
  const size_t total = layout.total_count();
  if (options.gradient_repacking > 0) return split_range(GradientRange{0, total}, options.gradient_repacking);

  std::vector<GradientRange> plan;
  const std::vector<PlannedTensor> tensors = tensors_in_readiness_order(layout);
  if (options.bucket_cap_bytes > 0) {
    // Note [tail bucket]: the last tensors, as few as reach the tail size (at least one).
    size_t head_tensors = tensors.size();
    if (options.tail_bucket_bytes > 0) {
      size_t tail_elements = 0;
      while (head_tensors > 0 && static_cast<int64_t>(tail_elements * options.element_bytes) < options.tail_bucket_bytes)
        tail_elements += tensors[--head_tensors].extent.count;
    }
    // A bucket closes as soon as it holds at least the cap (a tensor larger than the cap is a
    // bucket of its own): the first bucket can start while backward is still near the loss.
    GradientRange bucket{0, 0};
    for (size_t t = 0; t < head_tensors; ++t) {
      const PlannedTensor& planned = tensors[t];
      const GradientRange& tensor = planned.extent;
      if (bucket.count == 0) bucket.offset = tensor.offset;
      bucket.count = tensor.end() - bucket.offset;
      if (static_cast<int64_t>(bucket.count * options.element_bytes) >= options.bucket_cap_bytes) {
        plan.push_back(bucket);
        bucket.count = 0;
      }
    }
    if (bucket.count > 0) plan.push_back(bucket);
    if (head_tensors < tensors.size()) {
      const size_t tail_offset = tensors[head_tensors].extent.offset;
      plan.push_back(GradientRange{tail_offset, total - tail_offset});
    }
    return plan;
  }

  // Per tensor; consecutive small tensors share one exchange.
  GradientRange group{0, 0};
  int group_size = 0;
  auto close_group = [&] {
    if (group.count > 0) plan.push_back(group);
    group.count = 0;
    group_size = 0;
  };
  for (const PlannedTensor& planned : tensors) {
    const GradientRange& tensor = planned.extent;
    const bool small = options.agg_small_max_bytes > 0 &&
                       static_cast<int64_t>(planned.count * options.element_bytes) <= options.agg_small_max_bytes;
    if (!small) {
      close_group();
      plan.push_back(tensor);
      continue;
    }
    if (group_size == options.agg_small_max_group) close_group();
    if (group.count == 0) group.offset = tensor.offset;
    group.count = tensor.end() - group.offset;
    ++group_size;
  }
  close_group();
  return plan;
}

ReadinessTracker::ReadinessTracker(std::vector<GradientRange> plan) : plan_(std::move(plan)) {
  begin_step();
}

void ReadinessTracker::begin_step() {
  missing_.resize(plan_.size());
  for (size_t i = 0; i < plan_.size(); ++i) missing_[i] = plan_[i].count;
  completed_ = 0;
}

std::vector<size_t> ReadinessTracker::mark_ready(GradientRange announced) {
  std::vector<size_t> completed;
  // The first planned range ending after the announced range's start.
  auto it = std::upper_bound(plan_.begin(), plan_.end(), announced.offset,
                             [](size_t offset, const GradientRange& r) { return offset < r.end(); });
  for (size_t i = static_cast<size_t>(it - plan_.begin()); i < plan_.size(); ++i) {
    const GradientRange& planned = plan_[i];
    if (planned.offset >= announced.end()) break;
    const size_t overlap = std::min(planned.end(), announced.end()) - std::max(planned.offset, announced.offset);
    if (overlap > missing_[i])
      throw RuntimeError("gradient range [" + std::to_string(announced.offset) + ", " +
                         std::to_string(announced.end()) + ") announced twice in one step");
    missing_[i] -= overlap;
    if (missing_[i] == 0 && overlap > 0) {
      completed.push_back(i);
      ++completed_;
    }
  }
  return completed;
}

}  // namespace dpbench
