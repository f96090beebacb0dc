// Network: a CNN as a graph of layers, shared by all replicas, and NetworkReplica, its buffers
// and passes on one device.
//
// A model builds the graph in forward order: each call adds one node (a Layer) that reads earlier
// tensors and produces one new tensor, so skip connections (add) and branches (concat) are just
// nodes with several inputs. finalize() then plans, once for all replicas:
// - buffers: every tensor gets an activation buffer and a gradient buffer, except that in-place
//   layers (ReLU, residual add) reuse their first input's buffers where nothing else reads that
//   input, and the logits' gradient reuses the logits (the fused loss overwrites them);
// - memory: the buffers (the input batch's aside) live in one arena at offsets fixed before the
//   first step, and buffers never live at the same moment of a step share bytes: a gradient
//   takes the place of activations backward has passed (Note [one arena for activations and
//   their gradients] in network_arena.cpp);
// - gradient accumulation: a tensor read by several nodes receives its gradient from each of them.
//   Backward runs nodes in reverse, so the last reader in forward order writes the gradient
//   directly and every earlier reader adds to it: itself where the layer can (a convolution's
//   backward-data with beta = 1), else through a scratch buffer and an addition.
// Parameters are declared in node order, so a node's tensors form one contiguous gradient range,
// and ranges become ready in ascending offset order as backward walks the nodes in reverse.
// Note [network units]: the parameter units (engine/training/model.h) are the trace's blocks: each
// run of nodes of one set_group block is a unit, and so is each run of nodes outside any block
// that has parameters (the stem before the first block, the classifier after the last). Since
// nodes declare their parameters in node order, a run's tensors are one contiguous range and the
// runs tile the layout, the last run first; forward uses each once in node order, backward again
// in reverse (recomputing a block inside its backward use).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/training/model.h"
#include "models/layers/conv2d.h"
#include "models/layers/layer.h"
#include "models/layers/pooling.h"

namespace dpbench {

using TensorId = int;

class Network {
 public:
  // The network input is tensor 0; it needs no gradient.
  Network(ParameterLayout& layout, const Tensor4& input_shape);

  TensorId input() const { return 0; }
  DataFormat format() const { return tensors_.front().shape.format; }
  const Tensor4& shape(TensorId tensor) const { return tensors_.at(tensor).shape; }
  ParameterLayout& layout() { return layout_; }

  // ---- building, in forward order; `name` names the node (unique) and prefixes its parameters
  TensorId conv(TensorId x, const std::string& name, const Conv2dOptions& options);
  // With `relu`, the ReLU that follows is fused in: max(0, bn(x)) in one node.
  TensorId batch_norm(TensorId x, const std::string& name, float epsilon, bool relu = false);
  TensorId relu(TensorId x, const std::string& name);
  TensorId pool(TensorId x, const std::string& name, const PoolOptions& options);
  TensorId global_average_pool(TensorId x, const std::string& name);  // (n, c, h, w) -> (n, c, 1, 1)
  TensorId dropout(TensorId x, const std::string& name, float rate);
  TensorId concat(const std::vector<TensorId>& branches, const std::string& name);
  // Puts the result over `main_path` where it can, so pass the single-use operand there.
  // With `relu` the sum goes through a ReLU in the same pass.
  TensorId add(TensorId main_path, TensorId shortcut, const std::string& name, bool relu = false);
  // Its GEMMs run in the run's activation type (the input's): 16-bit under mixed precision.
  TensorId fully_connected(TensorId x, const std::string& name, int outputs);
  // Any layer; it must already have declared its parameters (in forward order).
  TensorId add_node(std::unique_ptr<Layer> layer, const std::vector<TensorId>& inputs);
  // The nodes added from now on form one block, `name`: one span in a trace's forward and backward
  // passes (a ResNet block, an Inception module), and what set_recompute_blocks recomputes; empty:
  // each node is a span of its own, and no block.
  void set_group(const std::string& name) { group_ = name; }
  // Training, before finalize (--activation_checkpointing=blocks): the outputs a block's nodes
  // make that only its own nodes read are not kept from forward (their memory is free for what
  // follows), and each block's backward first runs those nodes' forward again. A block keeps its
  // input, its output and its layers' statistics.
  void set_recompute_blocks(bool recompute) { recompute_blocks_ = recompute; }
  // Before finalize, for tests: false gives every buffer bytes of its own in the arena, so a
  // step's results can be compared with those of the plan where buffers share memory.
  void set_share_memory(bool share) { share_memory_ = share; }
  bool recomputes_blocks() const { return recompute_blocks_; }

  // Inference only (--forward_only), after building and before finalize: the network will run
  // forward passes only, so no tensor gets a gradient buffer, and a residual add fed by batch
  // norms without ReLU (read by nothing else) applies them in its own pass
  // (models/layers/normalised_residual_add.h): those batch-norm nodes no longer run.
  void prepare_for_inference();

