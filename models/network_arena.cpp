// The network's memory plan: when each of its buffers (and each node's workspace) is live in a
// step, and where it sits in the one arena they share (Network::plan_live_spans, plan_arena).
#include <algorithm>
#include <limits>
#include <utility>

#include "models/network.h"

namespace dpbench {

// Note [one arena for activations and their gradients]
// A step writes and reads its buffers in a fixed order, so when each buffer is live is known at
// set-up, and buffers never live at the same moment can share bytes. All of them (the input
// batch's aside, which the data source refills) sit in one arena at offsets fixed here, the same
// every step, so a step replays as a CUDA graph. Moments: forward runs node i at 2i; backward
// runs node i at 2 (2n - i) (n nodes), and a recomputed block's forward just before its last
// node's backward. Spans are inclusive, so a node's inputs and output (and in backward its
// output's gradient and its inputs') never share bytes unless the node runs in place.
// - An activation is live from its producer's forward to its last reader: its readers' forward,
//   their backward where it reads that input (Layer::backward_reads_input), its producer's
//   backward where that reads its output (ReLU's mask). An output read only by the next forward
//   op (into a concatenation, a ReLU's input) is therefore transient.
// - A gradient is live from its first writer's backward (its last reader in forward order;
//   earlier readers add to it) to its producer's backward, which reads it.
// - A node's gradient sums (its input gradients computed apart, then added) live during its
//   backward only.
// - Under set_recompute_blocks a buffer its block makes again is live twice: in forward up to its
//   last forward reader, and from the block's recomputation to its last backward reader.
// - Each node's workspace (Layer::workspace_bytes, as the replica's backend sizes it) is live at
//   the moments its passes run, so the large ones (the early, wide convolutions') sit in memory
//   that activations hold at other moments, where one workspace for all held the largest always.
// Keeping every activation for the whole step with the gradients pooled beside them held 0.57
// GiB of gradients beside 4.99 of activations (ResNet-50, bf16 NHWC, batch 128); PyTorch's
// autograd frees each saved tensor once backward has used it, and so does this plan: backward's
// gradients take the place of activations it has passed, and the busiest moment is the turn from
// forward to backward, where the arena holds the activations and 0.05 GiB of gradients (5.04;
// 0.07 before a join's shortcut gradient took its output gradient's bytes,
// Layer::input_gradient_may_overwrite_output_gradient).
// Placement: largest buffer first, each into the smallest gap that holds it between the buffers
// already placed that are live at a moment it is (else above them all). The ledger records the
// arena as what it holds at the step's busiest moment: the gradients and sums then live as
// scratch ("activation gradients"), the workspaces then as workspaces ("network"), the rest,
// placement's slack included, as activations. The replica plans its arena (Network::plan_arena)
// once its backend has sized the workspaces, after any algorithm search.
namespace {

struct StepMoments {
  int nodes;
  int forward(int node) const { return 2 * node; }
  int backward(int node) const { return 2 * (2 * nodes - node); }
  int recompute(int block_last) const { return backward(block_last) - 1; }
  int end() const { return backward(0); }
};

constexpr size_t kArenaAlignment = 256;
size_t arena_aligned(size_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

bool live_together(const std::vector<Network::LiveSpan>& a, const std::vector<Network::LiveSpan>& b) {
  for (const Network::LiveSpan& x : a)
    for (const Network::LiveSpan& y : b)
      if (x.first <= y.last && y.first <= x.last) return true;
  return false;
}

}  // namespace

void Network::plan_live_spans() {
  const StepMoments at{static_cast<int>(nodes_.size())};
  const size_t buffers = buffer_bytes_.size();
  // Per buffer: its span in forward (or its only one), and from its recomputation on.
  std::vector<LiveSpan> first(buffers, LiveSpan{std::numeric_limits<int>::max(), -1}), again = first;
  auto use = [](LiveSpan& span, int moment) {
    span.first = std::min(span.first, moment);
    span.last = std::max(span.last, moment);
  };
  auto span_in_backward = [&](int buffer) -> LiveSpan& {
    return recomputed_buffers_[static_cast<size_t>(buffer)] ? again[static_cast<size_t>(buffer)]
                                                            : first[static_cast<size_t>(buffer)];
  };
  for (TensorId t = 1; t < static_cast<TensorId>(tensors_.size()); ++t) {
    const TensorInfo& tensor = tensors_[t];
    if (tensor.value_buffer < 0) continue;
    LiveSpan& made = first[static_cast<size_t>(tensor.value_buffer)];
    use(made, at.forward(tensor.producer));
    for (int reader : tensor.consumers) use(made, at.forward(reader));
    if (inference_only_) {
      if (t == logits_) use(made, at.end());  // the caller reads them after forward
      continue;
    }
    for (int reader : tensor.consumers) {
      const Node& node = nodes_[static_cast<size_t>(reader)];
      for (size_t i = 0; i < node.inputs.size(); ++i)
        if (node.inputs[i] == t && node.layer->backward_reads_input(i))
          use(span_in_backward(tensor.value_buffer), at.backward(reader));
    }
    if (nodes_[static_cast<size_t>(tensor.producer)].layer->backward_reads_output())
      use(span_in_backward(tensor.value_buffer), at.backward(tensor.producer));
    if (tensor.gradient_buffer >= 0) {
      LiveSpan& gradient = first[static_cast<size_t>(tensor.gradient_buffer)];
      use(gradient, at.backward(tensor.consumers.empty() ? tensor.producer : tensor.consumers.back()));
      use(gradient, at.backward(tensor.producer));
    }
  }
  for (size_t index = 0; index < nodes_.size(); ++index) {
    const Node& node = nodes_[index];
    if (node.scratch_buffer >= 0) use(first[static_cast<size_t>(node.scratch_buffer)], at.backward(static_cast<int>(index)));
    if (!node.recomputed) continue;
    // Its block's forward again: it writes its output and reads its inputs then.
    const int moment = at.recompute(static_cast<int>(block_last(index)));
    use(span_in_backward(tensors_[node.output].value_buffer), moment);
    for (TensorId in : node.inputs) use(span_in_backward(tensors_[in].value_buffer), moment);
  }
  live_spans_.assign(buffers, {});
  for (size_t b = 0; b < buffers; ++b) {
    if (first[b].last >= 0) live_spans_[b].push_back(first[b]);
    if (again[b].last >= 0) live_spans_[b].push_back(again[b]);
  }
}

size_t Network::block_last(size_t node) const {
  size_t last = node;
  while (last + 1 < nodes_.size() && nodes_[last + 1].block_first == nodes_[node].block_first) ++last;
  return last;
}

std::vector<Network::LiveSpan> Network::workspace_spans(int node) const {
  const Node& n = nodes_.at(static_cast<size_t>(node));
  if (n.fused_away) return {};
  const StepMoments at{static_cast<int>(nodes_.size())};
  std::vector<LiveSpan> spans{{at.forward(node), at.forward(node)}};
  if (inference_only_) return spans;
  if (n.recomputed) {
    const int moment = at.recompute(static_cast<int>(block_last(static_cast<size_t>(node))));
    spans.push_back({moment, moment});
  }
  spans.push_back({at.backward(node), at.backward(node)});
  return spans;
}

namespace {

// A buffer or a workspace to place in the arena.
struct ArenaItem {
  size_t bytes;  // aligned
  std::vector<Network::LiveSpan> spans;
  MemoryCategory category;
};

// Offsets for `items`, largest first, each in the smallest gap that holds it between the items
// already placed live with it (else above them); with `share` false, each above all the others.
std::vector<size_t> place_in_arena(const std::vector<ArenaItem>& items, bool share) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto first_moment = [&](size_t i) { return items[i].spans.empty() ? 0 : items[i].spans.front().first; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return items[a].bytes != items[b].bytes ? items[a].bytes > items[b].bytes : first_moment(a) < first_moment(b);
  });
  std::vector<size_t> offsets(items.size(), 0);
  std::vector<size_t> placed;
  size_t top = 0;
  for (size_t i : order) {
    size_t offset = top;
    if (share) {
      std::vector<std::pair<size_t, size_t>> taken;  // [begin, end) of placed items live with this one
      for (size_t p : placed)
        if (live_together(items[p].spans, items[i].spans)) taken.emplace_back(offsets[p], offsets[p] + items[p].bytes);
      std::sort(taken.begin(), taken.end());
      size_t cursor = 0, best_gap = std::numeric_limits<size_t>::max();
      offset = std::numeric_limits<size_t>::max();
      for (const auto& [begin, end] : taken) {
        if (begin >= cursor + items[i].bytes && begin - cursor < best_gap) {
          offset = cursor;
          best_gap = begin - cursor;
        }
        cursor = std::max(cursor, end);
      }
      if (offset == std::numeric_limits<size_t>::max()) offset = cursor;
    }
    offsets[i] = offset;
    top = std::max(top, offset + items[i].bytes);
    placed.push_back(i);
  }
  return offsets;
}

}  // namespace

