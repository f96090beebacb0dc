// gpt: a GPT-2 decoder (nanoGPT's shape). Token embedding plus learned positions, L pre-norm
// blocks
//   x <- x + Dropout(Attention(LayerNorm1(x)) W_o^T + b_o)     causal, one fused QKV projection
//   x <- x + Dropout(GELU(LayerNorm2(x) W_1^T + b_1) W_2^T + b_2)  GELU in its tanh form
// a final LayerNorm, and the output projection tied to the token embedding (no bias). The loss is
// the mean cross-entropy over the batch's B x T next-token predictions. Activations are
// sequence-major (T, B, d), as the other sequence models': token t of sequence b is row t B + b.
//
// The block's input gradient is carried in place: each sub-layer's input gradient (its norm's
// backward) is added to the residual's share, the gradient arriving from above, by the norm's
// backward itself.
#include "models/sequence/gpt.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/backend/step_trace.h"
#include "engine/errors.h"
#include "models/model_flops.h"
#include "models/sequence/block_activations.h"
#include "models/sequence/embedding.h"
#include "models/sequence/sequence_models.h"
#include "models/sequence/transformer_layers.h"
#include "models/sequence/vocabulary_loss.h"

namespace dpbench {

const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets = {
      {"124m", 12, 12, 768}, {"350m", 24, 16, 1024}, {"774m", 36, 20, 1280}, {"1558m", 48, 25, 1600}};
  return presets;
}

const GptPreset* find_gpt_preset(const std::string& name) {
  for (const GptPreset& preset : gpt_presets())
    if (name == preset.name) return &preset;
  return nullptr;
}

std::string gpt_preset_names() {
  std::string names;
  for (const GptPreset& preset : gpt_presets()) names += (names.empty() ? "" : ", ") + std::string(preset.name);
  return names;
}

int64_t gpt_parameter_count(int64_t vocab, int64_t seq_len, int64_t layers, int64_t hidden) {
  return vocab * hidden + seq_len * hidden + layers * (12 * hidden * hidden + 13 * hidden) + 2 * hidden;
}

double gpt_flops_per_token(int64_t parameters, int64_t layers, int64_t seq_len, int64_t hidden) {
  return 6.0 * static_cast<double>(parameters) +
         6.0 * static_cast<double>(layers) * static_cast<double>(seq_len) * static_cast<double>(hidden);
}

double gpt_recompute_flops_per_token(int64_t layers, int64_t seq_len, int64_t hidden) {
  const double d = static_cast<double>(hidden);
  return static_cast<double>(layers) * (16.0 * d * d + 2.0 * static_cast<double>(seq_len) * d);
}

namespace {

struct GptShape {
  int vocab, layers, seq_len;
  TransformerShape block;  // width, heads, 4 x width MLP, dropout, norm epsilon, activation type
  int batch;               // per replica
  int loss_chunk_rows;
  bool forward_only;
  bool recompute_blocks;  // --activation_checkpointing=blocks
};

// Dropout keys: block l is key l; the embedding sum's site is kEmbeddingDropoutKey.
constexpr uint64_t kEmbeddingDropoutKey = 100000;
// A block's sites: 0 the attention probabilities, 1 the attention's output, 2 the MLP's output.
enum BlockDropoutSite { kAttentionSite = 0, kAttentionOutputSite = 1, kMlpOutputSite = 2 };

// GPT-2's initialisation, with uniform draws of its standard deviations (std sqrt(3) a for
// uniform(-a, a)): 0.02 for the embeddings and every matrix, 0.02 / sqrt(2 L) for the two
// projections that end a residual branch; biases 0, norms 1 and 0.
void fill_uniform_std(const ParameterLayout& layout, int tensor_id, uint64_t seed, float std,
                      std::vector<float>& values) {
  const TensorView& tensor = layout.tensor(tensor_id);
  const uint64_t stream = kRandomStreamParameters + static_cast<uint64_t>(tensor_id);
  const float limit = std * std::sqrt(3.0f);
  for (size_t i = 0; i < tensor.count; ++i)
    values[tensor.offset + i] = limit * (2.0f * counter_uniform(seed, stream, i) - 1.0f);
}

void fill_constant(const ParameterLayout& layout, int tensor_id, float value, std::vector<float>& values) {
  const TensorView& tensor = layout.tensor(tensor_id);
  std::fill_n(values.begin() + static_cast<std::ptrdiff_t>(tensor.offset), tensor.count, value);
}

void initialize_linear(const ParameterLayout& layout, const LinearParams& linear, uint64_t seed, float std,
                       std::vector<float>& values) {
  fill_uniform_std(layout, linear.first_id(), seed, std, values);
  fill_constant(layout, linear.last_id(), 0.0f, values);
}

// One block's parameters, declared in forward order under "block_<l>/".
struct GptBlock {
  GptBlock(ParameterLayout& layout, const std::string& name, const TransformerShape& t)
      : name(name),
        attention_norm(layout, name + "/attention_norm", t.model_dim),
        qkv(layout, name + "/attention/qkv", t.model_dim, 3 * t.model_dim),
        attention_output(layout, name + "/attention/output", t.model_dim, t.model_dim),
        mlp_norm(layout, name + "/mlp_norm", t.model_dim),
        mlp_inner(layout, name + "/mlp/inner", t.model_dim, t.ffn_units),
        mlp_output(layout, name + "/mlp/output", t.ffn_units, t.model_dim) {}

