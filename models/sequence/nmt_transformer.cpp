// nmt with --encoder_type=transformer: the seed translation task on Transformer-base ("Attention
// Is All You Need"; nn.Transformer(512, 8, 6, 6, 2048) plus two nn.Embedding(50000, 512) and a
// bias-free nn.Linear(512, 50000): 120,940,544 parameters at the defaults). Embeddings are scaled
// by sqrt(d), the sinusoidal positions added, dropout applied; both stacks end in a layer norm;
// the decoder's self-attention is causal and the encoder's and the cross-attention's keys stop at
// each sentence's source length. The loss is the other nmt variants': the cross-entropy summed
// over a sentence's target tokens, averaged over the batch, with real text's padding weighted 0.
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
#include "models/sequence/sentence_pairs.h"
#include "models/sequence/sequence_models.h"
#include "models/sequence/transformer_layers.h"
#include "models/sequence/vocabulary_loss.h"

namespace dpbench {
namespace {

struct TransformerNmtShape {
  int src_vocab, tgt_vocab, encoder_layers, decoder_layers, src_len, tgt_len;
  TransformerShape layer;
  int batch;  // per replica
  int loss_chunk_rows;
  bool forward_only;
  bool recompute_layers;  // --activation_checkpointing=blocks
};

// Dropout keys of the layers: encoder layers 0.., decoder layers 1000.., the embeddings' sites
// 2000 (source) and 2001 (target).
constexpr uint64_t kDecoderDropoutKeys = 1000, kEmbeddingDropoutKeys = 2000;

// Multiply-adds of one attention's two products over a whole batch: scores (Tq x dh by dh x Tk)
// and the weighted sum (Tq x Tk by Tk x dh) per sentence and head; a causal one computes the
// visible half.
StepFlops attention_flops(double sentences, int heads, int query_len, int key_len, int head_dim, bool causal) {
  StepFlops flops = matmul_flops(sentences * heads * query_len, head_dim, key_len, true);
  flops += matmul_flops(sentences * heads * query_len, key_len, head_dim, true);
  if (causal) {
    flops.forward /= 2;
    flops.backward /= 2;
  }
  return flops;
}

class TransformerNmtModel final : public Model {
 public:
  explicit TransformerNmtModel(const TransformerNmtShape& s) : shape_(s) {
    const TransformerShape& t = s.layer;
    // Declared in forward order except the projection, which comes before the decoder: its
    // gradient is final once the decoder's backward pass is done (see VocabularyLossReplica).
    source_embedding_ = std::make_unique<EmbeddingTable>(layout_, "encoder/embedding", s.src_vocab, t.model_dim);
    for (int l = 0; l < s.encoder_layers; ++l)
      encoder_.push_back(std::make_unique<TransformerEncoderLayer>(layout_, "encoder/layer_" + std::to_string(l), t,
                                                                   static_cast<uint64_t>(l)));
    encoder_norm_ = std::make_unique<LayerNormParams>(layout_, "encoder/norm", t.model_dim);
    target_embedding_ = std::make_unique<EmbeddingTable>(layout_, "decoder/embedding", s.tgt_vocab, t.model_dim);
    projection_ = std::make_unique<VocabularyProjection>(layout_, "decoder/projection", t.model_dim, s.tgt_vocab);
    for (int l = 0; l < s.decoder_layers; ++l)
      decoder_.push_back(std::make_unique<TransformerDecoderLayer>(
          layout_, "decoder/layer_" + std::to_string(l), t, kDecoderDropoutKeys + static_cast<uint64_t>(l)));
    decoder_norm_ = std::make_unique<LayerNormParams>(layout_, "decoder/norm", t.model_dim);
    layout_.finalize();
  }

  std::string name() const override { return "nmt"; }
  const ParameterLayout& layout() const override { return layout_; }

