// rnnlm's inputs (see sequence_models.h): per replica, B windows of T + 1 token ids and the T * B
// loss weights, synthetic (as the model draws them on the device) or from PTB text, padded to
// T + 1 with weights that mask the padding.
#include <algorithm>
#include <cstring>

#include "engine/backend/counter_random.h"
#include "engine/data/text_corpus.h"
#include "engine/errors.h"
#include "models/batch_source_support.h"
#include "models/sequence/sequence_models.h"

namespace dpbench {
namespace {

class LanguageModelBatchSource final : public ShardedBatchSource {
 public:
  LanguageModelBatchSource(int steps, int vocab, const Sharding& sharding, std::unique_ptr<TextCorpus> corpus)
      : ShardedBatchSource(sharding), steps_(steps), vocab_(vocab), corpus_(std::move(corpus)) {
    if (corpus_) read_epochs(corpus_->size());
  }

  std::string description() const override {
    if (!corpus_) return "synthetic token windows, built on the host";
    return "ptb: " + std::to_string(corpus_->size()) + " sentences from " + corpus_->path();
  }
  std::vector<InputSpec> inputs() const override {
    const size_t B = sharding_.batch;
    return {{"tokens", sizeof(int32_t) * (steps_ + 1) * B}, {"token_weights", sizeof(float) * steps_ * B}};
  }

  int64_t build(int64_t step, int replica, const std::vector<void*>& into) const override {
    const int B = sharding_.batch;
    const size_t predictions = static_cast<size_t>(steps_) * B;
    int32_t* tokens = static_cast<int32_t*>(into[0]);
    float* weights = static_cast<float*>(into[1]);
    if (!corpus_) {
      synthetic_tokens(tokens, steps_ + 1, sharding_, replica, kRandomStreamInputs, vocab_, false);
      std::fill_n(weights, predictions, 1.0f / static_cast<float>(predictions));
      return static_cast<int64_t>(predictions);
    }
    const GlobalBatch global = orders_->global_batch(step);
    // The mean per real token of the whole global batch: each replica's weights carry N / (the
    // global batch's predictions), and the strategies average the N replicas.
    int64_t global_predictions = 0;
    for (int64_t sentence : global)
      global_predictions += std::min(corpus_->sentence_length(sentence) - 1, steps_);
    const LanguageModelBatch batch =
        corpus_->batch(orders_->sampler().replica_shard(global, replica), LanguageModelBatchShape{steps_, true});
    std::memcpy(tokens, batch.tokens.data(), sizeof(int32_t) * batch.tokens.size());
    const float scale = static_cast<float>(sharding_.replicas) / static_cast<float>(global_predictions);
    for (size_t i = 0; i < predictions; ++i) weights[i] = batch.mask[i] * scale;
    return batch.target_tokens;
  }

 private:
  int steps_, vocab_;
  std::unique_ptr<TextCorpus> corpus_;
};

// --vocab_file as given, else under --data_dir; "" where none is given (built from the text).
std::string ptb_vocabulary_path(const DataConfig& data) {
  if (data.vocab_file.empty()) return "";
  if (file_exists(data.vocab_file)) return data.vocab_file;
  const std::string inside = under(data.data_dir, data.vocab_file);
  if (!file_exists(inside))
    throw ConfigError("--vocab_file=" + data.vocab_file + ": no such file (looked there and under " + data.data_dir +
                      ")");
  return inside;
}

std::unique_ptr<BatchSource> ptb_batches(const ModelSettings& config, const Model&) {
  const SequenceConfig& q = config.sequence;
  const std::string training = ptb_file_path(config.data.data_dir, TextSplit::train);
  const Vocabulary vocabulary = load_vocabulary(ptb_vocabulary_path(config.data), training, ptb_special_tokens(),
                                                q.vocab_size, "vocab_size");
  auto corpus = std::make_unique<TextCorpus>(TextCorpus::load(training, vocabulary));
  return std::make_unique<LanguageModelBatchSource>(q.seq_len, q.vocab_size, sharding_of(config), std::move(corpus));
}

}  // namespace

ModelInputs rnnlm_inputs() {
  BatchSourceFactory synthetic = [](const ModelSettings& config, const Model&) -> std::unique_ptr<BatchSource> {
    return std::make_unique<LanguageModelBatchSource>(config.sequence.seq_len, config.sequence.vocab_size,
                                                      sharding_of(config), nullptr);
  };
  return ModelInputs{synthetic, {{"ptb", ptb_batches}}};
}

}  // namespace dpbench