  void initialize(const ParameterLayout& layout, uint64_t seed, int layers, std::vector<float>& values) const {
    const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(layers));
    attention_norm.initialize(layout, values);
    initialize_linear(layout, qkv, seed, 0.02f, values);
    initialize_linear(layout, attention_output, seed, residual_std, values);
    mlp_norm.initialize(layout, values);
    initialize_linear(layout, mlp_inner, seed, 0.02f, values);
    initialize_linear(layout, mlp_output, seed, residual_std, values);
  }
  GradientRange gradient_range(const ParameterLayout& layout) const {
    return layout.range_of(attention_norm.first_id(), mlp_output.last_id());
  }

  std::string name;  // "block_<l>": who holds its activations in the memory ledger
  LayerNormParams attention_norm;
  LinearParams qkv, attention_output;
  LayerNormParams mlp_norm;
  LinearParams mlp_inner, mlp_output;
};

class GptModel final : public Model {
 public:
  explicit GptModel(const GptShape& s) : shape_(s) {
    const TransformerShape& t = s.block;
    token_embedding_ = std::make_unique<EmbeddingTable>(layout_, "token_embedding", s.vocab, t.model_dim);
    position_embedding_ = std::make_unique<EmbeddingTable>(layout_, "position_embedding", s.seq_len, t.model_dim);
    for (int l = 0; l < s.layers; ++l)
      blocks_.push_back(std::make_unique<GptBlock>(layout_, "block_" + std::to_string(l), t));
    final_norm_ = std::make_unique<LayerNormParams>(layout_, "final_norm", t.model_dim);
    layout_.finalize();
    projection_ = std::make_unique<VocabularyProjection>(
        VocabularyProjection::tied_to(token_embedding_->table_id(), t.model_dim, s.vocab));
  }

  std::string name() const override { return "gpt"; }
  const ParameterLayout& layout() const override { return layout_; }
  std::string unit() const override { return "tokens"; }
  int64_t items_per_sample() const override { return shape_.seq_len; }

  // Note [gpt FLOPs]: a third forward, two thirds backward.
  StepFlops flops_per_sample() const override {
    const double per_token = gpt_flops_per_token(static_cast<int64_t>(layout_.parameter_count()), shape_.layers,
                                                 shape_.seq_len, shape_.block.model_dim);
    const double per_sequence = per_token * shape_.seq_len;
    const double recomputed =
        shape_.recompute_blocks
            ? gpt_recompute_flops_per_token(shape_.layers, shape_.seq_len, shape_.block.model_dim) * shape_.seq_len
            : 0.0;
    return StepFlops{per_sequence / 3.0, per_sequence * 2.0 / 3.0, recomputed};
  }

