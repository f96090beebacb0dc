// Network building, buffer and gradient planning, and the per-replica passes.
#include "models/network.h"

#include <algorithm>

#include "engine/backend/step_trace.h"
#include "engine/errors.h"
#include "models/layers/batch_norm.h"
#include "models/layers/concat.h"
#include "models/layers/dropout.h"
#include "models/layers/fully_connected.h"
#include "models/layers/normalised_residual_add.h"
#include "models/layers/relu.h"
#include "models/layers/residual_add.h"

namespace dpbench {

Network::Network(ParameterLayout& layout, const Tensor4& input_shape) : layout_(layout) {
  make_tensor(input_shape, -1);
}

TensorId Network::make_tensor(const Tensor4& shape, int producer) {
  TensorInfo info;
  info.shape = shape;
  info.producer = producer;
  tensors_.push_back(info);
  return static_cast<TensorId>(tensors_.size()) - 1;
}

TensorId Network::add_node(std::unique_ptr<Layer> layer, const std::vector<TensorId>& inputs) {
  if (finalized_) throw RuntimeError("Network: cannot add '" + layer->name() + "' after finalize()");
  if (!node_by_name_.emplace(layer->name(), static_cast<int>(nodes_.size())).second)
    throw RuntimeError("Network: two nodes are called '" + layer->name() + "'");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] < 0 || inputs[i] >= static_cast<TensorId>(tensors_.size()))
      throw RuntimeError("Network: '" + layer->name() + "' reads an unknown tensor");
    // One gradient slot per input keeps accumulation simple; no model reads a tensor twice.
    if (std::count(inputs.begin(), inputs.end(), inputs[i]) > 1)
      throw RuntimeError("Network: '" + layer->name() + "' reads the same tensor twice");
  }
  const int index = static_cast<int>(nodes_.size());
  for (TensorId input : inputs) tensors_[input].consumers.push_back(index);
  Node node;
  node.group = group_.empty() ? layer->name() : group_;
  if (!group_.empty()) {
    const bool continues = !nodes_.empty() && nodes_.back().block_first >= 0 && nodes_.back().group == group_;
    node.block_first = continues ? nodes_.back().block_first : index;
  }
  node.inputs = inputs;
  node.output = make_tensor(layer->output_shape(), index);
  node.layer = std::move(layer);
  nodes_.push_back(std::move(node));
  return nodes_.back().output;
}

TensorId Network::conv(TensorId x, const std::string& name, const Conv2dOptions& options) {
  return add_node(std::make_unique<Conv2dLayer>(layout_, name, shape(x), options), {x});
}

TensorId Network::batch_norm(TensorId x, const std::string& name, float epsilon, bool relu) {
  return add_node(std::make_unique<BatchNormLayer>(layout_, name, shape(x), epsilon, relu), {x});
}

TensorId Network::relu(TensorId x, const std::string& name) {
  return add_node(std::make_unique<ReluLayer>(name, shape(x)), {x});
}

TensorId Network::pool(TensorId x, const std::string& name, const PoolOptions& options) {
  return add_node(std::make_unique<PoolingLayer>(name, shape(x), options), {x});
}

TensorId Network::global_average_pool(TensorId x, const std::string& name) {
  const Tensor4& in = shape(x);
  if (in.h != in.w) throw RuntimeError(name + ": global pooling of a non-square " + describe(in));
  // No padding, so both average modes agree.
  return pool(x, name, PoolOptions{PoolMode::average_include_padding, in.h, 1, Padding::valid, 0});
}

TensorId Network::dropout(TensorId x, const std::string& name, float rate) {
  const uint64_t layer_key = nodes_.size();
  return add_node(std::make_unique<DropoutLayer>(name, shape(x), rate, layer_key), {x});
}

TensorId Network::concat(const std::vector<TensorId>& branches, const std::string& name) {
  std::vector<Tensor4> shapes;
  for (TensorId branch : branches) shapes.push_back(shape(branch));
  return add_node(std::make_unique<ConcatLayer>(name, shapes), branches);
}

TensorId Network::add(TensorId main_path, TensorId shortcut, const std::string& name, bool relu) {
  return add_node(std::make_unique<ResidualAddLayer>(name, shape(main_path), shape(shortcut), relu),
                  {main_path, shortcut});
}

