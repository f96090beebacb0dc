// The Transformer's layers ("Attention Is All You Need", post-norm, as nn.Transformer builds
// them): an encoder layer (self-attention, feed-forward) and a decoder layer (causal
// self-attention, cross-attention over the encoder's output, feed-forward), each sub-layer
//   x <- LayerNorm(x + Dropout(Sublayer(x)))
// with nn.Transformer's dropouts (attention probabilities, the feed-forward block's inner ReLU,
// every sub-layer's output) at one rate. Activations are sequence-major (T, B, d), as the LSTMs'.
//
// The layer objects declare parameters and initialise them; their replicas hold the activations
// a backward pass needs and run both passes. Under mixed precision the activations and the
// matrices the GEMMs read are 16-bit, layer norms' scales and all biases fp32, gradients fp32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/attention_geometry.h"
#include "engine/backend/device.h"
#include "engine/training/model.h"
#include "engine/training/parameter_set.h"
#include "models/sequence/block_activations.h"

namespace dpbench {

struct TransformerShape {
  int model_dim = 512;   // d
  int heads = 8;
  int ffn_units = 2048;
  float dropout = 0.1f;
  float norm_epsilon = 1e-5f;  // nn.LayerNorm's
  DataType type = DataType::f32;
  int head_dim() const { return model_dim / heads; }
};

// y = x W^T + b: "<name>/weights" (out, in), "<name>/bias" (out).
class LinearParams {
 public:
  LinearParams(ParameterLayout& layout, const std::string& name, int in, int out);
  const std::string& name() const { return name_; }
  // The name of the sub-layer it belongs to ("decoder/layer_0/self_attention" of ".../output"):
  // who holds the sub-layer's buffers in the device's memory ledger.
  std::string sublayer() const { return name_.substr(0, name_.rfind('/')); }
  int in() const { return in_; }
  int out() const { return out_; }
  int first_id() const { return weights_id_; }
  int last_id() const { return bias_id_; }
  // Xavier-uniform weights (as nn.Transformer resets every matrix), zero bias.
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const;
  // y (rows, out) = x (rows, in) W^T + b, then what `then` adds in the bias's pass (ReLU,
  // dropout, a residual, GELU: Backend::add_row_bias), as one Backend::linear_forward.
  void forward(Backend& ops, const ParameterSet& params, DataType type, const void* x, int rows, void* y,
               const RowBiasEpilogue& then = {}) const;
  // From dy (rows, out): the weight and bias gradients (overwritten; the bias's only with
  // `bias_gradient`) and, where dx is given, dx (rows, in) = dy W, added to what dx holds with
  // `accumulate`; with `gelu` (x was GELU(gelu.input)), u's gradient and its layer's bias
  // gradient instead (Backend::linear_backward).
  void backward(Backend& ops, const ParameterSet& params, DataType type, const void* x, const void* dy, int rows,
                void* dx, bool accumulate, const GeluInputGradient& gelu = {}, bool bias_gradient = true) const;
  float* bias_gradient(const ParameterSet& params) const { return params.gradient(bias_id_); }

 private:
  std::string name_;
  int in_, out_, weights_id_, bias_id_;
};

// "<name>/gamma" and "<name>/beta" (d): ones and zeros.
class LayerNormParams {
 public:
  LayerNormParams(ParameterLayout& layout, const std::string& name, int dim);
  const std::string& name() const { return name_; }
  int first_id() const { return gamma_id_; }
  int last_id() const { return beta_id_; }
  void initialize(const ParameterLayout& layout, std::vector<float>& values) const;
  int gamma_id() const { return gamma_id_; }
  int beta_id() const { return beta_id_; }
  int dim() const { return dim_; }