  std::string flops_counted() const override {
    std::string counted =
        "6 N + 6 L T d per token (N parameters, L blocks, T positions, width d: every parameter's multiply-add "
        "forward and two backward, and causal attention's two products over the visible half)";
    if (shape_.recompute_blocks)
      counted += ", and L (16 d^2 + 2 T d) per token for the blocks' forward run again in backward "
                 "(--activation_checkpointing=blocks: every product but the MLP's output projection)";
    return counted + "; Note [gpt FLOPs]";
  }

  std::vector<float> initial_parameters(uint64_t seed) const override {
    std::vector<float> values(layout_.total_count());
    fill_uniform_std(layout_, token_embedding_->table_id(), seed, 0.02f, values);
    fill_uniform_std(layout_, position_embedding_->table_id(), seed, 0.02f, values);
    for (const auto& block : blocks_) block->initialize(layout_, seed, shape_.layers, values);
    final_norm_->initialize(layout_, values);
    return values;
  }

  std::unique_ptr<ModelReplica> create_replica(Device& device, ParameterSet& params,
                                               const ReplicaShard& shard) const override;

  // Units in layout order: the final norm, the blocks last to first, the two embeddings (the
  // token table is also the tied projection, used at the end of forward, where the loss writes
  // its gradient, and in backward's last use).
  ParameterUnits parameter_units() const override {
    ParameterUnits units;
    const int layers = shape_.layers;
    units.units.push_back({"final norm", layout_.range_of(final_norm_->first_id(), final_norm_->last_id())});
    for (int l = layers; l-- > 0;) units.units.push_back({"block " + std::to_string(l), blocks_[l]->gradient_range(layout_)});
    units.units.push_back({"embedding", layout_.range_of(token_embedding_->table_id(), position_embedding_->table_id())});
    units.uses.push_back({embedding_unit(), UnitPass::forward, false});
    for (int l = 0; l < layers; ++l) units.uses.push_back({block_unit(l), UnitPass::forward, false});
    units.uses.push_back({final_norm_unit(), UnitPass::forward, false});
    units.uses.push_back({embedding_unit(), UnitPass::forward, true});
    units.uses.push_back({final_norm_unit(), UnitPass::backward, true});
    for (int l = layers; l-- > 0;) units.uses.push_back({block_unit(l), UnitPass::backward, true});
    units.uses.push_back({embedding_unit(), UnitPass::backward, true});
    return units;
  }
  // As the replica allocates them: the embeddings' sum and the final norm's output (rows x d), the
  // final norm's statistics (fp32 per row), and the loss's chunk of logits.
  uint64_t activation_bytes_outside_blocks() const override {
    const uint64_t rows = static_cast<uint64_t>(shape_.batch) * static_cast<uint64_t>(shape_.seq_len);
    const uint64_t element = data_type_bytes(shape_.block.type);
    const uint64_t d = static_cast<uint64_t>(shape_.block.model_dim);
    const uint64_t logits =
        loss_logits_bytes(static_cast<int>(rows), shape_.loss_chunk_rows, shape_.vocab, shape_.block.type);
    return 2 * element * rows * d + 2 * sizeof(float) * rows + logits;
  }
  int final_norm_unit() const { return 0; }
  int block_unit(int l) const { return shape_.layers - l; }
  int embedding_unit() const { return shape_.layers + 1; }

  const GptShape& shape() const { return shape_; }
  const EmbeddingTable& token_embedding() const { return *token_embedding_; }
  const EmbeddingTable& position_embedding() const { return *position_embedding_; }
  const std::vector<std::unique_ptr<GptBlock>>& blocks() const { return blocks_; }
  const LayerNormParams& final_norm() const { return *final_norm_; }
  const VocabularyProjection& projection() const { return *projection_; }

 private:
  GptShape shape_;
  ParameterLayout layout_;
  std::unique_ptr<EmbeddingTable> token_embedding_, position_embedding_;
  std::vector<std::unique_ptr<GptBlock>> blocks_;
  std::unique_ptr<LayerNormParams> final_norm_;
  std::unique_ptr<VocabularyProjection> projection_;
};