TensorId Network::fully_connected(TensorId x, const std::string& name, int outputs) {
  // The network input holds the run's activation type: under mixed precision, the GEMMs' type.
  return add_node(std::make_unique<FullyConnectedLayer>(layout_, name, shape(x), outputs, shape(input()).type), {x});
}

TensorId Network::find(const std::string& name) const {
  const auto it = node_by_name_.find(name);
  if (it == node_by_name_.end()) throw RuntimeError("Network: no node called '" + name + "'");
  return nodes_[it->second].output;
}

void Network::prepare_for_inference() {
  if (finalized_) throw RuntimeError("Network: prepare_for_inference() comes before finalize()");
  inference_only_ = true;
  fuse_normalised_joins();
}

void Network::fuse_normalised_joins() {
  const bool training = !inference_only_;
  // A batch norm without ReLU whose output only `reader` reads: it can run inside that reader.
  auto fusable_norm = [&](TensorId tensor, int reader) -> const BatchNormLayer* {
    const TensorInfo& info = tensors_[tensor];
    if (info.producer < 0 || info.consumers != std::vector<int>{reader}) return nullptr;
    // The join reads the norm's parameters, so both must sit in one unit (Note [network units]).
    if (nodes_[info.producer].block_first != nodes_[reader].block_first) return nullptr;
    const auto* norm = dynamic_cast<const BatchNormLayer*>(nodes_[info.producer].layer.get());
    return norm != nullptr && !norm->fused_relu() ? norm : nullptr;
  };
  // The reader takes the batch norm's input in place of its output.
  auto bypass = [&](Node& reader, int reader_index, size_t input) {
    Node& norm = nodes_[tensors_[reader.inputs[input]].producer];
    norm.fused_away = true;
    tensors_[reader.inputs[input]].consumers.clear();
    const TensorId source = norm.inputs[0];
    std::vector<int>& consumers = tensors_[source].consumers;
    std::replace(consumers.begin(), consumers.end(), tensors_[reader.inputs[input]].producer, reader_index);
    std::sort(consumers.begin(), consumers.end());
    reader.inputs[input] = source;
  };
  for (size_t index = 0; index < nodes_.size(); ++index) {
    Node& node = nodes_[index];
    const auto* add = dynamic_cast<const ResidualAddLayer*>(node.layer.get());
    if (add == nullptr) continue;
    const int reader = static_cast<int>(index);
    const BatchNormLayer* main_norm = fusable_norm(node.inputs[0], reader);
    if (main_norm == nullptr) continue;
    const TensorId main_source = nodes_[tensors_[node.inputs[0]].producer].inputs[0];
    // Training: the batch norm's backward needs a gradient buffer for its input, and the join's
    // two inputs must differ, as every node's do.
    if (training && (main_source == input() || main_source == node.inputs[1])) continue;
    // A fused shortcut norm's parameter gradients are computed here and announced where its own
    // node sits, later in backward: a little overlap lost, nothing early.
    const BatchNormLayer* shortcut_norm = fusable_norm(node.inputs[1], reader);
    if (shortcut_norm != nullptr) {
      const TensorId shortcut_source = nodes_[tensors_[node.inputs[1]].producer].inputs[0];
      // The source tensors must differ, as every node's inputs do; training needs a gradient
      // buffer for the shortcut's source and one epsilon for the pair.
      if (shortcut_source == main_source ||
          (training && (shortcut_source == input() || shortcut_norm->epsilon() != main_norm->epsilon())))
        shortcut_norm = nullptr;
    }
    auto fused = std::make_unique<NormalisedResidualAddLayer>(*add, *main_norm, shortcut_norm, training);
    bypass(node, reader, 0);
    if (shortcut_norm != nullptr) bypass(node, reader, 1);
    node.layer = std::move(fused);
  }
}

void Network::fuse_relu_into_max_pools() {
  for (size_t index = 0; index < nodes_.size(); ++index) {
    auto* pool = dynamic_cast<PoolingLayer*>(nodes_[index].layer.get());
    if (pool == nullptr || pool->geometry().mode != PoolMode::max) continue;
    const TensorInfo& input = tensors_[nodes_[index].inputs[0]];
    if (input.producer < 0 || input.consumers != std::vector<int>{static_cast<int>(index)}) continue;
    Node& producer = nodes_[input.producer];
    auto* conv = dynamic_cast<Conv2dLayer*>(producer.layer.get());
    if (conv == nullptr || producer.fused_away || !conv->relu()) continue;
    pool->apply_input_relu_backward();
    conv->take_masked_output_gradient();
  }
}