 private:
  std::string name_;
  int dim_, gamma_id_, beta_id_;
};

// One application of a LayerNormParams to `rows` rows: keeps its input and statistics.
class LayerNormPass {
 public:
  LayerNormPass(const LayerNormParams& norm, Device& device, int rows, DataType type, float epsilon);
  // y = LayerNorm(x); x must stay untouched until backward.
  void forward(const ParameterSet& params, const void* x, void* y);
  // dx from dy (may alias), the scale's and shift's gradients overwritten; with `accumulate`,
  // dx (apart from dy) gets the gradient added (Backend::layer_norm_backward).
  void backward(const ParameterSet& params, const void* x, const void* dy, void* dx, bool accumulate = false);

 private:
  const LayerNormParams& norm_;
  Device& device_;
  int rows_;
  DataType type_;
  float epsilon_;
  Buffer mean_, inv_std_, workspace_;
};

// What a layer needs to know of the step: the sentences' source lengths (device memory, B
// values; nullptr: every source token real), the step counter (dropout masks) and where the
// replica's sentences sit in the global batch.
struct TransformerStep {
  const int32_t* source_lengths = nullptr;
  const int32_t* step = nullptr;
  bool training = true;  // false: inference, no dropout
};

// One dropout site of a layer on one replica. The masks are placed by the replica's first
// sentence times the buffer's elements per sentence: replicas draw disjoint masks, but a
// sentence's mask depends on the per-replica batch (the buffers are sequence-major), unlike the
// image models' dropout.
struct DropoutSite {
  uint64_t seed = 0;
  uint64_t first_index = 0;
  float rate = 0;
  bool active(const TransformerStep& step) const { return step.training && rate > 0.0f; }
  // The draw for an op that drops in its own pass (rate 0 where nothing drops this step).
  DropoutDraw draw(const TransformerStep& step) const;
  // The bias's pass of a sub-layer's output projection: sum = residual + Dropout(y + b).
  RowBiasEpilogue into_residual(const TransformerStep& step, const void* residual, void* sum) const;
  // The gradient before the dropout, from dy: in `scratch`, or dy itself where nothing dropped.
  const void* backward(Backend& ops, const TransformerStep& step, DataType type, const void* dy, void* scratch,
                       size_t n) const;
};

// Site `site` of the layer keyed `layer_key` (its seed: counter_hash of the run's seed, the
// dropout stream and layer_key * 16 + site), over buffers of `elements_per_sentence` per sentence.
DropoutSite dropout_site(const ReplicaShard& shard, uint64_t layer_key, int site, size_t elements_per_sentence,
                         float rate);

// Scratch shared by every layer of a replica (one layer's backward runs at a time).
struct TransformerScratch {
  TransformerScratch(Device& device, const TransformerShape& shape, int max_rows, int source_rows);
  Buffer projected;         // (rows, d): a sub-layer's output projection, then its gradient
  Buffer inner_gradient;    // (rows, ffn)
  Buffer qkv_gradient;      // (rows, 3d) self-attention; (source rows, 2d) cross-attention's keys and values
  Buffer output_gradient;   // (rows, d): attention output's gradient
  Buffer query_gradient;    // (rows, d): cross-attention's queries
  Buffer attention_workspace;
};

// What every layer of either stack shares besides its parameters: its shape and the key of its
// dropout masks. (Holding no parameters, it registers none: the layers' members keep the layout's
// order.)
class TransformerLayerBase {
 public:
  const TransformerShape& shape() const { return shape_; }
  uint64_t dropout_key() const { return dropout_key_; }

 protected:
  TransformerLayerBase(const TransformerShape& shape, uint64_t dropout_key) : shape_(shape), dropout_key_(dropout_key) {}