// Buffers every block of a replica shares: one block's backward runs at a time.
struct GptScratch {
  GptScratch(Device& device, const TransformerShape& t, size_t rows) {
    const size_t element = data_type_bytes(t.type), d = static_cast<size_t>(t.model_dim);
    const MemoryTag shared{MemoryCategory::scratch, "blocks"};
    projected = device.allocate(element * rows * d, shared);
    dropped_gradient = t.dropout > 0.0f ? device.allocate(element * rows * d, shared) : Buffer();
    norm_gradient = device.allocate(element * rows * d, shared);
    attended_gradient = device.allocate(element * rows * d, shared);
    qkv_gradient = device.allocate(element * rows * 3 * d, shared);
    inner_gradient = device.allocate(element * rows * static_cast<size_t>(t.ffn_units), shared);
  }
  Buffer projected;          // (rows, d): a projection's output before its residual add (not kept)
  Buffer dropped_gradient;   // (rows, d): a gradient before its dropout, with dropout only
  Buffer norm_gradient;      // (rows, d): a norm's output gradient, then its input's
  Buffer attended_gradient;  // (rows, d)
  Buffer qkv_gradient;       // (rows, 3d)
  Buffer inner_gradient;     // (rows, 4d)
  Buffer attention_workspace;
};

// One block's activations on one replica and its two passes.
class GptBlockReplica {
 public:
  // `recomputed`: the kept activations are laid over the replica's shared set (kept()), and
  // backward runs forward again first (--activation_checkpointing=blocks).
  GptBlockReplica(const GptBlock& block, uint64_t key, const TransformerShape& t, Device& device,
                  const ReplicaShard& shard, int seq_len, GptScratch& scratch, bool recomputed)
      : block_(block),
        t_(t),
        device_(device),
        scratch_(scratch),
        rows_(seq_len * shard.batch_size),
        attention_norm_(block.attention_norm, device, rows_, t.type, t.norm_epsilon),
        mlp_norm_(block.mlp_norm, device, rows_, t.type, t.norm_epsilon) {
    const size_t element = data_type_bytes(t.type), rows = static_cast<size_t>(rows_);
    const size_t d = static_cast<size_t>(t.model_dim), inner = static_cast<size_t>(t.ffn_units);
    geometry_.batch = shard.batch_size;
    geometry_.heads = t.heads;
    geometry_.query_len = geometry_.key_len = seq_len;
    geometry_.head_dim = t.head_dim();
    geometry_.type = t.type;
    geometry_.causal = true;
    geometry_.scale = 1.0f / std::sqrt(static_cast<float>(t.head_dim()));
    geometry_.q_stride = geometry_.k_stride = geometry_.v_stride = 3 * t.model_dim;
    geometry_.o_stride = t.model_dim;
    geometry_.dropout_rate = t.dropout;
    geometry_.dropout_seed = counter_hash(shard.seed, kRandomStreamDropout, key * 16 + kAttentionSite);
    geometry_.first_sample = shard.first_global_sample();
    const size_t per_sequence = static_cast<size_t>(seq_len) * d;
    attention_output_dropout_ = dropout_site(shard, key, kAttentionOutputSite, per_sequence, t.dropout);
    mlp_output_dropout_ = dropout_site(shard, key, kMlpOutputSite, per_sequence, t.dropout);
    // The block's output is the next block's input: kept whether or not the rest is recomputed.
    const MemoryTag kept{MemoryCategory::activations, block.name};
    attention_input_ = kept_.take(element * rows * d, kept);
    qkv_ = kept_.take(element * rows * 3 * d, kept);
    attended_ = kept_.take(element * rows * d, kept);
    lse_ = kept_.take(sizeof(float) * geometry_.lse_count(), kept);
    middle_ = kept_.take(element * rows * d, kept);
    mlp_input_ = kept_.take(element * rows * d, kept);
    pre_activation_ = kept_.take(element * rows * inner, kept);
    activated_ = kept_.take(element * rows * inner, kept);
    if (!recomputed) kept_.allocate_own(device);
    output_ = device.allocate(element * rows * d, kept);
    const size_t workspace = device.ops().attention_workspace_bytes(geometry_);
    if (workspace > scratch.attention_workspace.bytes())
      scratch.attention_workspace = device.allocate(workspace, MemoryTag{MemoryCategory::workspaces, "attention"});
  }

