// Network: a CNN as a graph of layers, shared by all replicas, and NetworkReplica, its buffers
// and passes on one device.
//
// A model builds the graph in forward order: each call adds one node (a Layer) that reads earlier
// tensors and produces one new tensor, so skip connections (add) and branches (concat) are just
// nodes with several inputs. finalize() then plans, once for all replicas:
// - buffers: every tensor gets an activation buffer and a gradient buffer, except that in-place
//   layers (ReLU, residual add) reuse their first input's buffers where nothing else reads that
//   input, and the logits' gradient reuses the logits (the fused loss overwrites them); gradients
//   never live at once share buffers (Note [pooled activation gradients] in network.cpp);
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
  // make that only its own nodes read share one set of buffers with every other block's (laid out
  // per block from the same start), and each block's backward first runs those nodes' forward
  // again. A block keeps its input, its output and its layers' statistics.
  void set_recompute_blocks(bool recompute) { recompute_blocks_ = recompute; }
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
    // is added there by the layer itself (accumulate), or goes through scratch at this offset (in
    // bytes) and is then added; -1 = no scratch.
    std::vector<long long> scratch_offset;
    std::vector<bool> accumulate;
    bool fused_away = false;  // a later node does this one's work (fuse_normalised_joins)
    std::string group;        // its span in a trace: the group set when it was added, or its own name
    int block_first = -1;     // the first node of its block (set_group's); -1: in none
    bool recomputed = false;  // its output lives in the blocks' shared set: backward runs it again
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
  // owned by the node's layer) or its gradient (scratch: needed only while backward passes it).
  const std::vector<MemoryTag>& buffer_tags() const { return buffer_tags_; }
  // Under set_recompute_blocks: the offset of a buffer in the blocks' shared set, -1 for a buffer
  // of its own; and the set's bytes (0: none).
  long long shared_offset(int buffer) const { return shared_offsets_.empty() ? -1 : shared_offsets_.at(buffer); }
  size_t shared_bytes() const { return shared_bytes_; }
  // Bytes of scratch for input gradients that are computed apart and then added (0: none).
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
  void plan_buffers();
  // Gives each gradient group (a tensor's, shared by in-place nodes) a buffer it shares with
  // groups that are never live together (Note [pooled activation gradients]).
  void plan_gradient_buffers(const std::vector<int>& gradient_group, int groups);
  void plan_gradient_accumulation();
  // set_recompute_blocks: which buffers only their block reads, and where they sit in the set.
  void plan_recomputation();
  // Note [network units]: cuts the nodes into runs and gives those with parameters a unit.
  void plan_units();

  ParameterLayout& layout_;
  std::vector<TensorInfo> tensors_;
  std::vector<Node> nodes_;
  std::map<std::string, int> node_by_name_;
  TensorId logits_ = -1;
  std::vector<size_t> buffer_bytes_;
  std::vector<MemoryTag> buffer_tags_;
  size_t scratch_bytes_ = 0;
  bool finalized_ = false;
  bool inference_only_ = false;
  bool fuse_batch_norm_statistics_ = false;
  bool recompute_blocks_ = false;
  std::vector<long long> shared_offsets_;  // per buffer, under recomputation
  size_t shared_bytes_ = 0;
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

  // A tensor's buffers hold its shape's type.
  void* values(TensorId tensor) const;     // nullptr for the output of a node fused away
  void* gradients(TensorId tensor) const;  // nullptr for the input, and in inference
  // Batch norm's statistics of a tensor as its producing convolution made them (2 * channels
  // fp32: sums, then sums of squares); nullptr where the backend does not fuse them for it.
  const float* statistics(TensorId tensor) const;

  // Every node in order; the logits end up in values(logits()). `units`: the hooks each unit's
  // use is bracketed with (Note [network units]); nullptr: none.
  void forward(const int32_t* step, UnitHooks* units = nullptr);
  // The address of buffer `buffer`: its own, or its place in the shared set.
  void* address(int buffer) const;
  // Expects d(loss)/d(logits) in gradients(logits()); fills the parameter gradients and announces
  // each node's range as soon as it is final; brackets each unit's use with the announcer's hooks.
  void backward(const int32_t* step, GradientAnnouncer& announcer);

 private:
  struct Accumulation {
    const void* scratch;
    void* gradient;
    Tensor4 shape;
  };
  const Network& network_;
  Device& device_;
  const ParameterSet& params_;
  std::vector<Buffer> buffers_;  // none for the buffers in the shared set
  Buffer shared_;                // the blocks' shared set (set_recompute_blocks)
  Buffer workspace_;
  Buffer scratch_;
  std::map<TensorId, Buffer> statistics_;  // per tensor whose producer fuses batch norm's statistics
  std::vector<std::unique_ptr<LayerState>> states_;
  std::vector<LayerPass> passes_;                       // per node
  std::vector<std::vector<Accumulation>> accumulations_;  // per node, after its backward
};

}  // namespace dpbench
