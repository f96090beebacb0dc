// nmt: the LSTM encoder-decoder of TensorFlow's NMT tutorial without attention, as the seed runs
// trained it. The decoder starts from the encoder's final states; the encoder's outputs feed
// nothing (no attention), so only its final states carry gradient back. Loss: the cross-entropy
// summed over each sentence's target tokens, averaged over the batch (TF NMT's train loss), as a
// weighted sum: every decoder step's weight is an input, 1 / B, and 0 on real text's padding.
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/backend/step_trace.h"
#include "engine/errors.h"
#include "models/model_flops.h"
#include "models/sequence/embedding.h"
#include "models/sequence/sentence_pairs.h"
#include "models/sequence/sequence_models.h"
#include "models/sequence/vocabulary_loss.h"

namespace dpbench {

void check_replica_batch(const char* model, int built_for, const ReplicaShard& shard) {
  if (shard.batch_size != built_for)
    throw RuntimeError(std::string(model) + ": built for batch " + std::to_string(built_for) +
                       " per replica, asked for " + std::to_string(shard.batch_size));
}

LstmImplementation parse_lstm_implementation(const std::string& encoder_type) {
  if (encoder_type == "cudnn_lstm") return LstmImplementation::fused;
  if (encoder_type == "dynamic") return LstmImplementation::unrolled;
  throw ConfigError("--encoder_type=" + encoder_type +
                    ": unknown LSTM implementation; accepted: cudnn_lstm, dynamic (uni, bi)");
}

namespace {

struct NmtShape {
  int src_vocab, tgt_vocab, embedding, units, encoder_layers, decoder_layers, src_len, tgt_len;
  LstmImplementation implementation;
  bool bidirectional;
  int batch;  // per replica
  int loss_chunk_rows;
  bool forward_only;  // inference: the loss computes no gradients
  DataType type;      // activations and the weight copy the ops read (--precision)
};

RnnGeometry lstm_geometry(int seq_len, int batch, int input, int units, int layers, bool bi,
                          DataType type) {
  RnnGeometry g;
  g.seq_len = seq_len;
  g.batch = batch;
  g.input_size = input;
  g.hidden_size = units;
  g.num_layers = layers;
  g.bidirectional = bi;
  g.type = type;
  return g;
}

class NmtModel final : public Model {
 public:
  explicit NmtModel(const NmtShape& s) : shape_(s) {
    const int B = s.batch;
    if (s.implementation == LstmImplementation::fused || !s.bidirectional) {
      // cuDNN's bidirectional layers: layer 2 reads the concatenation of both directions.
      const int layers = s.bidirectional ? s.encoder_layers / 2 : s.encoder_layers;
      encoders_.push_back(std::make_unique<LstmStack>(
          layout_, "encoder/lstm",
          lstm_geometry(s.src_len, B, s.embedding, s.units, layers, s.bidirectional, s.type),
          s.implementation));
    } else {
      // dynamic_rnn's bidirectional encoder: two independent stacks, one reading backwards.
      const RnnGeometry half = lstm_geometry(s.src_len, B, s.embedding, s.units, s.encoder_layers / 2, false, s.type);
      encoders_.push_back(std::make_unique<LstmStack>(layout_, "encoder/forward_lstm", half, s.implementation));
      encoders_.push_back(std::make_unique<LstmStack>(layout_, "encoder/backward_lstm", half, s.implementation));
    }
    // The source embedding is declared after the stacks although it runs before them: backward
    // finishes its gradient from the stacks' input gradients, before their weight pass (see
    // NmtReplica::backward), so in readiness order it comes before them.
    source_embedding_ = std::make_unique<EmbeddingTable>(layout_, "encoder/embedding", s.src_vocab, s.embedding);
    target_embedding_ = std::make_unique<EmbeddingTable>(layout_, "decoder/embedding", s.tgt_vocab, s.embedding);
    // The projection is declared before the decoder although it runs after it: its gradient is
    // final only once the decoder's backward pass is done (it overlaps it; see
    // VocabularyLossReplica), so in readiness order it comes second.
    projection_ = std::make_unique<VocabularyProjection>(layout_, "decoder/projection", s.units, s.tgt_vocab);
    decoder_ = std::make_unique<LstmStack>(
        layout_, "decoder/lstm",
        lstm_geometry(s.tgt_len, B, s.embedding, s.units, s.decoder_layers, false, s.type),
        s.implementation);
    layout_.finalize();
  }

