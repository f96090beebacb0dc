// nmt's inputs (see sequence_models.h): per replica, the source ids (and their reversed copy for
// the dynamic bidirectional encoder, or the sentences' source lengths for the transformer's
// attention masks), the decoder's Tt + 1 target ids and its Tt * B loss
// weights, synthetic (as the model draws them on the device) or from parallel text, padded to
// the model's fixed lengths with weights that mask the padding.
#include <algorithm>
#include <cstring>

#include "engine/backend/counter_random.h"
#include "engine/data/parallel_corpus.h"
#include "engine/errors.h"
#include "models/batch_source_support.h"
#include "models/sequence/sequence_models.h"

namespace dpbench {
namespace {

struct TranslationShape {
  int source_steps = 0, target_steps = 0;  // Ts; Tt decoder steps
  int source_vocab = 0, target_vocab = 0;
  bool reversed_source = false;  // nmt's dynamic bidirectional encoder reads a reversed copy
  bool source_lengths = false;   // the transformer masks each sentence's padding out of attention
};

TranslationShape translation_shape(const SequenceConfig& q) {
  return TranslationShape{q.src_max_len, q.tgt_max_len, q.src_vocab_size, q.tgt_vocab_size,
                          q.encoder_type == "dynamic" && q.direction == "bi", q.encoder_type == "transformer"};
}

class TranslationBatchSource final : public ShardedBatchSource {
 public:
  TranslationBatchSource(const TranslationShape& shape, const Sharding& sharding,
                         std::unique_ptr<ParallelCorpus> corpus, int num_buckets)
      : ShardedBatchSource(sharding), shape_(shape), corpus_(std::move(corpus)) {
    if (corpus_) read_epochs(corpus_->buckets(num_buckets));
  }

  std::string description() const override {
    if (!corpus_) return "synthetic sentence pairs, built on the host";
    return "parallel text: " + std::to_string(corpus_->size()) + " sentence pairs";
  }
  std::vector<InputSpec> inputs() const override {
    const size_t B = sharding_.batch;
    std::vector<InputSpec> specs = {{"source_ids", sizeof(int32_t) * shape_.source_steps * B}};
    if (shape_.reversed_source) specs.push_back({"reversed_source_ids", sizeof(int32_t) * shape_.source_steps * B});
    if (shape_.source_lengths) specs.push_back({"source_lengths", sizeof(int32_t) * B});
    specs.push_back({"target_ids", sizeof(int32_t) * (shape_.target_steps + 1) * B});
    specs.push_back({"target_weights", sizeof(float) * shape_.target_steps * B});
    return specs;
  }

  int64_t build(int64_t step, int replica, const std::vector<void*>& into) const override {
    const int B = sharding_.batch, Ts = shape_.source_steps, Tt = shape_.target_steps;
    size_t next = 0;
    int32_t* source = static_cast<int32_t*>(into[next++]);
    int32_t* reversed = shape_.reversed_source ? static_cast<int32_t*>(into[next++]) : nullptr;
    int32_t* lengths = shape_.source_lengths ? static_cast<int32_t*>(into[next++]) : nullptr;
    int32_t* target = static_cast<int32_t*>(into[next++]);
    float* weights = static_cast<float*>(into[next++]);
    const size_t decoder_rows = static_cast<size_t>(Tt) * B;
    if (!corpus_) {
      synthetic_tokens(source, Ts, sharding_, replica, kRandomStreamInputs, shape_.source_vocab, false);
      if (reversed) synthetic_tokens(reversed, Ts, sharding_, replica, kRandomStreamInputs, shape_.source_vocab, true);
      if (lengths) std::fill_n(lengths, B, Ts);
      synthetic_tokens(target, Tt + 1, sharding_, replica, kRandomStreamDecoderTokens, shape_.target_vocab, false);
      std::fill_n(weights, decoder_rows, 1.0f / static_cast<float>(B));
      return static_cast<int64_t>(Ts + Tt) * B;
    }
    const TranslationBatch batch = corpus_->batch(replica_examples(step, replica), TranslationBatchShape{true});
    if (batch.source_steps != Ts || batch.target_steps != Tt)
      throw RuntimeError("parallel text batch of " + std::to_string(batch.source_steps) + " x " +
                         std::to_string(batch.target_steps) + " steps for a model of " + std::to_string(Ts) +
                         " x " + std::to_string(Tt));
    std::memcpy(source, batch.source_ids.data(), sizeof(int32_t) * batch.source_ids.size());
    if (reversed)
      for (int row = 0; row < Ts; ++row)
        std::memcpy(reversed + static_cast<size_t>(row) * B,
                    batch.source_ids.data() + static_cast<size_t>(Ts - 1 - row) * B, sizeof(int32_t) * B);
    if (lengths) std::memcpy(lengths, batch.source_lengths.data(), sizeof(int32_t) * B);
    std::memcpy(target, batch.target_ids.data(), sizeof(int32_t) * batch.target_ids.size());
    // TF NMT's loss: summed over a sentence's real tokens, averaged over the sentences.
    const float per_sentence = 1.0f / static_cast<float>(B);
    for (size_t i = 0; i < decoder_rows; ++i) weights[i] = batch.target_mask[i] * per_sentence;
    return batch.words;
  }

 private:
  TranslationShape shape_;
  std::unique_ptr<ParallelCorpus> corpus_;
};

std::unique_ptr<BatchSource> parallel_text_batches(const ModelSettings& config, const Model&) {
  const DataConfig& data = config.data;
  const SequenceConfig& q = config.sequence;
  if (q.tgt_max_len < 2)
    throw ConfigError("--tgt_max_len=" + std::to_string(q.tgt_max_len) +
                      ": real text needs at least 2 decoder steps (a word and </s>)");
  const std::string source_text = under(data.data_dir, data.train_prefix + "." + data.src);
  const std::string target_text = under(data.data_dir, data.train_prefix + "." + data.tgt);
  const Vocabulary source_vocabulary =
      load_vocabulary(under(data.data_dir, data.vocab_prefix + "." + data.src), source_text, nmt_special_tokens(),
                      q.src_vocab_size, "src_vocab_size");
  const Vocabulary target_vocabulary =
      load_vocabulary(under(data.data_dir, data.vocab_prefix + "." + data.tgt), target_text, nmt_special_tokens(),
                      q.tgt_vocab_size, "tgt_vocab_size");
  // The decoder's steps are the target's words plus </s>.
  auto corpus = std::make_unique<ParallelCorpus>(ParallelCorpus::load(
      source_text, target_text, source_vocabulary, target_vocabulary,
      ParallelCorpusOptions{q.src_max_len, q.tgt_max_len - 1}));
  return std::make_unique<TranslationBatchSource>(translation_shape(q), sharding_of(config), std::move(corpus),
                                                  data.num_buckets);
}

}  // namespace

ModelInputs nmt_inputs() {
  BatchSourceFactory synthetic = [](const ModelSettings& config, const Model&) -> std::unique_ptr<BatchSource> {
    return std::make_unique<TranslationBatchSource>(translation_shape(config.sequence), sharding_of(config), nullptr,
                                                    config.data.num_buckets);
  };
  return ModelInputs{synthetic, {{"parallel_text", parallel_text_batches}}};
}

}  // namespace dpbench