  // Units in layout order: the decoder's norm and layers (last first), the projection, the
  // target embedding, the encoder's norm and layers (last first), the source embedding.
  ParameterUnits parameter_units() const override {
    ParameterUnits units;
    const int decoders = static_cast<int>(decoder_.size()), encoders = static_cast<int>(encoder_.size());
    units.units.push_back({"decoder norm", layout_.range_of(decoder_norm_->first_id(), decoder_norm_->last_id())});
    for (int l = decoders; l-- > 0;)
      units.units.push_back({"decoder layer " + std::to_string(l), decoder_[l]->gradient_range(layout_)});
    units.units.push_back({"projection", projection_->gradient_range(layout_)});
    units.units.push_back({"target embedding", target_embedding_->gradient_range(layout_)});
    units.units.push_back({"encoder norm", layout_.range_of(encoder_norm_->first_id(), encoder_norm_->last_id())});
    for (int l = encoders; l-- > 0;)
      units.units.push_back({"encoder layer " + std::to_string(l), encoder_[l]->gradient_range(layout_)});
    units.units.push_back({"source embedding", source_embedding_->gradient_range(layout_)});
    auto use = [&units](int unit, UnitPass pass, bool writes) { units.uses.push_back({unit, pass, writes}); };
    use(source_embedding_unit(), UnitPass::forward, false);
    for (int l = 0; l < encoders; ++l) use(encoder_unit(l), UnitPass::forward, false);
    use(encoder_norm_unit(), UnitPass::forward, false);
    use(target_embedding_unit(), UnitPass::forward, false);
    for (int l = 0; l < decoders; ++l) use(decoder_unit(l), UnitPass::forward, false);
    use(decoder_norm_unit(), UnitPass::forward, false);
    use(projection_unit(), UnitPass::forward, true);  // the loss writes its weight gradient
    use(decoder_norm_unit(), UnitPass::backward, true);
    for (int l = decoders; l-- > 0;) use(decoder_unit(l), UnitPass::backward, true);
    use(projection_unit(), UnitPass::backward, true);
    use(target_embedding_unit(), UnitPass::backward, true);
    use(encoder_norm_unit(), UnitPass::backward, true);
    for (int l = encoders; l-- > 0;) use(encoder_unit(l), UnitPass::backward, true);
    use(source_embedding_unit(), UnitPass::backward, true);
    return units;
  }
  int decoder_norm_unit() const { return 0; }
  int decoder_unit(int l) const { return static_cast<int>(decoder_.size()) - l; }
  int projection_unit() const { return static_cast<int>(decoder_.size()) + 1; }
  int target_embedding_unit() const { return projection_unit() + 1; }
  int encoder_norm_unit() const { return projection_unit() + 2; }
  int encoder_unit(int l) const { return encoder_norm_unit() + static_cast<int>(encoder_.size()) - l; }
  int source_embedding_unit() const { return encoder_norm_unit() + static_cast<int>(encoder_.size()) + 1; }

  std::string unit() const override { return "words"; }
  int64_t items_per_sample() const override { return shape_.src_len + shape_.tgt_len; }

  // The linear layers of every token, the attentions' products and the vocabulary projection of
  // every target token. Every input gradient runs (the embeddings need them), so backward is
  // twice forward; FlashAttention's recomputation of the scores is not counted.
  // --activation_checkpointing=blocks runs every layer's forward again before its backward (all
  // but its last norm, which no product is), so the layers' forward counts twice.
  StepFlops flops_per_sample() const override {
    const TransformerShape& t = shape_.layer;
    const double d = t.model_dim, ffn = t.ffn_units, B = shape_.batch;
    const double source = static_cast<double>(shape_.src_len) * B, target = static_cast<double>(shape_.tgt_len) * B;
    StepFlops flops;  // the layers', then the projection's
    for (int l = 0; l < shape_.encoder_layers; ++l) {
      flops += matmul_flops(source, d, 4 * d, true);  // qkv and output projections
      flops += matmul_flops(source, d, 2 * ffn, true);
      flops += attention_flops(B, t.heads, shape_.src_len, shape_.src_len, t.head_dim(), false);
    }
    for (int l = 0; l < shape_.decoder_layers; ++l) {
      flops += matmul_flops(target, d, 4 * d, true);  // self-attention's projections
      flops += matmul_flops(target, d, 2 * d, true);  // cross-attention's query and output
      flops += matmul_flops(source, d, 2 * d, true);  // its keys and values, from the encoder
      flops += matmul_flops(target, d, 2 * ffn, true);
      flops += attention_flops(B, t.heads, shape_.tgt_len, shape_.tgt_len, t.head_dim(), true);
      flops += attention_flops(B, t.heads, shape_.tgt_len, shape_.src_len, t.head_dim(), false);
    }
    if (shape_.recompute_layers) flops.recompute = flops.forward;
    flops += matmul_flops(target, d, projection_->vocab(), true);
    return per_sample(flops, shape_.batch);
  }

  std::string flops_counted() const override {
    std::string counted = Model::flops_counted();
    if (shape_.recompute_layers)
      counted += "; with --activation_checkpointing=blocks, every encoder and decoder layer's forward once more in "
                 "backward (recompute)";
    return counted;
  }

