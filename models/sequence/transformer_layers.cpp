// The Transformer's layers (see transformer_layers.h): parameters, initialisation, and each
// sub-layer's forward and backward pass over one replica's sentences.
//
// Backward runs in place on the gradient of the layer's output: a sub-layer's layer norm turns
// it into the gradient of its sum (x + Dropout(Sublayer(x))), which is the residual's share of
// x's gradient; the sub-layer's own input gradient is then added to it by the GEMM that
// produces it (beta = 1), so no separate addition pass runs.
#include "models/sequence/transformer_layers.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/counter_random.h"
#include "engine/errors.h"

namespace dpbench {

// ---- parameters ---------------------------------------------------------------------------------

LinearParams::LinearParams(ParameterLayout& layout, const std::string& name, int in, int out)
    : name_(name), in_(in), out_(out) {
  weights_id_ = layout.declare(name + "/weights", {out, in});
  bias_id_ = layout.declare(name + "/bias", {out});
}

void LinearParams::initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const {
  const TensorView& weights = layout.tensor(weights_id_);
  const uint64_t stream = kRandomStreamParameters + static_cast<uint64_t>(weights_id_);
  const float limit = std::sqrt(6.0f / static_cast<float>(in_ + out_));
  for (size_t i = 0; i < weights.count; ++i)
    values[weights.offset + i] = limit * (2.0f * counter_uniform(seed, stream, i) - 1.0f);
  const TensorView& bias = layout.tensor(bias_id_);
  std::fill_n(values.begin() + static_cast<std::ptrdiff_t>(bias.offset), bias.count, 0.0f);
}

void LinearParams::forward(Backend& ops, const ParameterSet& params, DataType type, const void* x, int rows,
                           void* y, const RowBiasEpilogue& then) const {
  ops.linear_forward(type, x, params.parameter_as(weights_id_, type), params.parameter(bias_id_),
                     params.parameter_as(bias_id_, type), rows, in_, out_, y, then);
}

void LinearParams::backward(Backend& ops, const ParameterSet& params, DataType type, const void* x, const void* dy,
                            int rows, void* dx, bool accumulate, const GeluInputGradient& gelu,
                            bool bias_gradient) const {
  ops.linear_backward(type, x, dy, params.parameter_as(weights_id_, type), rows, in_, out_,
                      params.gradient(weights_id_), bias_gradient ? params.gradient(bias_id_) : nullptr, dx,
                      accumulate, gelu);
}

LayerNormParams::LayerNormParams(ParameterLayout& layout, const std::string& name, int dim)
    : name_(name), dim_(dim) {
  gamma_id_ = layout.declare(name + "/gamma", {dim});
  beta_id_ = layout.declare(name + "/beta", {dim});
}

void LayerNormParams::initialize(const ParameterLayout& layout, std::vector<float>& values) const {
  const TensorView& gamma = layout.tensor(gamma_id_);
  const TensorView& beta = layout.tensor(beta_id_);
  std::fill_n(values.begin() + static_cast<std::ptrdiff_t>(gamma.offset), gamma.count, 1.0f);
  std::fill_n(values.begin() + static_cast<std::ptrdiff_t>(beta.offset), beta.count, 0.0f);
}

LayerNormPass::LayerNormPass(const LayerNormParams& norm, Device& device, int rows, DataType type, float epsilon)
    : norm_(norm), device_(device), rows_(rows), type_(type), epsilon_(epsilon) {
  const MemoryTag statistics{MemoryCategory::activations, norm.name()};
  mean_ = device.allocate(sizeof(float) * static_cast<size_t>(rows), statistics);
  inv_std_ = device.allocate(sizeof(float) * static_cast<size_t>(rows), statistics);
  const size_t workspace = device.ops().layer_norm_workspace_bytes(rows, norm.dim());
  if (workspace > 0) workspace_ = device.allocate(workspace, MemoryTag{MemoryCategory::workspaces, norm.name()});
}

void LayerNormPass::forward(const ParameterSet& params, const void* x, void* y) {
  device_.ops().layer_norm_forward(type_, x, params.parameter(norm_.gamma_id()), params.parameter(norm_.beta_id()),
                                   rows_, norm_.dim(), epsilon_, y, mean_.as<float>(), inv_std_.as<float>());
}

void LayerNormPass::backward(const ParameterSet& params, const void* x, const void* dy, void* dx, bool accumulate) {
  device_.ops().layer_norm_backward(type_, x, dy, params.parameter(norm_.gamma_id()), mean_.as<float>(),
                                    inv_std_.as<float>(), rows_, norm_.dim(), dx,
                                    params.gradient(norm_.gamma_id()), params.gradient(norm_.beta_id()),
                                    workspace_.data(), accumulate);
}

TransformerScratch::TransformerScratch(Device& device, const TransformerShape& shape, int max_rows,
                                       int source_rows) {
  const size_t element = data_type_bytes(shape.type);
  const size_t rows = static_cast<size_t>(max_rows), d = static_cast<size_t>(shape.model_dim);
  const MemoryTag shared{MemoryCategory::scratch, "transformer layers"};
  projected = device.allocate(element * rows * d, shared);
  inner_gradient = device.allocate(element * rows * static_cast<size_t>(shape.ffn_units), shared);
  qkv_gradient = device.allocate(element * std::max(rows * 3 * d, static_cast<size_t>(source_rows) * 2 * d), shared);
  output_gradient = device.allocate(element * rows * d, shared);
  query_gradient = device.allocate(element * rows * d, shared);
}

SelfAttentionParams::SelfAttentionParams(ParameterLayout& layout, const std::string& layer,
                                         const TransformerShape& shape)
    : qkv(layout, layer + "/self_attention/qkv", shape.model_dim, 3 * shape.model_dim),
      out(layout, layer + "/self_attention/output", shape.model_dim, shape.model_dim),
      norm(layout, layer + "/norm1", shape.model_dim) {}

void SelfAttentionParams::initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const {
  for (const LinearParams* linear : {&qkv, &out}) linear->initialize(layout, seed, values);
  norm.initialize(layout, values);
}

CrossAttentionParams::CrossAttentionParams(ParameterLayout& layout, const std::string& layer,
                                           const TransformerShape& shape)
    : query(layout, layer + "/cross_attention/query", shape.model_dim, shape.model_dim),
      key_value(layout, layer + "/cross_attention/key_value", shape.model_dim, 2 * shape.model_dim),
      out(layout, layer + "/cross_attention/output", shape.model_dim, shape.model_dim),
      norm(layout, layer + "/norm2", shape.model_dim) {}

void CrossAttentionParams::initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const {
  for (const LinearParams* linear : {&query, &key_value, &out}) linear->initialize(layout, seed, values);
  norm.initialize(layout, values);
}

FeedForwardParams::FeedForwardParams(ParameterLayout& layout, const std::string& layer, const TransformerShape& shape,
                                     const std::string& norm_name)
    : inner(layout, layer + "/feed_forward/inner", shape.model_dim, shape.ffn_units),
      out(layout, layer + "/feed_forward/output", shape.ffn_units, shape.model_dim),
      norm(layout, layer + "/" + norm_name, shape.model_dim) {}

void FeedForwardParams::initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& values) const {
  for (const LinearParams* linear : {&inner, &out}) linear->initialize(layout, seed, values);
  norm.initialize(layout, values);
}

