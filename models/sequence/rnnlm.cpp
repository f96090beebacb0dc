// rnnlm: the LSTM language model of the seed notes (vocabulary 10001, embedding 32, two layers of
// 128 units, projection without bias, Adam). Every step reads a fresh (T + 1)-token window per
// sample and predicts tokens 1..T from tokens 0..T-1, from a zero initial state. Loss: the mean
// cross-entropy per token (its exponential is the perplexity), as a weighted sum: every token's
// weight is an input, 1 / (T * B) for synthetic data, and for real text 0 on padding and
// N / (real tokens of the global batch) elsewhere (rnnlm_inputs.cpp), so that the mean
// over N replicas is the global batch's mean per real token.
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/backend/step_trace.h"
#include "engine/errors.h"
#include "models/model_flops.h"
#include "models/sequence/embedding.h"
#include "models/sequence/sequence_models.h"
#include "models/sequence/vocabulary_loss.h"

namespace dpbench {
namespace {

struct RnnlmShape {
  int vocab, embedding, units, layers, seq_len;
  LstmImplementation implementation;
  int batch;  // per replica
  int loss_chunk_rows;
  bool forward_only;  // inference: the loss computes no gradients
  DataType type;      // activations and the weight copy the ops read (--precision)
};

class RnnlmModel final : public Model {
 public:
  explicit RnnlmModel(const RnnlmShape& s)
      : shape_(s), embedding_(layout_, "embedding", s.vocab, s.embedding) {
    RnnGeometry g;
    g.seq_len = s.seq_len;
    g.batch = s.batch;
    g.input_size = s.embedding;
    g.hidden_size = s.units;
    g.num_layers = s.layers;
    g.type = s.type;
    // Declared before the LSTM: its gradient is final only after the LSTM's backward pass, which
    // it overlaps (see VocabularyLossReplica).
    projection_ = std::make_unique<VocabularyProjection>(layout_, "projection", s.units, s.vocab);
    lstm_ = std::make_unique<LstmStack>(layout_, "lstm", g, s.implementation);
    layout_.finalize();
  }

  std::string name() const override { return "rnnlm"; }
  const ParameterLayout& layout() const override { return layout_; }
  std::string unit() const override { return "tokens"; }
  int64_t items_per_sample() const override { return shape_.seq_len; }
  // The LSTM's gates (the embedding's gradient needs its input gradient) and the vocabulary
  // projection of every token.
  StepFlops flops_per_sample() const override {
    StepFlops flops = lstm_flops(lstm_->geometry(), true);
    flops += matmul_flops(static_cast<double>(shape_.seq_len) * shape_.batch, projection_->hidden(),
                          projection_->vocab(), true);
    return per_sample(flops, shape_.batch);
  }

  std::vector<float> initial_parameters(uint64_t seed) const override {
    std::vector<float> values(layout_.total_count());
    embedding_.initialize(layout_, seed, values);
    projection_->initialize(layout_, seed, values);
    lstm_->initialize(layout_, seed, values);
    return values;
  }

  std::unique_ptr<ModelReplica> create_replica(Device& device, ParameterSet& params,
                                               const ReplicaShard& shard) const override;

  // Units in layout order: the LSTM (one unit: its layers share one weight tensor, Note [LSTM
  // units] in lstm_stack.h), the projection (whose weight gradient the loss writes in forward and
  // finishes in backward), the embedding.
  ParameterUnits parameter_units() const override {
    ParameterUnits units;
    units.units.push_back({"lstm", lstm_->gradient_range(layout_)});
    units.units.push_back({"projection", projection_->gradient_range(layout_)});
    units.units.push_back({"embedding", embedding_.gradient_range(layout_)});
    units.uses = {{kEmbeddingUnit, UnitPass::forward, false},  {kLstmUnit, UnitPass::forward, false},
                  {kProjectionUnit, UnitPass::forward, true},  {kLstmUnit, UnitPass::backward, true},
                  {kProjectionUnit, UnitPass::backward, true}, {kEmbeddingUnit, UnitPass::backward, true}};
    return units;
  }
  static constexpr int kLstmUnit = 0, kProjectionUnit = 1, kEmbeddingUnit = 2;

  const RnnlmShape& shape() const { return shape_; }
  const EmbeddingTable& embedding() const { return embedding_; }
  const LstmStack& lstm() const { return *lstm_; }
  const VocabularyProjection& projection() const { return *projection_; }

 private:
  RnnlmShape shape_;
  ParameterLayout layout_;
  EmbeddingTable embedding_;
  std::unique_ptr<VocabularyProjection> projection_;
  std::unique_ptr<LstmStack> lstm_;
};

class RnnlmReplica final : public ModelReplica {
 public:
  RnnlmReplica(const RnnlmModel& model, Device& device, ParameterSet& params, const ReplicaShard& shard)
      : model_(model), device_(device), params_(params), batch_(shard.batch_size) {
    const RnnlmShape& s = model.shape();
    const size_t tokens = static_cast<size_t>(s.seq_len) * batch_;
    tokens_ = device.allocate(sizeof(int32_t) * (tokens + batch_), MemoryTag{MemoryCategory::data, "tokens"});
    fill_sequence_tokens(device.ops(), tokens_.as<int32_t>(), s.seq_len + 1, shard, kRandomStreamInputs,
                         s.vocab);
    token_weights_ = device.allocate(sizeof(float) * tokens, MemoryTag{MemoryCategory::data, "token weights"});
    device.ops().fill(token_weights_.as<float>(), tokens, 1.0f / static_cast<float>(tokens));
    const size_t element = data_type_bytes(s.type);  // of every activation and its gradient
    const MemoryTag embedded{MemoryCategory::activations, "embedding"}, passing{MemoryCategory::scratch, "embedding"};
    embedded_ = device.allocate(element * tokens * s.embedding, embedded);
    embedded_gradient_ = device.allocate(element * tokens * s.embedding, passing);
    output_gradient_ = device.allocate(element * tokens * s.units, MemoryTag{MemoryCategory::scratch, "lstm"});
    lstm_ = create_lstm_stack_replica(model.lstm(), device);
    loss_ = std::make_unique<VocabularyLossReplica>(model.projection(), device, static_cast<int>(tokens),
                                                     s.loss_chunk_rows, s.type);
  }