  std::string name() const override { return "nmt"; }
  const ParameterLayout& layout() const override { return layout_; }
  std::string unit() const override { return "words"; }
  // Source plus target tokens, as the seed tables count words.
  int64_t items_per_sample() const override { return shape_.src_len + shape_.tgt_len; }
  // Every stack's gates (the embeddings' gradients need each stack's input gradient) and the
  // vocabulary projection of every target token.
  StepFlops flops_per_sample() const override {
    StepFlops flops;
    for (const auto& encoder : encoders_) flops += lstm_flops(encoder->geometry(), true);
    flops += lstm_flops(decoder_->geometry(), true);
    flops += matmul_flops(static_cast<double>(shape_.tgt_len) * shape_.batch, projection_->hidden(),
                          projection_->vocab(), true);
    return per_sample(flops, shape_.batch);
  }

  std::vector<float> initial_parameters(uint64_t seed) const override {
    std::vector<float> values(layout_.total_count());
    source_embedding_->initialize(layout_, seed, values);
    for (const auto& encoder : encoders_) encoder->initialize(layout_, seed, values);
    target_embedding_->initialize(layout_, seed, values);
    projection_->initialize(layout_, seed, values);
    decoder_->initialize(layout_, seed, values);
    return values;
  }

  std::unique_ptr<ModelReplica> create_replica(Device& device, ParameterSet& params,
                                               const ReplicaShard& shard) const override;

  // Units in layout order: the decoder, the projection (whose weight gradient the loss writes in
  // forward and finishes in backward), the two embeddings, the encoder's stacks (the
  // backward-in-time one first). A stack is one unit (Note [LSTM units] in lstm_stack.h). Backward
  // uses each encoder stack twice: its input and state gradients, then, after the source
  // embedding's gradient, its weight gradient.
  ParameterUnits parameter_units() const override {
    ParameterUnits units;
    units.units.push_back({"decoder", decoder_->gradient_range(layout_)});
    units.units.push_back({"projection", projection_->gradient_range(layout_)});
    units.units.push_back({"target embedding", target_embedding_->gradient_range(layout_)});
    units.units.push_back({"source embedding", source_embedding_->gradient_range(layout_)});
    for (size_t e = encoders_.size(); e-- > 0;)
      units.units.push_back({two_encoder_stacks() ? (e == 0 ? "encoder forward" : "encoder backward") : "encoder",
                             encoders_[e]->gradient_range(layout_)});
    const int stacks = static_cast<int>(encoders_.size());
    units.uses.push_back({kSourceEmbeddingUnit, UnitPass::forward, false});
    for (int e = 0; e < stacks; ++e) units.uses.push_back({encoder_unit(e), UnitPass::forward, false});
    units.uses.push_back({kTargetEmbeddingUnit, UnitPass::forward, false});
    units.uses.push_back({kDecoderUnit, UnitPass::forward, false});
    units.uses.push_back({kProjectionUnit, UnitPass::forward, true});
    units.uses.push_back({kDecoderUnit, UnitPass::backward, true});
    units.uses.push_back({kProjectionUnit, UnitPass::backward, true});
    units.uses.push_back({kTargetEmbeddingUnit, UnitPass::backward, true});
    for (int e = stacks; e-- > 0;) units.uses.push_back({encoder_unit(e), UnitPass::backward, false});
    units.uses.push_back({kSourceEmbeddingUnit, UnitPass::backward, true});
    for (int e = stacks; e-- > 0;) units.uses.push_back({encoder_unit(e), UnitPass::backward, true});
    return units;
  }
  static constexpr int kDecoderUnit = 0, kProjectionUnit = 1, kTargetEmbeddingUnit = 2, kSourceEmbeddingUnit = 3;
  // Stack `e` of encoders(): the last declared comes first in the layout.
  int encoder_unit(int e) const { return 4 + static_cast<int>(encoders_.size()) - 1 - e; }

  const NmtShape& shape() const { return shape_; }
  bool two_encoder_stacks() const { return encoders_.size() == 2; }
  const EmbeddingTable& source_embedding() const { return *source_embedding_; }
  const std::vector<std::unique_ptr<LstmStack>>& encoders() const { return encoders_; }
  const EmbeddingTable& target_embedding() const { return *target_embedding_; }
  const LstmStack& decoder() const { return *decoder_; }
  const VocabularyProjection& projection() const { return *projection_; }