TransformerEncoderLayer::TransformerEncoderLayer(ParameterLayout& layout, const std::string& name,
                                                 const TransformerShape& shape, uint64_t dropout_key)
    : TransformerLayerBase(shape, dropout_key),
      self_attention(layout, name, shape),
      feed_forward(layout, name, shape, "norm2") {}

void TransformerEncoderLayer::initialize(const ParameterLayout& layout, uint64_t seed,
                                         std::vector<float>& values) const {
  self_attention.initialize(layout, seed, values);
  feed_forward.initialize(layout, seed, values);
}

GradientRange TransformerEncoderLayer::gradient_range(const ParameterLayout& layout) const {
  return layout.range_of(self_attention.qkv.first_id(), feed_forward.norm.last_id());
}

TransformerDecoderLayer::TransformerDecoderLayer(ParameterLayout& layout, const std::string& name,
                                                 const TransformerShape& shape, uint64_t dropout_key)
    : TransformerLayerBase(shape, dropout_key),
      self_attention(layout, name, shape),
      cross_attention(layout, name, shape),
      feed_forward(layout, name, shape, "norm3") {}

void TransformerDecoderLayer::initialize(const ParameterLayout& layout, uint64_t seed,
                                         std::vector<float>& values) const {
  self_attention.initialize(layout, seed, values);
  cross_attention.initialize(layout, seed, values);
  feed_forward.initialize(layout, seed, values);
}