  std::vector<float> initial_parameters(uint64_t seed) const override {
    std::vector<float> values(layout_.total_count());
    source_embedding_->initialize(layout_, seed, values);
    for (const auto& layer : encoder_) layer->initialize(layout_, seed, values);
    encoder_norm_->initialize(layout_, values);
    target_embedding_->initialize(layout_, seed, values);
    projection_->initialize(layout_, seed, values);
    for (const auto& layer : decoder_) layer->initialize(layout_, seed, values);
    decoder_norm_->initialize(layout_, values);
    return values;
  }

  std::unique_ptr<ModelReplica> create_replica(Device& device, ParameterSet& params,
                                               const ReplicaShard& shard) const override;

  const TransformerNmtShape& shape() const { return shape_; }
  const EmbeddingTable& source_embedding() const { return *source_embedding_; }
  const EmbeddingTable& target_embedding() const { return *target_embedding_; }
  const std::vector<std::unique_ptr<TransformerEncoderLayer>>& encoder() const { return encoder_; }
  const std::vector<std::unique_ptr<TransformerDecoderLayer>>& decoder() const { return decoder_; }
  const LayerNormParams& encoder_norm() const { return *encoder_norm_; }
  const LayerNormParams& decoder_norm() const { return *decoder_norm_; }
  const VocabularyProjection& projection() const { return *projection_; }

 private:
  TransformerNmtShape shape_;
  ParameterLayout layout_;
  std::unique_ptr<EmbeddingTable> source_embedding_, target_embedding_;
  std::vector<std::unique_ptr<TransformerEncoderLayer>> encoder_;
  std::vector<std::unique_ptr<TransformerDecoderLayer>> decoder_;
  std::unique_ptr<LayerNormParams> encoder_norm_, decoder_norm_;
  std::unique_ptr<VocabularyProjection> projection_;
};

class TransformerNmtReplica final : public ModelReplica {
 public:
  TransformerNmtReplica(const TransformerNmtModel& model, Device& device, ParameterSet& params,
                        const ReplicaShard& shard)
      : model_(model),
        device_(device),
        params_(params),
        batch_(shard.batch_size),
        pairs_(device, shard, model.shape().src_len, model.shape().tgt_len, model.shape().src_vocab,
               model.shape().tgt_vocab) {
    const TransformerNmtShape& s = model.shape();
    const TransformerShape& t = s.layer;
    const size_t B = static_cast<size_t>(shard.batch_size), d = static_cast<size_t>(t.model_dim);
    const size_t source_rows = pairs_.source_tokens(), target_rows = pairs_.target_tokens();
    const size_t element = data_type_bytes(t.type);
    // Synthetic sentences fill the source length; real text writes each sentence's.
    source_lengths_ = device.allocate(sizeof(int32_t) * B, MemoryTag{MemoryCategory::data, "source lengths"});
    std::vector<int32_t> full(B, s.src_len);
    device.copy_from_host(source_lengths_.data(), full.data(), sizeof(int32_t) * B);

    source_embedded_ =
        device.allocate(element * source_rows * d, MemoryTag{MemoryCategory::activations, "source embedding"});
    target_embedded_ =
        device.allocate(element * target_rows * d, MemoryTag{MemoryCategory::activations, "target embedding"});
    memory_ = device.allocate(element * source_rows * d, MemoryTag{MemoryCategory::activations, "encoder"});
    memory_gradient_ = device.allocate(element * source_rows * d, MemoryTag{MemoryCategory::scratch, "encoder"});
    decoder_output_ = device.allocate(element * target_rows * d, MemoryTag{MemoryCategory::activations, "decoder"});
    gradient_ = device.allocate(element * std::max(source_rows, target_rows) * d,
                                MemoryTag{MemoryCategory::scratch, "transformer layers"});
    scratch_ = std::make_unique<TransformerScratch>(device, t, static_cast<int>(std::max(source_rows, target_rows)),
                                                    static_cast<int>(source_rows));
    for (const auto& layer : model.encoder())
      encoder_.push_back(std::make_unique<TransformerEncoderLayerReplica>(*layer, device, shard, s.src_len, *scratch_,
                                                                          s.recompute_layers));
    for (const auto& layer : model.decoder())
      decoder_.push_back(std::make_unique<TransformerDecoderLayerReplica>(*layer, device, shard, s.tgt_len,
                                                                          s.src_len, *scratch_, s.recompute_layers));
    if (s.recompute_layers) {
      // One set for every layer of both stacks: one layer's backward runs at a time.
      std::vector<const BlockActivations*> sets;
      for (const auto& layer : encoder_) sets.push_back(&layer->kept());
      for (const auto& layer : decoder_) sets.push_back(&layer->kept());
      recomputed_ = allocate_shared_block_activations(device, sets);
      for (const auto& layer : encoder_) layer->kept().place(recomputed_.data());
      for (const auto& layer : decoder_) layer->kept().place(recomputed_.data());
    }
    encoder_norm_ = std::make_unique<LayerNormPass>(model.encoder_norm(), device, static_cast<int>(source_rows),
                                                    t.type, t.norm_epsilon);
    decoder_norm_ = std::make_unique<LayerNormPass>(model.decoder_norm(), device, static_cast<int>(target_rows),
                                                    t.type, t.norm_epsilon);
    source_dropout_seed_ = counter_hash(shard.seed, kRandomStreamDropout, kEmbeddingDropoutKeys * 16);
    target_dropout_seed_ = counter_hash(shard.seed, kRandomStreamDropout, (kEmbeddingDropoutKeys + 1) * 16);
    source_first_index_ = shard.first_global_sample() * s.src_len * d;
    target_first_index_ = shard.first_global_sample() * s.tgt_len * d;
    loss_ = std::make_unique<VocabularyLossReplica>(model.projection(), device, static_cast<int>(target_rows),
                                                     s.loss_chunk_rows, t.type);
  }