 private:
  NmtShape shape_;
  ParameterLayout layout_;
  // Declared in reverse readiness order: the layout puts the decoder first, the encoder's stacks
  // last.
  std::vector<std::unique_ptr<LstmStack>> encoders_;
  std::unique_ptr<EmbeddingTable> source_embedding_;
  std::unique_ptr<EmbeddingTable> target_embedding_;
  std::unique_ptr<VocabularyProjection> projection_;
  std::unique_ptr<LstmStack> decoder_;
};

class NmtReplica final : public ModelReplica {
 public:
  NmtReplica(const NmtModel& model, Device& device, ParameterSet& params, const ReplicaShard& shard)
      : model_(model),
        device_(device),
        params_(params),
        pairs_(device, shard, model.shape().src_len, model.shape().tgt_len, model.shape().src_vocab,
               model.shape().tgt_vocab) {
    const NmtShape& s = model.shape();
    const size_t B = shard.batch_size;
    const size_t source_tokens = pairs_.source_tokens(), target_tokens = pairs_.target_tokens();
    const size_t states = static_cast<size_t>(s.decoder_layers) * B * s.units;
    const size_t element = data_type_bytes(s.type);  // of every activation, state and gradient
    Backend& ops = device.ops();
    const MemoryTag source_embedded{MemoryCategory::activations, "source embedding"},
        source_embedded_gradient{MemoryCategory::scratch, "source embedding"};
    source_embedded_ = device.allocate(element * source_tokens * s.embedding, source_embedded);
    source_embedded_gradient_ = device.allocate(element * source_tokens * s.embedding, source_embedded_gradient);
    if (model.two_encoder_stacks()) {
      reversed_source_ids_ =
          device.allocate(sizeof(int32_t) * source_tokens, MemoryTag{MemoryCategory::data, "reversed source"});
      fill_sequence_tokens(ops, reversed_source_ids_.as<int32_t>(), s.src_len, shard, kRandomStreamInputs,
                           s.src_vocab, /*reversed=*/true);
      reversed_source_embedded_ = device.allocate(element * source_tokens * s.embedding, source_embedded);
      reversed_source_embedded_gradient_ =
          device.allocate(element * source_tokens * s.embedding, source_embedded_gradient);
      encoders_.push_back(create_lstm_stack_replica(*model.encoders()[0], device, StateSlots{2, 0}));
      encoders_.push_back(create_lstm_stack_replica(*model.encoders()[1], device, StateSlots{2, 1}));
    } else {
      encoders_.push_back(create_lstm_stack_replica(*model.encoders()[0], device));
    }
    const MemoryTag target_embedded{MemoryCategory::activations, "target embedding"},
        target_embedded_gradient{MemoryCategory::scratch, "target embedding"};
    target_embedded_ = device.allocate(element * target_tokens * s.embedding, target_embedded);
    target_embedded_gradient_ = device.allocate(element * target_tokens * s.embedding, target_embedded_gradient);
    const MemoryTag encoder_states{MemoryCategory::activations, "encoder"},
        encoder_state_gradients{MemoryCategory::scratch, "encoder"};
    encoder_h_ = device.allocate(element * states, encoder_states);
    encoder_c_ = device.allocate(element * states, encoder_states);
    encoder_h_gradient_ = device.allocate(element * states, encoder_state_gradients);
    encoder_c_gradient_ = device.allocate(element * states, encoder_state_gradients);
    decoder_ = create_lstm_stack_replica(model.decoder(), device);
    decoder_output_gradient_ =
        device.allocate(element * target_tokens * s.units, MemoryTag{MemoryCategory::scratch, "decoder"});
    loss_ = std::make_unique<VocabularyLossReplica>(model.projection(), device,
                                                     static_cast<int>(target_tokens), s.loss_chunk_rows, s.type);
  }