GradientRange TransformerDecoderLayer::gradient_range(const ParameterLayout& layout) const {
  return layout.range_of(self_attention.qkv.first_id(), feed_forward.norm.last_id());
}

// ---- sub-layers ---------------------------------------------------------------------------------

DropoutDraw DropoutSite::draw(const TransformerStep& step) const {
  DropoutDraw d;
  if (!active(step)) return d;
  d.rate = rate;
  d.seed = seed;
  d.first_index = first_index;
  d.step = step.step;
  return d;
}

RowBiasEpilogue DropoutSite::into_residual(const TransformerStep& step, const void* residual, void* sum) const {
  RowBiasEpilogue then;
  then.dropout = draw(step);
  then.residual = residual;
  then.out = sum;
  return then;
}

const void* DropoutSite::backward(Backend& ops, const TransformerStep& step, DataType type, const void* dy,
                                  void* scratch, size_t n) const {
  if (!active(step)) return dy;
  ops.dropout_backward(type, dy, scratch, n, rate, seed, first_index, step.step);
  return scratch;
}

DropoutSite dropout_site(const ReplicaShard& shard, uint64_t layer_key, int site, size_t elements_per_sentence,
                         float rate) {
  DropoutSite result;
  result.seed = counter_hash(shard.seed, kRandomStreamDropout, layer_key * 16 + static_cast<uint64_t>(site));
  result.first_index = shard.first_global_sample() * elements_per_sentence;
  result.rate = rate;
  return result;
}