  // What forward keeps for backward but the output; under recomputation the replica places it
  // over the memory every block shares.
  BlockActivations& kept() { return kept_; }
  const void* output() const { return output_.data(); }

  // output() from x (rows, d), which must stay untouched until backward. `recomputing`: again,
  // before backward, into the kept activations: the same ops on the same input, but the MLP's
  // output projection, whose result (the output, kept) backward does not read.
  void forward(const ParameterSet& params, const TransformerStep& step, const void* x, bool recomputing = false) {
    Backend& ops = device_.ops();
    const DataType type = t_.type;
    const size_t d = static_cast<size_t>(t_.model_dim);
    attention_norm_.forward(params, x, attention_input_.data());
    block_.qkv.forward(ops, params, type, attention_input_.data(), rows_, qkv_.data());
    ops.attention_forward(geometry(step), qkv_.data(), element_at(qkv_.data(), type, d),
                          element_at(qkv_.data(), type, 2 * d), nullptr, step.step, attended_.data(),
                          lse_.as<float>(), scratch_.attention_workspace.data());
    block_.attention_output.forward(ops, params, type, attended_.data(), rows_, scratch_.projected.data(),
                                    attention_output_dropout_.into_residual(step, x, middle_.data()));
    mlp_norm_.forward(params, middle_.data(), mlp_input_.data());
    RowBiasEpilogue gelu;
    gelu.gelu = true;
    gelu.activated = activated_.data();
    block_.mlp_inner.forward(ops, params, type, mlp_input_.data(), rows_, pre_activation_.data(), gelu);
    if (recomputing) return;
    block_.mlp_output.forward(ops, params, type, activated_.data(), rows_, scratch_.projected.data(),
                              mlp_output_dropout_.into_residual(step, middle_.data(), output_.data()));
  }

  // dx: in, the gradient of output(); out, the gradient of x (in place). The block's parameter
  // gradients are overwritten.
  void backward(const ParameterSet& params, const TransformerStep& step, const void* x, void* dx) {
    Backend& ops = device_.ops();
    const DataType type = t_.type;
    const size_t d = static_cast<size_t>(t_.model_dim), n = static_cast<size_t>(rows_) * d;
    void* norm_gradient = scratch_.norm_gradient.data();
    // The MLP branch: dx reaches its output projection (through the dropout) and, unchanged,
    // the residual.
    const void* mlp_gradient = mlp_output_dropout_.backward(ops, step, type, dx, scratch_.dropped_gradient.data(), n);
    // Its input gradient passes GELU's backward in the same op, which also gives the inner
    // layer's bias gradient.
    const GeluInputGradient through_gelu{pre_activation_.data(), block_.mlp_inner.bias_gradient(params)};
    block_.mlp_output.backward(ops, params, type, activated_.data(), mlp_gradient, rows_,
                               scratch_.inner_gradient.data(), false, through_gelu);
    block_.mlp_inner.backward(ops, params, type, mlp_input_.data(), scratch_.inner_gradient.data(), rows_,
                              norm_gradient, false, {}, false);
    mlp_norm_.backward(params, middle_.data(), norm_gradient, dx, true);  // dx: the middle's gradient
    // The attention branch, likewise.
    const void* attention_gradient =
        attention_output_dropout_.backward(ops, step, type, dx, scratch_.dropped_gradient.data(), n);
    block_.attention_output.backward(ops, params, type, attended_.data(), attention_gradient, rows_,
                                     scratch_.attended_gradient.data(), false);
    void* dqkv = scratch_.qkv_gradient.data();
    ops.attention_backward(geometry(step), qkv_.data(), element_at(qkv_.data(), type, d),
                           element_at(qkv_.data(), type, 2 * d), attended_.data(), scratch_.attended_gradient.data(),
                           lse_.as<float>(), nullptr, step.step, dqkv, element_at(dqkv, type, d),
                           element_at(dqkv, type, 2 * d), scratch_.attention_workspace.data());
    block_.qkv.backward(ops, params, type, attention_input_.data(), dqkv, rows_, norm_gradient, false);
    attention_norm_.backward(params, x, norm_gradient, dx, true);  // dx: x's gradient
  }