Network::ArenaPlan Network::plan_arena(const std::vector<size_t>& workspace_bytes) const {
  std::vector<ArenaItem> items;
  std::vector<int> placed_as;  // per item: its buffer, or -1 - node for a node's workspace
  for (size_t b = 0; b < buffer_bytes_.size(); ++b) {
    if (static_cast<int>(b) == tensors_[0].value_buffer) continue;
    items.push_back({arena_aligned(buffer_bytes_[b]), live_spans_[b], buffer_tags_[b].category});
    placed_as.push_back(static_cast<int>(b));
  }
  for (size_t node = 0; node < workspace_bytes.size() && node < nodes_.size(); ++node) {
    std::vector<LiveSpan> spans = workspace_spans(static_cast<int>(node));
    if (workspace_bytes[node] == 0 || spans.empty()) continue;
    items.push_back({arena_aligned(workspace_bytes[node]), std::move(spans), MemoryCategory::workspaces});
    placed_as.push_back(-1 - static_cast<int>(node));
  }
  const std::vector<size_t> offsets = place_in_arena(items, share_memory_);

  ArenaPlan plan;
  plan.offsets.assign(buffer_bytes_.size(), -1);
  plan.workspace_offsets.assign(nodes_.size(), -1);
  for (size_t i = 0; i < items.size(); ++i) {
    plan.bytes = std::max(plan.bytes, offsets[i] + items[i].bytes);
    if (placed_as[i] >= 0)
      plan.offsets[static_cast<size_t>(placed_as[i])] = static_cast<long long>(offsets[i]);
    else
      plan.workspace_offsets[static_cast<size_t>(-1 - placed_as[i])] = static_cast<long long>(offsets[i]);
  }
  // The busiest moment (some item's first) and what is live then.
  for (const ArenaItem& candidate : items) {
    for (const LiveSpan& at : candidate.spans) {
      CategoryBytes live{};
      for (const ArenaItem& item : items)
        for (const LiveSpan& span : item.spans)
          if (span.first <= at.first && at.first <= span.last) live[static_cast<size_t>(item.category)] += item.bytes;
      if (total_bytes(live) > plan.busiest_bytes) {
        plan.busiest_bytes = total_bytes(live);
        plan.busiest = live;
      }
    }
  }
  return plan;
}

}  // namespace dpbench