// x <- LayerNorm(x + Dropout(Attention(x, memory) W_o^T + b_o)), self-attention (memory ==
// nullptr: queries, keys and values from x, one packed projection) or cross-attention (queries
// from x, keys and values from the encoder's output).
class AttentionSublayer {
 public:
  AttentionSublayer(Device& device, const TransformerShape& shape, const ReplicaShard& shard, uint64_t layer_key,
                    int first_site, int length, int key_length, bool causal, bool cross, const LinearParams* qkv,
                    const LinearParams* query, const LinearParams* key_value, const LinearParams& output,
                    const LayerNormParams& norm, TransformerScratch& scratch, BlockActivations& kept_set)
      : device_(device),
        shape_(shape),
        qkv_(qkv),
        query_(query),
        key_value_(key_value),
        output_(output),
        norm_pass_(norm, device, length * shard.batch_size, shape.type, shape.norm_epsilon),
        scratch_(scratch),
        cross_(cross) {
    const int B = shard.batch_size, d = shape.model_dim;
    rows_ = length * B;
    key_rows_ = key_length * B;
    const size_t element = data_type_bytes(shape.type);
    geometry_.batch = B;
    geometry_.heads = shape.heads;
    geometry_.query_len = length;
    geometry_.key_len = key_length;
    geometry_.head_dim = shape.head_dim();
    geometry_.type = shape.type;
    geometry_.causal = causal;
    geometry_.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim()));
    geometry_.q_stride = cross ? d : 3 * d;
    geometry_.k_stride = geometry_.v_stride = cross ? 2 * d : 3 * d;
    geometry_.o_stride = d;
    geometry_.dropout_rate = shape.dropout;
    geometry_.dropout_seed =
        counter_hash(shard.seed, kRandomStreamDropout, layer_key * 16 + static_cast<uint64_t>(first_site));
    geometry_.first_sample = shard.first_global_sample();
    output_dropout_ = dropout_site(shard, layer_key, first_site + 1, static_cast<size_t>(length) * d, shape.dropout);
    const MemoryTag kept{MemoryCategory::activations, output.sublayer()};
    if (cross) {
      queries_ = kept_set.take(element * rows_ * d, kept);
      keys_values_ = kept_set.take(element * key_rows_ * 2 * d, kept);
    } else {
      queries_ = kept_set.take(element * rows_ * 3 * d, kept);
    }
    attended_ = kept_set.take(element * rows_ * d, kept);
    lse_ = kept_set.take(sizeof(float) * geometry_.lse_count(), kept);
    sum_ = kept_set.take(element * rows_ * d, kept);
    normed_ = kept_set.take(element * rows_ * d, kept);
    const size_t workspace = device.ops().attention_workspace_bytes(geometry_);
    if (workspace > scratch.attention_workspace.bytes())
      scratch.attention_workspace = device.allocate(workspace, MemoryTag{MemoryCategory::workspaces, "attention"});
  }

  const void* output() const { return normed_.data(); }

  void forward(const ParameterSet& params, const TransformerStep& step, const void* x, const void* memory) {
    Backend& ops = device_.ops();
    const DataType type = shape_.type;
    const size_t d = static_cast<size_t>(shape_.model_dim);
    const void *q, *k, *v;
    if (cross_) {
      query_->forward(ops, params, type, x, rows_, queries_.data());
      key_value_->forward(ops, params, type, memory, key_rows_, keys_values_.data());
      q = queries_.data();
      k = keys_values_.data();
      v = element_at(keys_values_.data(), type, d);
    } else {
      qkv_->forward(ops, params, type, x, rows_, queries_.data());
      q = queries_.data();
      k = element_at(queries_.data(), type, d);
      v = element_at(queries_.data(), type, 2 * d);
    }
    AttentionGeometry g = geometry_;
    if (!step.training) g.dropout_rate = 0.0f;
    ops.attention_forward(g, q, k, v, key_lengths(step), step.step, attended_.data(),
                          lse_.as<float>(), scratch_.attention_workspace.data());
    output_.forward(ops, params, type, attended_.data(), rows_, scratch_.projected.data(),
                    output_dropout_.into_residual(step, x, sum_.data()));
    norm_pass_.forward(params, sum_.data(), normed_.data());
  }

  void backward(const ParameterSet& params, const TransformerStep& step, const void* x, const void* memory, void* dx,
                void* d_memory, bool first_into_memory) {
    Backend& ops = device_.ops();
    const DataType type = shape_.type;
    const size_t d = static_cast<size_t>(shape_.model_dim);
    norm_pass_.backward(params, sum_.data(), dx, dx);  // dx: the sum's gradient, x's residual share
    const void* projected_gradient =
        output_dropout_.backward(ops, step, type, dx, scratch_.projected.data(), rows_ * d);
    output_.backward(ops, params, type, attended_.data(), projected_gradient, rows_,
                     scratch_.output_gradient.data(), false);
    AttentionGeometry g = geometry_;
    if (!step.training) g.dropout_rate = 0.0f;
    const int32_t* lengths = key_lengths(step);
    if (cross_) {
      void* dq = scratch_.query_gradient.data();
      void* dkv = scratch_.qkv_gradient.data();
      ops.attention_backward(g, queries_.data(), keys_values_.data(), element_at(keys_values_.data(), type, d),
                             attended_.data(), scratch_.output_gradient.data(), lse_.as<float>(), lengths, step.step,
                             dq, dkv, element_at(dkv, type, d), scratch_.attention_workspace.data());
      query_->backward(ops, params, type, x, dq, rows_, dx, true);
      key_value_->backward(ops, params, type, memory, dkv, key_rows_, d_memory, !first_into_memory);
    } else {
      void* dqkv = scratch_.qkv_gradient.data();
      ops.attention_backward(g, queries_.data(), element_at(queries_.data(), type, d),
                             element_at(queries_.data(), type, 2 * d), attended_.data(),
                             scratch_.output_gradient.data(), lse_.as<float>(), lengths, step.step, dqkv,
                             element_at(dqkv, type, d), element_at(dqkv, type, 2 * d),
                             scratch_.attention_workspace.data());
      qkv_->backward(ops, params, type, x, dqkv, rows_, dx, true);
    }
  }

 private:
  // The decoder's causal self-attention needs no lengths: a real token never sees a later one.
  const int32_t* key_lengths(const TransformerStep& step) const {
    return geometry_.causal ? nullptr : step.source_lengths;
  }

  Device& device_;
  TransformerShape shape_;
  const LinearParams *qkv_, *query_, *key_value_;
  const LinearParams& output_;
  LayerNormPass norm_pass_;
  TransformerScratch& scratch_;
  bool cross_;
  int rows_ = 0, key_rows_ = 0;
  AttentionGeometry geometry_;
  DropoutSite output_dropout_;
  BlockActivations::Slice queries_, keys_values_;  // (rows, 3d) packed, or (rows, d) and (key rows, 2d)
  BlockActivations::Slice attended_, lse_, sum_, normed_;
};