  void forward(const StepContext& context) override {
    const TransformerNmtShape& s = model_.shape();
    const TransformerStep step = step_of(context.step);
    {
      TracedSpan span(device_, StreamKind::compute, "encoder", "forward");
      UnitHooks* units = context.units;
      {
        UnitScope unit(units, model_.source_embedding_unit(), UnitPass::forward);
        embed(model_.source_embedding(), pairs_.source_ids.as<int32_t>(), s.src_len, source_embedded_.data(),
              source_dropout_seed_, source_first_index_, step);
      }
      const void* x = source_embedded_.data();
      for (size_t l = 0; l < encoder_.size(); ++l) {
        UnitScope unit(units, model_.encoder_unit(static_cast<int>(l)), UnitPass::forward);
        encoder_[l]->forward(params_, step, x);
        x = encoder_[l]->output();
      }
      UnitScope unit(units, model_.encoder_norm_unit(), UnitPass::forward);
      encoder_norm_->forward(params_, x, memory_.data());
    }
    {
      TracedSpan span(device_, StreamKind::compute, "decoder", "forward");
      UnitHooks* units = context.units;
      {
        UnitScope unit(units, model_.target_embedding_unit(), UnitPass::forward);
        embed(model_.target_embedding(), pairs_.target_ids.as<int32_t>(), s.tgt_len, target_embedded_.data(),
              target_dropout_seed_, target_first_index_, step);
      }
      const void* y = target_embedded_.data();
      for (size_t l = 0; l < decoder_.size(); ++l) {
        UnitScope unit(units, model_.decoder_unit(static_cast<int>(l)), UnitPass::forward);
        decoder_[l]->forward(params_, step, y, memory_.data());
        y = decoder_[l]->output();
      }
      UnitScope unit(units, model_.decoder_norm_unit(), UnitPass::forward);
      decoder_norm_->forward(params_, y, decoder_output_.data());
    }
    TracedSpan span(device_, StreamKind::compute, "projection and loss", "forward");
    UnitScope unit(context.units, model_.projection_unit(), UnitPass::forward);
    loss_->forward_backward(params_, decoder_output_.data(), pairs_.predicted_ids(), 1.0f, 1.0f,
                            gradient_.data(), context.loss_out, context.loss_scale, pairs_.target_weights.as<float>(),
                            !s.forward_only);
  }