 private:
  TransformerShape shape_;
  uint64_t dropout_key_;
};

// The parameters of a layer's sub-layers, each ending in its output projection and the norm after
// its residual, declared in that order under the layer's name: self-attention
// ("self_attention/qkv", ".../output", "norm1"), cross-attention ("cross_attention/query",
// ".../key_value", ".../output", "norm2") and the feed-forward block ("feed_forward/inner",
// ".../output", and the norm named by the layer: the encoder's second, the decoder's third).
struct SelfAttentionParams {
  SelfAttentionParams(ParameterLayout& layout, const std::string& layer, const TransformerShape& shape);
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const;
  LinearParams qkv, out;
  LayerNormParams norm;
};

struct CrossAttentionParams {
  CrossAttentionParams(ParameterLayout& layout, const std::string& layer, const TransformerShape& shape);
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const;
  LinearParams query, key_value, out;
  LayerNormParams norm;
};

struct FeedForwardParams {
  FeedForwardParams(ParameterLayout& layout, const std::string& layer, const TransformerShape& shape,
                    const std::string& norm_name);
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const;
  LinearParams inner, out;
  LayerNormParams norm;
};

class TransformerEncoderLayer : public TransformerLayerBase {
 public:
  TransformerEncoderLayer(ParameterLayout& layout, const std::string& name, const TransformerShape& shape,
                          uint64_t dropout_key);
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const;
  GradientRange gradient_range(const ParameterLayout& layout) const;

  SelfAttentionParams self_attention;
  FeedForwardParams feed_forward;
};

class TransformerDecoderLayer : public TransformerLayerBase {
 public:
  TransformerDecoderLayer(ParameterLayout& layout, const std::string& name, const TransformerShape& shape,
                          uint64_t dropout_key);
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const;
  GradientRange gradient_range(const ParameterLayout& layout) const;

  SelfAttentionParams self_attention;
  CrossAttentionParams cross_attention;
  FeedForwardParams feed_forward;
};

class AttentionSublayer;
class FeedForwardSublayer;

// A layer's activations on one replica: `batch` sentences of `length` tokens (and, for the
// decoder, `source_length` memory tokens). With `recomputed` (--activation_checkpointing=blocks)
// what the layer keeps for backward but its output (kept()) is laid over memory the replica's
// layers share (BlockActivations::place), and the replica runs forward again, `recomputing`,
// before each backward: the same ops on the same inputs, but the last norm, whose output and
// statistics are kept.
class TransformerEncoderLayerReplica {
 public:
  TransformerEncoderLayerReplica(const TransformerEncoderLayer& layer, Device& device, const ReplicaShard& shard,
                                 int length, TransformerScratch& scratch, bool recomputed = false);
  ~TransformerEncoderLayerReplica();
  // output (rows, d) from x (rows, d), which must stay untouched until backward.
  void forward(const ParameterSet& params, const TransformerStep& step, const void* x, bool recomputing = false);
  const void* output() const;
  // dx: in, the gradient of output(); out, the gradient of x (in place).
  void backward(const ParameterSet& params, const TransformerStep& step, const void* x, void* dx);
  BlockActivations& kept() { return kept_; }

 private:
  BlockActivations kept_;  // before the sublayers, which take their slices of it
  std::unique_ptr<AttentionSublayer> attention_;
  std::unique_ptr<FeedForwardSublayer> feed_forward_;
};

class TransformerDecoderLayerReplica {
 public:
  TransformerDecoderLayerReplica(const TransformerDecoderLayer& layer, Device& device, const ReplicaShard& shard,
                                 int length, int source_length, TransformerScratch& scratch, bool recomputed = false);
  ~TransformerDecoderLayerReplica();
  // output (rows, d) from x (rows, d) and the encoder's output memory (source rows, d); both
  // must stay untouched until backward.
  void forward(const ParameterSet& params, const TransformerStep& step, const void* x, const void* memory,
               bool recomputing = false);
  const void* output() const;
  // dx in place as the encoder layer's; d_memory (source rows, d) gets the memory's gradient,
  // overwritten when `first_into_memory`, else added.
  void backward(const ParameterSet& params, const TransformerStep& step, const void* x, const void* memory,
                void* dx, void* d_memory, bool first_into_memory);
  BlockActivations& kept() { return kept_; }

 private:
  BlockActivations kept_;
  std::unique_ptr<AttentionSublayer> self_attention_, cross_attention_;
  std::unique_ptr<FeedForwardSublayer> feed_forward_;
};

}  // namespace dpbench