// x <- LayerNorm(x + Dropout(Dropout(ReLU(x W_1^T + b_1)) W_2^T + b_2)).
class FeedForwardSublayer {
 public:
  FeedForwardSublayer(Device& device, const TransformerShape& shape, const ReplicaShard& shard, uint64_t layer_key,
                      int first_site, int length, const LinearParams& inner, const LinearParams& output,
                      const LayerNormParams& norm, TransformerScratch& scratch, BlockActivations& kept_set)
      : device_(device),
        shape_(shape),
        inner_(inner),
        output_(output),
        norm_pass_(norm, device, length * shard.batch_size, shape.type, shape.norm_epsilon),
        scratch_(scratch) {
    rows_ = length * shard.batch_size;
    const size_t element = data_type_bytes(shape.type), d = static_cast<size_t>(shape.model_dim);
    inner_dropout_ = dropout_site(shard, layer_key, first_site, static_cast<size_t>(length) * shape.ffn_units,
                                  shape.dropout);
    output_dropout_ = dropout_site(shard, layer_key, first_site + 1, static_cast<size_t>(length) * d, shape.dropout);
    const MemoryTag kept{MemoryCategory::activations, output.sublayer()};
    hidden_ = kept_set.take(element * rows_ * static_cast<size_t>(shape.ffn_units), kept);
    sum_ = kept_set.take(element * rows_ * d, kept);
    // The layer's output (the feed-forward block ends both layers): the next layer's input, kept
    // whether or not the layer is recomputed.
    normed_ = device.allocate(element * rows_ * d, kept);
  }

  const void* output() const { return normed_.data(); }

  // `recomputing`: again before backward, all but the norm: its output is kept (output()), and
  // its statistics too (LayerNormPass).
  void forward(const ParameterSet& params, const TransformerStep& step, const void* x, bool recomputing = false) {
    Backend& ops = device_.ops();
    const DataType type = shape_.type;
    // hidden_ keeps ReLU's output after its dropout: above 0 exactly where both let the gradient
    // through, so backward needs neither the mask nor the ReLU's input (relu_dropout_backward).
    RowBiasEpilogue activation;
    activation.relu = true;
    activation.dropout = inner_dropout_.draw(step);
    inner_.forward(ops, params, type, x, rows_, hidden_.data(), activation);
    output_.forward(ops, params, type, hidden_.data(), rows_, scratch_.projected.data(),
                    output_dropout_.into_residual(step, x, sum_.data()));
    if (recomputing) return;
    norm_pass_.forward(params, sum_.data(), normed_.data());
  }

  void backward(const ParameterSet& params, const TransformerStep& step, const void* x, void* dx) {
    Backend& ops = device_.ops();
    const DataType type = shape_.type;
    const size_t d = static_cast<size_t>(shape_.model_dim), inner = static_cast<size_t>(shape_.ffn_units);
    norm_pass_.backward(params, sum_.data(), dx, dx);
    const void* projected_gradient =
        output_dropout_.backward(ops, step, type, dx, scratch_.projected.data(), rows_ * d);
    void* hidden_gradient = scratch_.inner_gradient.data();
    output_.backward(ops, params, type, hidden_.data(), projected_gradient, rows_, hidden_gradient, false);
    ops.relu_dropout_backward(type, hidden_.data(), hidden_gradient, hidden_gradient, rows_ * inner,
                              inner_dropout_.draw(step).rate);
    inner_.backward(ops, params, type, x, hidden_gradient, rows_, dx, true);
  }

 private:
  Device& device_;
  TransformerShape shape_;
  const LinearParams& inner_;
  const LinearParams& output_;
  LayerNormPass norm_pass_;
  TransformerScratch& scratch_;
  size_t rows_ = 0;
  DropoutSite inner_dropout_, output_dropout_;
  BlockActivations::Slice hidden_, sum_;
  Buffer normed_;
};