  // Training, before finalize: whether a batch norm reading a convolution's output (a convolution
  // without bias or ReLU) may take its statistics from that convolution's forward, where the
  // backend fuses them into it (Backend::conv2d_forward_statistics_fused; --fuse_batch_norm_statistics).
  // Off by default (ModelSettings::fuse_batch_norm_statistics says why); the replicas ask the
  // backend per shape.
  void set_fuse_batch_norm_statistics(bool fuse) { fuse_batch_norm_statistics_ = fuse; }

  // Ends building: `logits` (n, classes, 1, 1) is what the loss reads. For training, a residual
  // add whose main path (and perhaps shortcut) is a batch norm without ReLU (read by nothing
  // else) runs those batch norms in its own pass, forward and backward, as prepare_for_inference
  // does. Plans buffers and gradients.
  void finalize(TensorId logits);

  // ---- queries
  // The units of Note [network units] and one training step's uses of them (after finalize).
  ParameterUnits parameter_units() const;
  // The unit node `node` runs in; -1: none (a run of nodes without parameters).
  int unit_of_node(int node) const { return node_units_.at(static_cast<size_t>(node)); }

  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<TensorId> inputs;
    TensorId output = -1;
    bool in_place = false;  // output (and dx[0]) share input 0's buffers
    // Per input: its gradient goes straight into the tensor's gradient buffer (the last reader),
    // is added there by the layer itself (accumulate), or goes through scratch_buffer at this
    // offset (in bytes) and is then added; -1 = no scratch.
    std::vector<long long> scratch_offset;
    int scratch_buffer = -1;  // the node's buffer for those input gradients; -1: none
    std::vector<bool> accumulate;
    bool fused_away = false;  // a later node does this one's work (fuse_normalised_joins)
    std::string group;        // its span in a trace: the group set when it was added, or its own name
    int block_first = -1;     // the first node of its block (set_group's); -1: in none
    bool recomputed = false;  // its output is not kept from forward: backward runs it again
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  // The output of the node called `name`; throws when there is none.
  TensorId find(const std::string& name) const;
  TensorId logits() const { return logits_; }
  // Buffer ids (into buffer_bytes()) of a tensor's values and gradient (-1: none).
  int value_buffer(TensorId tensor) const { return tensors_.at(tensor).value_buffer; }
  int gradient_buffer(TensorId tensor) const { return tensors_.at(tensor).gradient_buffer; }
  const std::vector<size_t>& buffer_bytes() const { return buffer_bytes_; }
  // What each buffer holds and whose it is: the input batch (data), a node's output (activations,
  // owned by the node's layer), its gradient or a node's gradient sums (scratch: needed only
  // while backward passes them). The ledger records the arena by what it holds at its busiest
  // moment (NetworkReplica).
  const std::vector<MemoryTag>& buffer_tags() const { return buffer_tags_; }
  // When a buffer is live, in step moments (Note [one arena for activations and their gradients]):
  // one span from its first write to its last read, or under set_recompute_blocks two for a
  // buffer its block makes again (forward, then from the recomputation on).
  struct LiveSpan {
    int first = 0, last = 0;  // inclusive
  };
  const std::vector<LiveSpan>& live_spans(int buffer) const { return live_spans_.at(buffer); }
  // When a node's workspace is live: while its passes run (forward; backward and a recomputed
  // forward in training). Empty for a node fused away.
  std::vector<LiveSpan> workspace_spans(int node) const;
  // Where the buffers (and the nodes' workspaces) sit in the arena.
  struct ArenaPlan {
    std::vector<long long> offsets;            // per buffer; -1: allocated alone (the input batch)
    std::vector<long long> workspace_offsets;  // per node; -1: none
    size_t bytes = 0;
    // The most bytes live at one moment of the step (aligned as placed): no arena is smaller.
    // And how they divide between categories then: activations, scratch (activation gradients,
    // gradient sums), workspaces.
    size_t busiest_bytes = 0;
    CategoryBytes busiest{};
  };
  // The plan with each node's workspace in the arena too: `workspace_bytes` per node (what its
  // largest pass needs, Layer::workspace_bytes; the replica asks its backend).
  ArenaPlan plan_arena(const std::vector<size_t>& workspace_bytes) const;
  // The plan of the buffers alone, made at finalize (the replica's adds the workspaces).
  const ArenaPlan& arena() const { return arena_; }
  // Bytes of scratch for input gradients that are computed apart and then added: the most one
  // node needs (0: none).
  size_t scratch_bytes() const { return scratch_bytes_; }
  // Whether a tensor's producer may make batch norm's statistics for its reader
  // (set_fuse_batch_norm_statistics).
  bool has_statistics(TensorId tensor) const { return tensors_.at(tensor).statistics; }

  void initialize(uint64_t seed, std::vector<float>& host_params) const;
  // FLOPs of the nodes that run, over the whole batch; no input gradient for the network input.
  StepFlops flops() const;