void Network::fuse_batch_norm_statistics() {
  for (size_t index = 0; index < nodes_.size(); ++index) {
    const Node& node = nodes_[index];
    if (node.fused_away) continue;
    // The inputs a training batch norm normalises: a batch norm's one, a fused join's main path
    // and, with a shortcut norm, its shortcut.
    size_t normalised = 0;
    if (dynamic_cast<const BatchNormLayer*>(node.layer.get()) != nullptr) {
      normalised = 1;
    } else if (const auto* join = dynamic_cast<const NormalisedResidualAddLayer*>(node.layer.get())) {
      normalised = join->has_shortcut_norm() ? 2 : 1;
    }
    for (size_t i = 0; i < normalised; ++i) {
      TensorInfo& tensor = tensors_[node.inputs[i]];
      if (tensor.producer < 0) continue;
      Node& producer = nodes_[tensor.producer];
      auto* conv = dynamic_cast<Conv2dLayer*>(producer.layer.get());
      // The statistics must be of exactly what the batch norm reads: no bias or ReLU after the
      // convolution.
      if (conv == nullptr || producer.fused_away || conv->has_bias() || conv->relu()) continue;
      conv->make_output_statistics();
      tensor.statistics = true;
    }
  }
}

void Network::finalize(TensorId logits) {
  if (logits <= 0 || logits >= static_cast<TensorId>(tensors_.size()))
    throw RuntimeError("Network: the logits must be a node's output");
  logits_ = logits;
  if (!inference_only_) {
    fuse_normalised_joins();
    fuse_relu_into_max_pools();
    if (fuse_batch_norm_statistics_) fuse_batch_norm_statistics();
  }
  plan_buffers();
  plan_gradient_accumulation();
  recomputed_buffers_.assign(buffer_bytes_.size(), false);
  if (recompute_blocks_ && !inference_only_) plan_recomputation();
  plan_units();
  plan_live_spans();
  arena_ = plan_arena({});
  finalized_ = true;
}

void Network::plan_units() {
  // Runs in node order: a block's nodes, or consecutive nodes outside any block.
  struct Run {
    int first = 0, last = 0;
    size_t begin = std::numeric_limits<size_t>::max(), end = 0;  // its parameters' extents
  };
  std::vector<Run> runs;
  for (size_t index = 0; index < nodes_.size(); ++index) {
    const Node& node = nodes_[index];
    if (runs.empty() || node.block_first != nodes_[index - 1].block_first)
      runs.push_back(Run{static_cast<int>(index), static_cast<int>(index)});
    Run& run = runs.back();
    run.last = static_cast<int>(index);
    if (!node.layer->has_parameters()) continue;
    const GradientRange range = node.layer->gradient_range(layout_);
    run.begin = std::min(run.begin, range.offset);
    run.end = std::max(run.end, range.end());
  }
  int with_parameters = 0;
  for (const Run& run : runs) with_parameters += run.end > 0 ? 1 : 0;
  units_.clear();
  node_units_.assign(nodes_.size(), -1);
  int seen = 0;
  for (const Run& run : runs) {
    if (run.end == 0) continue;
    // The layout holds the last run first.
    const int unit = with_parameters - 1 - seen++;
    for (int index = run.first; index <= run.last; ++index) node_units_[static_cast<size_t>(index)] = unit;
    const Node& first = nodes_[static_cast<size_t>(run.first)];
    const bool starts = run.first == 0, ends = static_cast<size_t>(run.last) + 1 == nodes_.size();
    std::string name = first.group;
    if (first.block_first < 0 && (starts || ends)) name = starts && ends ? "model" : starts ? "stem" : "classifier";
    units_.push_back(ParameterUnit{name, GradientRange{run.begin, run.end - run.begin}});
  }
  std::reverse(units_.begin(), units_.end());
}