  void backward(GradientAnnouncer& announcer) override {
    const ParameterLayout& layout = params_.layout();
    const TransformerStep step = step_of(last_step_);
    const size_t source_rows = pairs_.source_tokens(), target_rows = pairs_.target_tokens();
    void* dy = gradient_.data();  // the decoder output's gradient, from the loss
    UnitHooks* units = announcer.unit_hooks();
    {
      TracedSpan span(device_, StreamKind::compute, "decoder", "backward");
      {
        UnitScope unit(units, model_.decoder_norm_unit(), UnitPass::backward);
        decoder_norm_->backward(params_, decoder_[decoder_.size() - 1]->output(), dy, dy);
      }
      announcer.announce(layout.range_of(model_.decoder_norm().first_id(), model_.decoder_norm().last_id()));
      for (size_t l = decoder_.size(); l-- > 0;) {
        UnitScope unit(units, model_.decoder_unit(static_cast<int>(l)), UnitPass::backward);
        const void* x = l == 0 ? target_embedded_.data() : decoder_[l - 1]->output();
        if (model_.shape().recompute_layers) {
          RecomputeSpan recompute(device_, "decoder layer " + std::to_string(l));
          decoder_[l]->forward(params_, step, x, memory_.data(), true);
        }
        decoder_[l]->backward(params_, step, x, memory_.data(), dy, memory_gradient_.data(),
                              l + 1 == decoder_.size());
        announcer.announce(model_.decoder()[l]->gradient_range(layout));
      }
    }
    {
      TracedSpan span(device_, StreamKind::compute, "projection", "backward");
      UnitScope unit(units, model_.projection_unit(), UnitPass::backward);
      loss_->finish_weight_gradient();
      announcer.announce(model_.projection().gradient_range(layout));
    }
    {
      TracedSpan span(device_, StreamKind::compute, "target embedding", "backward");
      UnitScope unit(units, model_.target_embedding_unit(), UnitPass::backward);
      unembed(model_.target_embedding(), pairs_.target_ids.as<int32_t>(), target_rows, dy, target_dropout_seed_,
              target_first_index_, step);
      announcer.announce(model_.target_embedding().gradient_range(layout));
    }
    TracedSpan span(device_, StreamKind::compute, "encoder", "backward");
    void* dx = memory_gradient_.data();
    {
      UnitScope unit(units, model_.encoder_norm_unit(), UnitPass::backward);
      encoder_norm_->backward(params_, encoder_[encoder_.size() - 1]->output(), dx, dx);
    }
    announcer.announce(layout.range_of(model_.encoder_norm().first_id(), model_.encoder_norm().last_id()));
    for (size_t l = encoder_.size(); l-- > 0;) {
      UnitScope unit(units, model_.encoder_unit(static_cast<int>(l)), UnitPass::backward);
      const void* x = l == 0 ? source_embedded_.data() : encoder_[l - 1]->output();
      if (model_.shape().recompute_layers) {
        RecomputeSpan recompute(device_, "encoder layer " + std::to_string(l));
        encoder_[l]->forward(params_, step, x, true);
      }
      encoder_[l]->backward(params_, step, x, dx);
      announcer.announce(model_.encoder()[l]->gradient_range(layout));
    }
    UnitScope unit(units, model_.source_embedding_unit(), UnitPass::backward);
    unembed(model_.source_embedding(), pairs_.source_ids.as<int32_t>(), source_rows, dx, source_dropout_seed_,
            source_first_index_, step);
    announcer.announce(model_.source_embedding().gradient_range(layout));
  }

  std::vector<InputBuffer> inputs() const override {
    return {{"source_ids", pairs_.source_ids.data(), pairs_.source_ids.bytes()},
            {"source_lengths", source_lengths_.data(), source_lengths_.bytes()},
            {"target_ids", pairs_.target_ids.data(), pairs_.target_ids.bytes()},
            {"target_weights", pairs_.target_weights.data(), pairs_.target_weights.bytes()}};
  }

  std::vector<SparseGradientSource> sparse_gradients() const override {
    return pairs_.sparse_gradients(params_.layout(), model_.source_embedding(), model_.target_embedding());
  }

 private:
  TransformerStep step_of(const int32_t* step) {
    last_step_ = step;
    TransformerStep result;
    result.source_lengths = source_lengths_.as<int32_t>();
    result.step = step;
    result.training = !model_.shape().forward_only;
    return result;
  }

  // y (T, B, d) = Dropout(table[ids] * sqrt(d) + PE).
  void embed(const EmbeddingTable& table, const int32_t* ids, int length, void* y, uint64_t seed,
             uint64_t first_index, const TransformerStep& step) {
    const TransformerShape& t = model_.shape().layer;
    Backend& ops = device_.ops();
    const size_t rows = static_cast<size_t>(length) * batch_;
    table.forward(ops, params_, ids, rows, t.type, y);
    ops.add_positional_encoding(t.type, y, y, length, batch_, t.model_dim, std::sqrt(static_cast<float>(t.model_dim)));
    if (step.training && t.dropout > 0.0f)
      ops.dropout_forward(t.type, y, y, rows * t.model_dim, t.dropout, seed, first_index, step.step);
  }