// ---- layers on a replica --------------------------------------------------------------------------

// Dropout sites of a layer: 0 self-attention probabilities, 1 its output, 2 cross-attention
// probabilities, 3 its output, 4 the feed-forward block's inner activations, 5 its output.
TransformerEncoderLayerReplica::TransformerEncoderLayerReplica(const TransformerEncoderLayer& layer, Device& device,
                                                               const ReplicaShard& shard, int length,
                                                               TransformerScratch& scratch, bool recomputed) {
  const TransformerShape& shape = layer.shape();
  attention_ = std::make_unique<AttentionSublayer>(device, shape, shard, layer.dropout_key(), 0, length, length,
                                                   false, false, &layer.self_attention.qkv, nullptr, nullptr,
                                                   layer.self_attention.out, layer.self_attention.norm, scratch,
                                                   kept_);
  feed_forward_ = std::make_unique<FeedForwardSublayer>(device, shape, shard, layer.dropout_key(), 4, length,
                                                        layer.feed_forward.inner, layer.feed_forward.out,
                                                        layer.feed_forward.norm, scratch, kept_);
  if (!recomputed) kept_.allocate_own(device);
}

TransformerEncoderLayerReplica::~TransformerEncoderLayerReplica() = default;

const void* TransformerEncoderLayerReplica::output() const { return feed_forward_->output(); }

void TransformerEncoderLayerReplica::forward(const ParameterSet& params, const TransformerStep& step, const void* x,
                                             bool recomputing) {
  attention_->forward(params, step, x, nullptr);
  feed_forward_->forward(params, step, attention_->output(), recomputing);
}

void TransformerEncoderLayerReplica::backward(const ParameterSet& params, const TransformerStep& step, const void* x,
                                              void* dx) {
  feed_forward_->backward(params, step, attention_->output(), dx);
  attention_->backward(params, step, x, nullptr, dx, nullptr, false);
}

TransformerDecoderLayerReplica::TransformerDecoderLayerReplica(const TransformerDecoderLayer& layer, Device& device,
                                                               const ReplicaShard& shard, int length,
                                                               int source_length, TransformerScratch& scratch,
                                                               bool recomputed) {
  const TransformerShape& shape = layer.shape();
  self_attention_ = std::make_unique<AttentionSublayer>(device, shape, shard, layer.dropout_key(), 0, length, length,
                                                        true, false, &layer.self_attention.qkv, nullptr, nullptr,
                                                        layer.self_attention.out, layer.self_attention.norm, scratch,
                                                        kept_);
  cross_attention_ = std::make_unique<AttentionSublayer>(
      device, shape, shard, layer.dropout_key(), 2, length, source_length, false, true, nullptr,
      &layer.cross_attention.query, &layer.cross_attention.key_value, layer.cross_attention.out,
      layer.cross_attention.norm, scratch, kept_);
  feed_forward_ = std::make_unique<FeedForwardSublayer>(device, shape, shard, layer.dropout_key(), 4, length,
                                                        layer.feed_forward.inner, layer.feed_forward.out,
                                                        layer.feed_forward.norm, scratch, kept_);
  if (!recomputed) kept_.allocate_own(device);
}

TransformerDecoderLayerReplica::~TransformerDecoderLayerReplica() = default;

const void* TransformerDecoderLayerReplica::output() const { return feed_forward_->output(); }

void TransformerDecoderLayerReplica::forward(const ParameterSet& params, const TransformerStep& step, const void* x,
                                             const void* memory, bool recomputing) {
  self_attention_->forward(params, step, x, nullptr);
  cross_attention_->forward(params, step, self_attention_->output(), memory);
  feed_forward_->forward(params, step, cross_attention_->output(), recomputing);
}

void TransformerDecoderLayerReplica::backward(const ParameterSet& params, const TransformerStep& step, const void* x,
                                              const void* memory, void* dx, void* d_memory, bool first_into_memory) {
  feed_forward_->backward(params, step, cross_attention_->output(), dx);
  cross_attention_->backward(params, step, self_attention_->output(), memory, dx, d_memory, first_into_memory);
  self_attention_->backward(params, step, x, nullptr, dx, nullptr, false);
}

}  // namespace dpbench