 private:
  struct TensorInfo {
    Tensor4 shape;
    int producer = -1;            // node index; -1 for the input
    std::vector<int> consumers;   // node indices, ascending
    int value_buffer = -1, gradient_buffer = -1;
    bool statistics = false;  // made by its producer (a convolution) for a batch norm reading it
  };
  TensorId make_tensor(const Tensor4& shape, int producer);
  // Puts NormalisedResidualAddLayer in place of the residual adds it can take over (for inference
  // or training, as inference_only_ says).
  void fuse_normalised_joins();
  // Training: a max pool whose input only it reads, made by a convolution with a fused ReLU,
  // applies that ReLU's backward in its own pass (PoolGeometry::relu_input), and the convolution
  // takes its output gradient as already masked: one pass over the pool's input fewer each step.
  void fuse_relu_into_max_pools();
  // Training: marks the convolutions whose output a batch norm reads (itself, or inside a fused
  // join) to make that batch norm's statistics (Conv2dLayer::make_output_statistics).
  void fuse_batch_norm_statistics();
  int new_buffer(size_t bytes, MemoryTag tag);
  void plan_buffers();
  void plan_gradient_accumulation();
  // set_recompute_blocks: which buffers only their block reads (made again in its backward).
  void plan_recomputation();
  // Note [network units]: cuts the nodes into runs and gives those with parameters a unit.
  void plan_units();
  // When each buffer is live, then where it sits in the arena
  // (Note [one arena for activations and their gradients]).
  void plan_live_spans();
  // The gradient buffer of an input of node `index` that its output's gradient may share, or -1.
  int gradient_buffer_to_share(int index) const;
  size_t block_last(size_t node) const;  // the last node of its block

  ParameterLayout& layout_;
  std::vector<TensorInfo> tensors_;
  std::vector<Node> nodes_;
  std::map<std::string, int> node_by_name_;
  TensorId logits_ = -1;
  std::vector<size_t> buffer_bytes_;
  std::vector<MemoryTag> buffer_tags_;
  std::vector<bool> recomputed_buffers_;  // per buffer, under recomputation
  std::vector<std::vector<LiveSpan>> live_spans_;
  ArenaPlan arena_;
  size_t scratch_bytes_ = 0;
  bool finalized_ = false;
  bool inference_only_ = false;
  bool fuse_batch_norm_statistics_ = false;
  bool recompute_blocks_ = false;
  bool share_memory_ = true;
  std::string group_;  // set_group's
  std::vector<ParameterUnit> units_;  // in layout order
  std::vector<int> node_units_;       // per node
};

// One replica's activations, activation gradients, layer states and workspace, all allocated
// here once; forward and backward only enqueue ops.
class NetworkReplica {
 public:
  // `training` false: inference passes (LayerPass::training), forward only.
  NetworkReplica(const Network& network, Device& device, ParameterSet& params,
                 const ReplicaShard& shard, bool training = true);

  // A tensor's buffers hold its shape's type, and its values only while it is live
  // (Network::live_spans): after forward, those backward reads and the logits.
  void* values(TensorId tensor) const;     // nullptr for the output of a node fused away
  void* gradients(TensorId tensor) const;  // nullptr for the input, and in inference
  // Batch norm's statistics of a tensor as its producing convolution made them (2 * channels
  // fp32: sums, then sums of squares); nullptr where the backend does not fuse them for it.
  const float* statistics(TensorId tensor) const;

  // Every node in order; the logits end up in values(logits()). `units`: the hooks each unit's
  // use is bracketed with (Note [network units]); nullptr: none.
  void forward(const int32_t* step, UnitHooks* units = nullptr);
  // The address of buffer `buffer`: its place in the arena, or its own.
  void* address(int buffer) const;
  // Expects d(loss)/d(logits) in gradients(logits()); fills the parameter gradients and announces
  // each node's range as soon as it is final; brackets each unit's use with the announcer's hooks.
  void backward(const int32_t* step, GradientAnnouncer& announcer);

 private:
  // The arena with this replica's workspaces (Network::plan_arena), and its ledger shares.
  void allocate_arena(const std::vector<size_t>& workspace_bytes);
  struct Accumulation {
    const void* scratch;
    void* gradient;
    Tensor4 shape;
  };
  const Network& network_;
  Device& device_;
  const ParameterSet& params_;
  std::vector<Buffer> buffers_;  // none for the buffers in the arena
  Network::ArenaPlan plan_;  // with this replica's workspaces
  Buffer arena_;
  std::vector<LedgerEntry> arena_shares_;  // the arena's bytes recorded in other categories
  std::map<TensorId, Buffer> statistics_;  // per tensor whose producer fuses batch norm's statistics
  std::vector<std::unique_ptr<LayerState>> states_;
  std::vector<LayerPass> passes_;                       // per node
  std::vector<std::vector<Accumulation>> accumulations_;  // per node, after its backward
};

}  // namespace dpbench