ParameterUnits Network::parameter_units() const {
  // A network sharing its layout with tensors of no node (a test's) cannot be cut.
  size_t expected = 0;
  for (const ParameterUnit& unit : units_) {
    if (unit.range.offset != expected)
      throw RuntimeError("Network: the parameters of '" + unit.name + "' are not one range after the next unit's");
    expected = unit.range.end();
  }
  if (expected != layout_.total_count())
    throw RuntimeError("Network: the layout holds parameters of no node, so it cannot be cut into units");
  ParameterUnits units;
  units.units = units_;
  const int count = static_cast<int>(units_.size());
  for (int u = count; u-- > 0;) units.uses.push_back(UnitUse{u, UnitPass::forward, false});
  for (int u = 0; u < count; ++u) units.uses.push_back(UnitUse{u, UnitPass::backward, true});
  return units;
}

void Network::plan_recomputation() {
  // A buffer is its block's alone when every tensor in it (in-place layers share one) is made by a
  // node of that block and read by nodes of that block only; anything else is kept.
  constexpr int kKept = -2, kUnseen = -1;
  std::vector<int> block_of(buffer_bytes_.size(), kUnseen);  // the block's first node
  for (TensorId t = 1; t < static_cast<TensorId>(tensors_.size()); ++t) {
    const TensorInfo& tensor = tensors_[t];
    if (tensor.value_buffer < 0) continue;
    const int block = nodes_[tensor.producer].block_first;
    bool alone = block >= 0 && t != logits_;
    for (int consumer : tensor.consumers) alone = alone && nodes_[consumer].block_first == block;
    int& owner = block_of[tensor.value_buffer];
    owner = !alone || (owner != kUnseen && owner != block) ? kKept : block;
  }
  for (size_t b = 0; b < buffer_bytes_.size(); ++b) recomputed_buffers_[b] = block_of[b] >= 0;
  for (Node& node : nodes_) {
    const int buffer = tensors_[node.output].value_buffer;
    node.recomputed = !node.fused_away && buffer >= 0 && recomputed_buffers_[static_cast<size_t>(buffer)];
  }
}

int Network::new_buffer(size_t bytes, MemoryTag tag) {
  buffer_bytes_.push_back(bytes);
  buffer_tags_.push_back(std::move(tag));
  return static_cast<int>(buffer_bytes_.size()) - 1;
}

void Network::plan_buffers() {
  tensors_[0].value_buffer = new_buffer(tensors_[0].shape.bytes(), MemoryTag{MemoryCategory::data, "input"});
  for (int index = 0; index < static_cast<int>(nodes_.size()); ++index) {
    Node& node = nodes_[static_cast<size_t>(index)];
    TensorInfo& out = tensors_[node.output];
    if (node.layer->can_run_in_place() && !node.inputs.empty()) {
      const TensorInfo& in = tensors_[node.inputs[0]];
      // Overwriting the input is safe when this node is its only reader, nothing needs the
      // input's values in backward (its producer does not read its output; this node reads only
      // its own output), and the input is not the data, which stays the same every step.
      node.in_place = node.inputs[0] != input() && in.consumers.size() == 1 &&
                      !nodes_[in.producer].layer->backward_reads_output();
    }
    if (node.in_place) {
      out.value_buffer = tensors_[node.inputs[0]].value_buffer;
      out.gradient_buffer = tensors_[node.inputs[0]].gradient_buffer;
    } else {
      // A node whose work a later one does produces nothing (prepare_for_inference).
      if (node.fused_away) continue;
      out.value_buffer = new_buffer(out.shape.bytes(), MemoryTag{MemoryCategory::activations, node.layer->name()});
      // The fused loss turns the logits into their gradient, so they share a buffer; inference
      // needs no other gradient.
      if (node.output == logits_)
        out.gradient_buffer = out.value_buffer;
      else if (!inference_only_ && (out.gradient_buffer = gradient_buffer_to_share(index)) < 0)
        out.gradient_buffer = new_buffer(out.shape.bytes(), MemoryTag{MemoryCategory::scratch, "activation gradients"});
    }
  }
  const Node& logits_producer = nodes_[tensors_[logits_].producer];
  if (logits_producer.in_place || logits_producer.layer->backward_reads_output())
    throw RuntimeError("Network: the logits must come from a layer whose output the loss may overwrite");
}