 private:
  AttentionGeometry geometry(const TransformerStep& step) const {
    AttentionGeometry g = geometry_;
    if (!step.training) g.dropout_rate = 0.0f;
    return g;
  }

  const GptBlock& block_;
  const TransformerShape& t_;
  Device& device_;
  GptScratch& scratch_;
  int rows_;
  LayerNormPass attention_norm_, mlp_norm_;
  AttentionGeometry geometry_;
  DropoutSite attention_output_dropout_, mlp_output_dropout_;
  BlockActivations kept_;
  BlockActivations::Slice attention_input_;  // LayerNorm1(x) (rows, d)
  BlockActivations::Slice qkv_;              // (rows, 3d)
  BlockActivations::Slice attended_;         // attention's output (rows, d), before its projection
  BlockActivations::Slice lse_;
  BlockActivations::Slice middle_;           // x + the attention branch (rows, d)
  BlockActivations::Slice mlp_input_;        // LayerNorm2(middle) (rows, d)
  BlockActivations::Slice pre_activation_;   // the MLP's inner layer before GELU (rows, 4d), what GELU's backward reads
  BlockActivations::Slice activated_;        // after GELU (rows, 4d)
  Buffer output_;                            // middle + the MLP branch (rows, d)
};

class GptReplica final : public ModelReplica {
 public:
  GptReplica(const GptModel& model, Device& device, ParameterSet& params, const ReplicaShard& shard)
      : model_(model), device_(device), params_(params), batch_(shard.batch_size) {
    const GptShape& s = model.shape();
    const TransformerShape& t = s.block;
    const size_t rows = static_cast<size_t>(s.seq_len) * batch_, d = static_cast<size_t>(t.model_dim);
    const size_t element = data_type_bytes(t.type);
    Backend& ops = device.ops();
    tokens_ = device.allocate(sizeof(int32_t) * (rows + batch_), MemoryTag{MemoryCategory::data, "tokens"});
    fill_sequence_tokens(ops, tokens_.as<int32_t>(), s.seq_len + 1, shard, kRandomStreamInputs, s.vocab);
    std::vector<int32_t> positions(rows);
    for (size_t r = 0; r < rows; ++r) positions[r] = static_cast<int32_t>(r / static_cast<size_t>(batch_));
    positions_ = device.allocate(sizeof(int32_t) * rows, MemoryTag{MemoryCategory::data, "positions"});
    device.copy_from_host(positions_.data(), positions.data(), sizeof(int32_t) * rows);
    embedded_ = device.allocate(element * rows * d, MemoryTag{MemoryCategory::activations, "embedding"});
    final_output_ = device.allocate(element * rows * d, MemoryTag{MemoryCategory::activations, "final norm"});
    gradient_ = device.allocate(element * rows * d, MemoryTag{MemoryCategory::scratch, "blocks"});
    scratch_ = std::make_unique<GptScratch>(device, t, rows);
    for (size_t l = 0; l < model.blocks().size(); ++l)
      blocks_.push_back(std::make_unique<GptBlockReplica>(*model.blocks()[l], static_cast<uint64_t>(l), t, device,
                                                          shard, s.seq_len, *scratch_, s.recompute_blocks));
    if (s.recompute_blocks) {
      std::vector<const BlockActivations*> sets;
      for (const auto& block : blocks_) sets.push_back(&block->kept());
      recomputed_ = allocate_shared_block_activations(device, sets);
      for (const auto& block : blocks_) block->kept().place(recomputed_.data());
    }
    final_norm_ = std::make_unique<LayerNormPass>(model.final_norm(), device, static_cast<int>(rows), t.type,
                                                  t.norm_epsilon);
    embedding_dropout_ = dropout_site(shard, kEmbeddingDropoutKey, 0, static_cast<size_t>(s.seq_len) * d, t.dropout);
    loss_ = std::make_unique<VocabularyLossReplica>(model.projection(), device, static_cast<int>(rows),
                                                     s.loss_chunk_rows, t.type);
  }