  void forward(const StepContext& context) override {
    const RnnlmShape& s = model_.shape();
    const size_t tokens = static_cast<size_t>(s.seq_len) * batch_;
    {
      TracedSpan span(device_, StreamKind::compute, "embedding and lstm", "forward");
      {
        UnitScope unit(context.units, RnnlmModel::kEmbeddingUnit, UnitPass::forward);
        model_.embedding().forward(device_.ops(), params_, tokens_.as<int32_t>(), tokens, s.type,
                                   embedded_.data());
      }
      UnitScope unit(context.units, RnnlmModel::kLstmUnit, UnitPass::forward);
      lstm_->forward(params_, embedded_.data(), nullptr, nullptr, nullptr, nullptr);
    }
    TracedSpan span(device_, StreamKind::compute, "projection and loss", "forward");
    UnitScope unit(context.units, RnnlmModel::kProjectionUnit, UnitPass::forward);
    loss_->forward_backward(params_, lstm_->output(), tokens_.as<int32_t>() + batch_, 1.0f, 1.0f,
                            output_gradient_.data(), context.loss_out, context.loss_scale,
                            token_weights_.as<float>(), !s.forward_only);
  }

  void backward(GradientAnnouncer& announcer) override {
    const RnnlmShape& s = model_.shape();
    const ParameterLayout& layout = params_.layout();
    const size_t tokens = static_cast<size_t>(s.seq_len) * batch_;
    UnitHooks* units = announcer.unit_hooks();
    {
      UnitScope unit(units, RnnlmModel::kLstmUnit, UnitPass::backward);
      TracedSpan span(device_, StreamKind::compute, "lstm", "backward");
      lstm_->backward(params_, embedded_.data(), nullptr, nullptr, output_gradient_.data(), nullptr,
                      nullptr, embedded_gradient_.data(), nullptr, nullptr);
      announcer.announce(model_.lstm().gradient_range(layout));
    }
    {
      UnitScope unit(units, RnnlmModel::kProjectionUnit, UnitPass::backward);
      TracedSpan span(device_, StreamKind::compute, "projection", "backward");
      loss_->finish_weight_gradient();
      announcer.announce(model_.projection().gradient_range(layout));
    }
    UnitScope unit(units, RnnlmModel::kEmbeddingUnit, UnitPass::backward);
    TracedSpan span(device_, StreamKind::compute, "embedding", "backward");
    model_.embedding().backward(device_.ops(), params_, tokens_.as<int32_t>(), tokens, s.type,
                                embedded_gradient_.data(), true);
    announcer.announce(model_.embedding().gradient_range(layout));
  }

  std::vector<InputBuffer> inputs() const override {
    return {{"tokens", tokens_.data(), tokens_.bytes()},
            {"token_weights", token_weights_.data(), token_weights_.bytes()}};
  }

  std::vector<SparseGradientSource> sparse_gradients() const override {
    const size_t tokens = static_cast<size_t>(model_.shape().seq_len) * batch_;
    return {model_.embedding().sparse_source(params_.layout(), tokens_.as<int32_t>(), tokens)};
  }

 private:
  const RnnlmModel& model_;
  Device& device_;
  ParameterSet& params_;
  int batch_;
  Buffer tokens_;             // int32 (T + 1, B): inputs are rows [0, T), labels rows [1, T]
  Buffer token_weights_;      // (T, B): each prediction's weight in the loss
  Buffer embedded_, embedded_gradient_;  // (T, B, E)
  Buffer output_gradient_;    // (T, B, H)
  std::unique_ptr<LstmStackReplica> lstm_;
  std::unique_ptr<VocabularyLossReplica> loss_;
};

std::unique_ptr<ModelReplica> RnnlmModel::create_replica(Device& device, ParameterSet& params,
                                                         const ReplicaShard& shard) const {
  return checked_replica<RnnlmReplica>("rnnlm", shape_.batch, *this, device, params, shard);
}

}  // namespace

std::unique_ptr<Model> create_rnnlm_model(const ModelSettings& config) {
  const SequenceConfig& q = config.sequence;
  return std::make_unique<RnnlmModel>(RnnlmShape{q.vocab_size, q.embedding_dim, q.num_units, q.num_layers,
                                                 q.seq_len, parse_lstm_implementation(q.encoder_type),
                                                 config.batch_size, q.loss_chunk_rows, config.forward_only,
                                                 config.activation_type()});
}

}  // namespace dpbench