int Network::gradient_buffer_to_share(int index) const {
  // An input whose gradient backward may write over dy's (the last one that may): the output's
  // gradient is dead once this node's backward has read it, and that gradient's first writer is
  // this node, its last reader, so the two are never live together but at this node's backward.
  // ResNet's turn from forward to backward held three feature-map gradients; now two.
  const Node& node = nodes_[static_cast<size_t>(index)];
  for (size_t i = node.inputs.size(); i-- > 0;) {
    const TensorInfo& in = tensors_[node.inputs[i]];
    if (node.inputs[i] == input() || in.consumers.back() != index || in.gradient_buffer < 0 ||
        buffer_bytes_[static_cast<size_t>(in.gradient_buffer)] != tensors_[node.output].shape.bytes() ||
        !node.layer->input_gradient_may_overwrite_output_gradient(i))
      continue;
    return in.gradient_buffer;
  }
  return -1;
}

void Network::plan_gradient_accumulation() {
  scratch_bytes_ = 0;
  for (size_t index = 0; index < nodes_.size(); ++index) {
    Node& node = nodes_[index];
    node.scratch_offset.assign(node.inputs.size(), -1);
    node.accumulate.assign(node.inputs.size(), false);
    if (inference_only_ || node.fused_away) continue;  // no backward
    size_t offset = 0;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorInfo& in = tensors_[node.inputs[i]];
      const bool last_reader = in.consumers.back() == static_cast<int>(index);
      if (node.inputs[i] == input() || last_reader) continue;
      if (node.layer->can_accumulate_input_gradient()) {
        node.accumulate[i] = true;
        continue;
      }
      node.scratch_offset[i] = static_cast<long long>(offset);
      offset += in.shape.bytes();
    }
    if (offset > 0) node.scratch_buffer = new_buffer(offset, MemoryTag{MemoryCategory::scratch, "gradient sums"});
    scratch_bytes_ = std::max(scratch_bytes_, offset);
  }
}

StepFlops Network::flops() const {
  StepFlops total;
  for (const Node& node : nodes_) {
    if (node.fused_away) continue;
    const bool input_gradient = std::any_of(node.inputs.begin(), node.inputs.end(),
                                            [&](TensorId in) { return in != input(); });
    const StepFlops flops = node.layer->flops(input_gradient);
    total += flops;
    if (node.recomputed) total.recompute += flops.forward;
  }
  return total;
}

void Network::initialize(uint64_t seed, std::vector<float>& host_params) const {
  for (const Node& node : nodes_) node.layer->initialize(layout_, seed, host_params);
}

// ---- NetworkReplica -------------------------------------------------------------------------