  void forward(const StepContext& context) override {
    const GptShape& s = model_.shape();
    const TransformerShape& t = s.block;
    const TransformerStep step = step_of(context.step);
    Backend& ops = device_.ops();
    const size_t rows = static_cast<size_t>(s.seq_len) * batch_, n = rows * static_cast<size_t>(t.model_dim);
    {
      UnitScope unit(context.units, model_.embedding_unit(), UnitPass::forward);
      TracedSpan span(device_, StreamKind::compute, "embedding", "forward");
      model_.token_embedding().forward(ops, params_, tokens_.as<int32_t>(), rows, t.type, embedded_.data());
      model_.position_embedding().forward(ops, params_, positions_.as<int32_t>(), rows, t.type,
                                          scratch_->projected.data());
      ops.add_tensors(t.type, embedded_.data(), scratch_->projected.data(), embedded_.data(), n, false);
      if (embedding_dropout_.active(step))
        ops.dropout_forward(t.type, embedded_.data(), embedded_.data(), n, t.dropout, embedding_dropout_.seed,
                            embedding_dropout_.first_index, step.step);
    }
    const void* x = embedded_.data();
    for (size_t l = 0; l < blocks_.size(); ++l) {
      UnitScope unit(context.units, model_.block_unit(static_cast<int>(l)), UnitPass::forward);
      TracedSpan span(device_, StreamKind::compute, "block " + std::to_string(l), "forward");
      blocks_[l]->forward(params_, step, x);
      x = blocks_[l]->output();
    }
    TracedSpan span(device_, StreamKind::compute, "projection and loss", "forward");
    {
      UnitScope unit(context.units, model_.final_norm_unit(), UnitPass::forward);
      final_norm_->forward(params_, x, final_output_.data());
    }
    UnitScope unit(context.units, model_.embedding_unit(), UnitPass::forward);
    // The mean over the replica's B x T predictions; the strategies average the replicas.
    const float per_token = 1.0f / static_cast<float>(rows);
    loss_->forward_backward(params_, final_output_.data(), tokens_.as<int32_t>() + batch_, per_token, per_token,
                            gradient_.data(), context.loss_out, context.loss_scale, nullptr, !s.forward_only);
  }

  void backward(GradientAnnouncer& announcer) override {
    const GptShape& s = model_.shape();
    const TransformerShape& t = s.block;
    const ParameterLayout& layout = params_.layout();
    const TransformerStep step = step_of(last_step_);
    Backend& ops = device_.ops();
    const size_t rows = static_cast<size_t>(s.seq_len) * batch_, n = rows * static_cast<size_t>(t.model_dim);
    void* dx = gradient_.data();  // the final norm's output gradient, from the loss
    UnitHooks* units = announcer.unit_hooks();
    {
      UnitScope unit(units, model_.final_norm_unit(), UnitPass::backward);
      TracedSpan span(device_, StreamKind::compute, "final norm", "backward");
      final_norm_->backward(params_, blocks_.back()->output(), dx, dx);
      announcer.announce(layout.range_of(model_.final_norm().first_id(), model_.final_norm().last_id()));
    }
    for (size_t l = blocks_.size(); l-- > 0;) {
      const std::string name = "block " + std::to_string(l);
      const void* x = l == 0 ? embedded_.data() : blocks_[l - 1]->output();
      // The unit's parameters are at hand (gathered, under fully_sharded) for the recompute too.
      UnitScope unit(units, model_.block_unit(static_cast<int>(l)), UnitPass::backward);
      if (s.recompute_blocks) {
        RecomputeSpan recompute(device_, name);
        blocks_[l]->forward(params_, step, x, true);
      }
      TracedSpan span(device_, StreamKind::compute, name, "backward");
      blocks_[l]->backward(params_, step, x, dx);
      announcer.announce(model_.blocks()[l]->gradient_range(layout));
    }
    UnitScope unit(units, model_.embedding_unit(), UnitPass::backward);
    TracedSpan span(device_, StreamKind::compute, "embedding", "backward");
    if (embedding_dropout_.active(step))
      ops.dropout_backward(t.type, dx, dx, n, t.dropout, embedding_dropout_.seed, embedding_dropout_.first_index,
                           step.step);
    model_.position_embedding().backward(ops, params_, positions_.as<int32_t>(), rows, t.type, dx, true);
    announcer.announce(model_.position_embedding().gradient_range(layout));
    // The token embedding's gradient already holds the tied projection's share.
    loss_->finish_weight_gradient();
    model_.token_embedding().backward(ops, params_, tokens_.as<int32_t>(), rows, t.type, dx, false);
    announcer.announce(model_.token_embedding().gradient_range(layout));
  }