  void forward(const StepContext& context) override {
    const NmtShape& s = model_.shape();
    Backend& ops = device_.ops();
    const size_t source_tokens = pairs_.source_tokens(), target_tokens = pairs_.target_tokens();
    {
      TracedSpan span(device_, StreamKind::compute, "encoder", "forward");
      {
        // Both readings of the source, so its table is gathered once.
        UnitScope unit(context.units, NmtModel::kSourceEmbeddingUnit, UnitPass::forward);
        model_.source_embedding().forward(ops, params_, pairs_.source_ids.as<int32_t>(), source_tokens, s.type,
                                          source_embedded_.data());
        if (encoders_.size() == 2)
          model_.source_embedding().forward(ops, params_, reversed_source_ids_.as<int32_t>(), source_tokens, s.type,
                                            reversed_source_embedded_.data());
      }
      {
        UnitScope unit(context.units, model_.encoder_unit(0), UnitPass::forward);
        encoders_[0]->forward(params_, source_embedded_.data(), nullptr, nullptr, encoder_h_.data(),
                              encoder_c_.data());
      }
      if (encoders_.size() == 2) {
        UnitScope unit(context.units, model_.encoder_unit(1), UnitPass::forward);
        encoders_[1]->forward(params_, reversed_source_embedded_.data(), nullptr, nullptr,
                              encoder_h_.data(), encoder_c_.data());
      }
    }
    {
      TracedSpan span(device_, StreamKind::compute, "decoder", "forward");
      {
        UnitScope unit(context.units, NmtModel::kTargetEmbeddingUnit, UnitPass::forward);
        model_.target_embedding().forward(ops, params_, pairs_.target_ids.as<int32_t>(), target_tokens, s.type,
                                          target_embedded_.data());
      }
      UnitScope unit(context.units, NmtModel::kDecoderUnit, UnitPass::forward);
      decoder_->forward(params_, target_embedded_.data(), encoder_h_.data(),
                        encoder_c_.data(), nullptr, nullptr);
    }
    // Sum over a sentence's tokens, mean over sentences: every token's gradient weighs 1 / B.
    TracedSpan span(device_, StreamKind::compute, "projection and loss", "forward");
    UnitScope unit(context.units, NmtModel::kProjectionUnit, UnitPass::forward);
    loss_->forward_backward(params_, decoder_->output(), pairs_.predicted_ids(), 1.0f, 1.0f,
                            decoder_output_gradient_.data(), context.loss_out, context.loss_scale,
                            pairs_.target_weights.as<float>(), !s.forward_only);
  }

  void backward(GradientAnnouncer& announcer) override {
    const NmtShape& s = model_.shape();
    Backend& ops = device_.ops();
    const ParameterLayout& layout = params_.layout();
    const size_t source_tokens = pairs_.source_tokens(), target_tokens = pairs_.target_tokens();
    UnitHooks* units = announcer.unit_hooks();
    {
      UnitScope unit(units, NmtModel::kDecoderUnit, UnitPass::backward);
      TracedSpan span(device_, StreamKind::compute, "decoder", "backward");
      decoder_->backward(params_, target_embedded_.data(), encoder_h_.data(),
                         encoder_c_.data(), decoder_output_gradient_.data(), nullptr,
                         nullptr, target_embedded_gradient_.data(),
                         encoder_h_gradient_.data(), encoder_c_gradient_.data());
      announcer.announce(model_.decoder().gradient_range(layout));
    }
    {
      UnitScope unit(units, NmtModel::kProjectionUnit, UnitPass::backward);
      TracedSpan span(device_, StreamKind::compute, "projection", "backward");
      loss_->finish_weight_gradient();
      announcer.announce(model_.projection().gradient_range(layout));
    }
    {
      UnitScope unit(units, NmtModel::kTargetEmbeddingUnit, UnitPass::backward);
      TracedSpan span(device_, StreamKind::compute, "target embedding", "backward");
      model_.target_embedding().backward(ops, params_, pairs_.target_ids.as<int32_t>(), target_tokens, s.type,
                                         target_embedded_gradient_.data(), true);
      announcer.announce(model_.target_embedding().gradient_range(layout));
    }
    // The encoder outputs feed nothing: only the final states' gradients flow back. The stacks'
    // input gradients come first, then the source embedding's gradient from them, announced before
    // the stacks' weight pass: its exchange (the table is as large as the projection) runs beside
    // that pass instead of after the step's last kernel. The stacks go in layout order (the
    // backward-in-time stack was declared last, so it comes first).
    {
      TracedSpan span(device_, StreamKind::compute, "encoder", "backward");
      if (encoders_.size() == 2) {
        UnitScope unit(units, model_.encoder_unit(1), UnitPass::backward);
        encoders_[1]->backward_data(params_, reversed_source_embedded_.data(), nullptr, nullptr, nullptr,
                                    encoder_h_gradient_.data(), encoder_c_gradient_.data(),
                                    reversed_source_embedded_gradient_.data(), nullptr, nullptr);
      }
      UnitScope unit(units, model_.encoder_unit(0), UnitPass::backward);
      encoders_[0]->backward_data(params_, source_embedded_.data(), nullptr, nullptr, nullptr,
                                  encoder_h_gradient_.data(), encoder_c_gradient_.data(),
                                  source_embedded_gradient_.data(), nullptr, nullptr);
    }
    {
      UnitScope unit(units, NmtModel::kSourceEmbeddingUnit, UnitPass::backward);
      TracedSpan span(device_, StreamKind::compute, "source embedding", "backward");
      model_.source_embedding().backward(ops, params_, pairs_.source_ids.as<int32_t>(), source_tokens, s.type,
                                         source_embedded_gradient_.data(), true);
      if (encoders_.size() == 2)
        model_.source_embedding().backward(ops, params_, reversed_source_ids_.as<int32_t>(), source_tokens, s.type,
                                           reversed_source_embedded_gradient_.data(), false);
      announcer.announce(model_.source_embedding().gradient_range(layout));
    }
    TracedSpan span(device_, StreamKind::compute, "encoder weights", "backward");
    if (encoders_.size() == 2) {
      UnitScope unit(units, model_.encoder_unit(1), UnitPass::backward);
      encoders_[1]->backward_weights(params_, reversed_source_embedded_.data(), nullptr);
      announcer.announce(model_.encoders()[1]->gradient_range(layout));
    }
    UnitScope unit(units, model_.encoder_unit(0), UnitPass::backward);
    encoders_[0]->backward_weights(params_, source_embedded_.data(), nullptr);
    announcer.announce(model_.encoders()[0]->gradient_range(layout));
  }