NetworkReplica::NetworkReplica(const Network& network, Device& device, ParameterSet& params,
                               const ReplicaShard& shard, bool training)
    : network_(network), device_(device), params_(params) {
  Backend& ops = device.ops();
  std::vector<size_t> workspace_bytes;
  for (const Network::Node& node : network.nodes()) {
    states_.push_back(node.layer->create_state(device, shard));
    workspace_bytes.push_back(node.layer->workspace_bytes(ops));
  }
  // A convolution that adds its input gradient to another's decides how now, while no activation
  // is held: its first call would time that on scratch beside the whole arena (Note [search
  // memory] in engine/cuda/device_memory.h).
  if (training)
    for (size_t index = 0; index < network.nodes().size(); ++index) {
      const Network::Node& node = network.nodes()[index];
      const auto* conv = dynamic_cast<const Conv2dLayer*>(node.layer.get());
      if (conv != nullptr && !node.accumulate.empty() && node.accumulate.front())
        ops.prepare_conv2d_backward_data_accumulate(conv->geometry(), workspace_bytes[index]);
    }
  allocate_arena(workspace_bytes);

  const std::vector<Network::Node>& nodes = network.nodes();
  // The convolutions sized their workspace above, which is where the backend decided, per shape,
  // whether it fuses their batch norms' statistics.
  if (training) {
    for (const Network::Node& node : nodes) {
      const auto* conv = dynamic_cast<const Conv2dLayer*>(node.layer.get());
      if (conv == nullptr || !network.has_statistics(node.output) ||
          !ops.conv2d_forward_statistics_fused(conv->geometry()))
        continue;
      const size_t sums = 2 * static_cast<size_t>(conv->geometry().output.c);  // sums, then sums of squares
      const MemoryTag kept{MemoryCategory::activations, node.layer->name()};
      statistics_.emplace(node.output, device.allocate(sizeof(float) * sums, kept));
    }
  }
  auto statistics_of = [&](TensorId tensor) { return const_cast<float*>(statistics(tensor)); };
  for (size_t index = 0; index < nodes.size(); ++index) {
    const Network::Node& node = nodes[index];
    LayerPass pass;
    pass.ops = &ops;
    pass.params = &params;
    pass.y = values(node.output);
    pass.dy = gradients(node.output);
    pass.y_statistics = statistics_of(node.output);
    pass.state = states_[index].get();
    // Its own workspace, in the arena while its passes run.
    const long long workspace = plan_.workspace_offsets[index];
    pass.workspace = workspace < 0 ? nullptr : arena_.as<char>() + workspace;
    pass.workspace_bytes = workspace < 0 ? 0 : workspace_bytes[index];
    pass.training = training;
    pass.accumulate_dx = node.accumulate;
    std::vector<Accumulation> accumulations;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorId in = node.inputs[i];
      pass.x.push_back(values(in));
      pass.x_statistics.push_back(statistics_of(in));
      if (node.scratch_offset[i] < 0) {
        pass.dx.push_back(gradients(in));
      } else {
        void* scratch = static_cast<char*>(address(node.scratch_buffer)) + node.scratch_offset[i];
        pass.dx.push_back(scratch);
        accumulations.push_back({scratch, gradients(in), network.shape(in)});
      }
    }
    passes_.push_back(std::move(pass));
    accumulations_.push_back(std::move(accumulations));
  }
}

void NetworkReplica::allocate_arena(const std::vector<size_t>& workspace_bytes) {
  plan_ = network_.plan_arena(workspace_bytes);
  for (size_t b = 0; b < network_.buffer_bytes().size(); ++b)
    buffers_.push_back(plan_.offsets[b] >= 0 ? Buffer()
                                             : device_.allocate(network_.buffer_bytes()[b], network_.buffer_tags()[b]));
  // Recorded as what it holds at the step's busiest moment (Note [one arena for activations and
  // their gradients]): allocated (and checked against the device's limit) whole, then its entry
  // taken off and replaced by the shares, so the ledger never counts it twice.
  const MemoryTag activations{MemoryCategory::activations, "network"};
  arena_ = device_.allocate(plan_.bytes, activations);
  auto busiest = [&](MemoryCategory category) { return plan_.busiest[static_cast<size_t>(category)]; };
  const std::pair<MemoryTag, size_t> others[] = {
      {MemoryTag{MemoryCategory::scratch, "activation gradients"}, busiest(MemoryCategory::scratch)},
      {MemoryTag{MemoryCategory::workspaces, "network"}, busiest(MemoryCategory::workspaces)}};
  if (busiest(MemoryCategory::scratch) + busiest(MemoryCategory::workspaces) == 0) return;
  arena_.account(LedgerEntry());
  size_t rest = plan_.bytes;
  for (const auto& [tag, bytes] : others) {
    if (bytes == 0 || bytes > rest) continue;
    arena_shares_.push_back(device_.memory().record(tag, MemoryPlace::device, bytes));
    rest -= bytes;
  }
  arena_.account(device_.memory().record(activations, MemoryPlace::device, rest));
}

void* NetworkReplica::address(int buffer) const {
  const long long offset = plan_.offsets.at(static_cast<size_t>(buffer));
  return offset >= 0 ? arena_.as<char>() + offset : buffers_.at(buffer).data();
}

void* NetworkReplica::values(TensorId tensor) const {
  const int buffer = network_.value_buffer(tensor);
  return buffer < 0 ? nullptr : address(buffer);  // none: a node fused away
}

const float* NetworkReplica::statistics(TensorId tensor) const {
  const auto found = statistics_.find(tensor);
  return found == statistics_.end() ? nullptr : found->second.as<float>();
}

void* NetworkReplica::gradients(TensorId tensor) const {
  const int buffer = network_.gradient_buffer(tensor);
  return buffer < 0 ? nullptr : address(buffer);
}