  std::vector<InputBuffer> inputs() const override { return {{"tokens", tokens_.data(), tokens_.bytes()}}; }

 private:
  TransformerStep step_of(const int32_t* step) {
    last_step_ = step;
    TransformerStep result;
    result.step = step;
    result.training = !model_.shape().forward_only;
    return result;
  }

  const GptModel& model_;
  Device& device_;
  ParameterSet& params_;
  int batch_;
  const int32_t* last_step_ = nullptr;  // forward's step counter, for backward's dropout masks
  Buffer tokens_;        // int32 (T + 1, B): inputs are rows [0, T), targets rows [1, T]
  Buffer positions_;     // int32 (T, B): row t holds t
  Buffer embedded_;      // the first block's input (T, B, d)
  Buffer final_output_;  // the final norm's output, the projection's input
  Buffer gradient_;      // the final norm's output gradient, then each block's input gradient
  std::unique_ptr<GptScratch> scratch_;
  std::vector<std::unique_ptr<GptBlockReplica>> blocks_;
  Buffer recomputed_;  // --activation_checkpointing=blocks: the one set of kept activations
  std::unique_ptr<LayerNormPass> final_norm_;
  DropoutSite embedding_dropout_;
  std::unique_ptr<VocabularyLossReplica> loss_;
};

std::unique_ptr<ModelReplica> GptModel::create_replica(Device& device, ParameterSet& params,
                                                       const ReplicaShard& shard) const {
  return checked_replica<GptReplica>("gpt", shape_.batch, *this, device, params, shard);
}

}  // namespace

std::unique_ptr<Model> create_gpt_model(const ModelSettings& config) {
  const SequenceConfig& q = config.sequence;
  GptShape s;
  s.vocab = q.vocab_size;
  s.layers = q.num_layers;
  s.seq_len = q.seq_len;
  s.block.model_dim = q.hidden_size;
  s.block.heads = q.num_heads;
  s.block.ffn_units = 4 * q.hidden_size;
  s.block.dropout = static_cast<float>(q.dropout);
  s.block.type = config.activation_type();
  s.batch = config.batch_size;
  s.loss_chunk_rows = q.loss_chunk_rows;
  s.forward_only = config.forward_only;
  s.recompute_blocks = config.recomputes_blocks();
  if (q.num_heads <= 0 || q.hidden_size % q.num_heads != 0)
    throw ConfigError("--num_heads=" + std::to_string(q.num_heads) + ": does not divide --hidden_size=" +
                      std::to_string(q.hidden_size) + "; give a divisor, e.g. 12 for 768");
  if (q.hidden_size / q.num_heads > kMaxAttentionHeadDim)
    throw ConfigError("--num_heads=" + std::to_string(q.num_heads) + ": leaves heads of " +
                      std::to_string(q.hidden_size / q.num_heads) + " units; attention takes up to " +
                      std::to_string(kMaxAttentionHeadDim) + " per head: give more heads");
  return std::make_unique<GptModel>(s);
}

}  // namespace dpbench