  // The table's gradient from dy (rows, d), the gradient of embed's output; dy is overwritten.
  void unembed(const EmbeddingTable& table, const int32_t* ids, size_t rows, void* dy, uint64_t seed,
               uint64_t first_index, const TransformerStep& step) {
    const TransformerShape& t = model_.shape().layer;
    Backend& ops = device_.ops();
    const size_t n = rows * t.model_dim;
    if (step.training && t.dropout > 0.0f)
      ops.dropout_backward(t.type, dy, dy, n, t.dropout, seed, first_index, step.step);
    ops.convert(t.type, dy, t.type, dy, n, std::sqrt(static_cast<float>(t.model_dim)));
    table.backward(ops, params_, ids, rows, t.type, dy, true);
  }

  const TransformerNmtModel& model_;
  Device& device_;
  ParameterSet& params_;
  int batch_ = 0;
  const int32_t* last_step_ = nullptr;  // forward's step counter, for backward's dropout masks
  SentencePairs pairs_;
  Buffer source_lengths_;
  Buffer source_embedded_, target_embedded_;  // each stack's input (T, B, d)
  Buffer memory_, memory_gradient_;            // the encoder's output (Ts, B, d) and its gradient
  Buffer decoder_output_;                      // (Tt, B, d), the projection's input
  Buffer gradient_;                            // the decoder's output gradient, then its input's
  std::unique_ptr<TransformerScratch> scratch_;
  std::vector<std::unique_ptr<TransformerEncoderLayerReplica>> encoder_;
  std::vector<std::unique_ptr<TransformerDecoderLayerReplica>> decoder_;
  Buffer recomputed_;  // --activation_checkpointing=blocks: the layers' one set of kept activations
  std::unique_ptr<LayerNormPass> encoder_norm_, decoder_norm_;
  uint64_t source_dropout_seed_ = 0, target_dropout_seed_ = 0;
  uint64_t source_first_index_ = 0, target_first_index_ = 0;
  std::unique_ptr<VocabularyLossReplica> loss_;
};

std::unique_ptr<ModelReplica> TransformerNmtModel::create_replica(Device& device, ParameterSet& params,
                                                                  const ReplicaShard& shard) const {
  return checked_replica<TransformerNmtReplica>("nmt", shape_.batch, *this, device, params, shard);
}

}  // namespace

std::unique_ptr<Model> create_transformer_nmt_model(const ModelSettings& config) {
  const SequenceConfig& q = config.sequence;
  TransformerNmtShape s;
  s.src_vocab = q.src_vocab_size;
  s.tgt_vocab = q.tgt_vocab_size;
  s.encoder_layers = q.num_encoder_layers;
  s.decoder_layers = q.num_decoder_layers;
  s.src_len = q.src_max_len;
  s.tgt_len = q.tgt_max_len;
  s.layer.model_dim = q.num_units;
  s.layer.heads = q.num_heads;
  s.layer.ffn_units = q.ffn_units;
  s.layer.dropout = static_cast<float>(q.dropout);
  s.layer.type = config.activation_type();
  s.batch = config.batch_size;
  s.loss_chunk_rows = q.loss_chunk_rows;
  s.forward_only = config.forward_only;
  s.recompute_layers = config.recomputes_blocks();
  if (q.embedding_dim != q.num_units)
    throw ConfigError("--embedding_dim=" + std::to_string(q.embedding_dim) + ": differs from --num_units=" +
                      std::to_string(q.num_units) + "; the transformer's embeddings are its model width: give one of them");
  if (q.num_heads <= 0 || q.num_units % q.num_heads != 0)
    throw ConfigError("--num_heads=" + std::to_string(q.num_heads) + ": does not divide --num_units=" +
                      std::to_string(q.num_units) + "; give a divisor, e.g. 8 for 512");
  if (q.num_units / q.num_heads > kMaxAttentionHeadDim)
    throw ConfigError("--num_heads=" + std::to_string(q.num_heads) + ": leaves heads of " +
                      std::to_string(q.num_units / q.num_heads) + " units; attention takes up to " +
                      std::to_string(kMaxAttentionHeadDim) + " per head: give more heads");
  return std::make_unique<TransformerNmtModel>(s);
}

}  // namespace dpbench