  std::vector<InputBuffer> inputs() const override {
    std::vector<InputBuffer> buffers = {{"source_ids", pairs_.source_ids.data(), pairs_.source_ids.bytes()}};
    if (reversed_source_ids_)
      buffers.push_back({"reversed_source_ids", reversed_source_ids_.data(), reversed_source_ids_.bytes()});
    buffers.push_back({"target_ids", pairs_.target_ids.data(), pairs_.target_ids.bytes()});
    buffers.push_back({"target_weights", pairs_.target_weights.data(), pairs_.target_weights.bytes()});
    return buffers;
  }

  // The reversed source ids (two encoder stacks) are the same tokens in another order: the
  // forward ones name every source row the step touched.
  std::vector<SparseGradientSource> sparse_gradients() const override {
    return pairs_.sparse_gradients(params_.layout(), model_.source_embedding(), model_.target_embedding());
  }

 private:
  const NmtModel& model_;
  Device& device_;
  ParameterSet& params_;
  SentencePairs pairs_;
  Buffer reversed_source_ids_;  // int32 (T, B)
  Buffer source_embedded_, reversed_source_embedded_, target_embedded_;  // (T, B, E)
  Buffer source_embedded_gradient_, reversed_source_embedded_gradient_, target_embedded_gradient_;
  Buffer encoder_h_, encoder_c_, encoder_h_gradient_, encoder_c_gradient_;  // (layers, B, H)
  Buffer decoder_output_gradient_;                                        // (T, B, H)
  std::vector<std::unique_ptr<LstmStackReplica>> encoders_;
  std::unique_ptr<LstmStackReplica> decoder_;
  std::unique_ptr<VocabularyLossReplica> loss_;
};

std::unique_ptr<ModelReplica> NmtModel::create_replica(Device& device, ParameterSet& params,
                                                       const ReplicaShard& shard) const {
  return checked_replica<NmtReplica>("nmt", shape_.batch, *this, device, params, shard);
}

}  // namespace

std::unique_ptr<Model> create_nmt_model(const ModelSettings& config) {
  const SequenceConfig& q = config.sequence;
  if (q.encoder_type == "transformer") return create_transformer_nmt_model(config);
  NmtShape s{q.src_vocab_size, q.tgt_vocab_size, q.embedding_dim, q.num_units, q.num_encoder_layers,
             q.num_decoder_layers, q.src_max_len, q.tgt_max_len,
             parse_lstm_implementation(q.encoder_type), q.direction == "bi", config.batch_size,
             q.loss_chunk_rows, config.forward_only, config.activation_type()};
  if (s.bidirectional && s.encoder_layers % 2 != 0)
    throw ConfigError("--num_encoder_layers=" + std::to_string(s.encoder_layers) +
                      ": a bidirectional encoder needs an even number of layers (half per direction); "
                      "give an even number or --direction=uni");
  if (s.decoder_layers != s.encoder_layers)
    throw ConfigError("--num_decoder_layers=" + std::to_string(s.decoder_layers) +
                      " differs from --num_encoder_layers=" + std::to_string(s.encoder_layers) +
                      ": each decoder layer starts from one encoder layer's final state; make them equal");
  return std::make_unique<NmtModel>(s);
}

}  // namespace dpbench