namespace {

// The spans of a pass over the nodes, one per run of nodes of one group, each beginning where the
// previous ends (one stamp per boundary, engine/backend/step_trace.h); in backward, a recomputed
// block's forward is a span of its own before its backward ("recompute").
class GroupSpans {
 public:
  GroupSpans(Device& device, const char* category) : trace_(device.trace()), category_(category) {}
  ~GroupSpans() {
    if (open_) trace_.end(span_);
  }
  void enter(const std::string& group) { enter(group, category_); }
  void enter(const std::string& group, const char* category) {
    if (!trace_.annotating() || (open_ && *open_ == group && open_category_ == category)) return;
    span_ = open_ ? trace_.next(span_, group, category) : trace_.begin(StreamKind::compute, group, category);
    open_ = &group;
    open_category_ = category;
  }

 private:
  StepTrace& trace_;
  const char* category_;
  StepTrace::Span span_;
  const std::string* open_ = nullptr;  // the group of the open span
  const char* open_category_ = nullptr;
};

// The use of a unit a pass is in (Note [network units]): a node of another unit ends it and
// begins its own; a node of none just ends it. Ended explicitly by close(), so an exception
// thrown inside a pass does not call the hooks again while it unwinds.
class UnitBrackets {
 public:
  UnitBrackets(UnitHooks* hooks, UnitPass pass) : hooks_(hooks), pass_(pass) {}
  void enter(int unit) {
    if (hooks_ == nullptr || unit == open_) return;
    close();
    if (unit >= 0) hooks_->before_unit(unit, pass_);
    open_ = unit;
  }
  void close() {
    if (hooks_ != nullptr && open_ >= 0) hooks_->after_unit(open_, pass_);
    open_ = -1;
  }

 private:
  UnitHooks* hooks_;
  UnitPass pass_;
  int open_ = -1;
};

}  // namespace

void NetworkReplica::forward(const int32_t* step, UnitHooks* units) {
  const std::vector<Network::Node>& nodes = network_.nodes();
  GroupSpans spans(device_, "forward");
  UnitBrackets brackets(units, UnitPass::forward);
  for (size_t index = 0; index < nodes.size(); ++index) {
    if (nodes[index].fused_away) continue;
    brackets.enter(network_.unit_of_node(static_cast<int>(index)));
    spans.enter(nodes[index].group);
    nodes[index].layer->forward(passes_[index], step);
  }
  brackets.close();
}

void NetworkReplica::backward(const int32_t* step, GradientAnnouncer& announcer) {
  const std::vector<Network::Node>& nodes = network_.nodes();
  Backend& ops = device_.ops();
  GroupSpans spans(device_, "backward");
  // A block's unit is at hand for its recomputation as for its backward.
  UnitBrackets brackets(announcer.unit_hooks(), UnitPass::backward);
  for (size_t index = nodes.size(); index-- > 0;) {
    const Layer& layer = *nodes[index].layer;
    brackets.enter(network_.unit_of_node(static_cast<int>(index)));
    const int block = nodes[index].block_first;
    const bool block_ends = block >= 0 && (index + 1 == nodes.size() || nodes[index + 1].block_first != block);
    if (block_ends && network_.recomputes_blocks()) {
      // Its outputs not kept from forward, made again: the same forward, on its kept input (timed
      // apart from the backward around it in a timed step).
      device_.trace().lap(StepPart::backward);
      spans.enter(nodes[index].group, "recompute");
      for (size_t j = static_cast<size_t>(block); j <= index; ++j)
        if (nodes[j].recomputed) nodes[j].layer->forward(passes_[j], step);
      device_.trace().lap(StepPart::recompute);
    }
    spans.enter(nodes[index].group);
    // A node fused into a later one had its backward run there; its parameters' gradients are
    // final now, and announced here, in node order, as always.
    if (!nodes[index].fused_away) layer.backward(passes_[index], step);
    for (const Accumulation& a : accumulations_[index])
      ops.add_tensors(a.shape.type, a.scratch, a.gradient, a.gradient, a.shape.count(), false);
    if (layer.has_parameters()) announcer.announce(layer.gradient_range(params_.layout()));
  }
  brackets.close();
}

}  // namespace dpbench
