// Host batch sources (see batch_sources.h). The synthetic ones recompute, element for element,
// what the models' constructors draw on the device (fill_uniform_by_index, fill_labels_by_index,
// fill_sequence_tokens): the same counter-based values, the same global sample numbering.
#include "models/batch_sources.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include "engine/file_checks.h"

#include "engine/counter_random.h"
#include "engine/data/cifar10.h"
#include "engine/data/epoch_sampler.h"
#include "engine/data/parallel_corpus.h"
#include "engine/data/text_corpus.h"
#include "engine/data/vocabulary.h"
#include "engine/errors.h"
#include "models/cnn_model.h"

namespace dpbench {
namespace {

// Something is there, of whatever kind: a FIFO or folder in a vocabulary's place is then read
// (and refused with its kind named) rather than passed over as if it were absent.
bool file_exists(const std::string& path) { return inspect_path(path).kind != PathKind::missing; }

std::string under(const std::string& directory, const std::string& name) {
  if (name.empty() || name.front() == '/' || directory.empty()) return name;
  return directory + "/" + name;
}

// The epochs' global batches, shuffled once per epoch and shared by the loader threads. Loaders
// work at most a few batches apart, so the two most recent epochs are enough to keep.
class EpochOrders {
 public:
  explicit EpochOrders(EpochSampler sampler) : sampler_(std::move(sampler)) {}
  const EpochSampler& sampler() const { return sampler_; }

  // Global batch `step` of the run, epoch after epoch.
  GlobalBatch global_batch(int64_t step) const {
    const int64_t per_epoch = sampler_.batches_per_epoch();
    const uint64_t epoch = static_cast<uint64_t>(step / per_epoch);
    std::shared_ptr<const std::vector<GlobalBatch>> order;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto found = cache_.find(epoch);
      if (found != cache_.end()) order = found->second;
    }
    if (!order) {
      // Outside the lock: a shuffle of the whole data set. Two threads may both make it; the
      // orders are equal (a pure function of seed and epoch).
      order = std::make_shared<const std::vector<GlobalBatch>>(sampler_.epoch(epoch));
      std::lock_guard<std::mutex> lock(mutex_);
      cache_.emplace(epoch, order);
      while (cache_.size() > 2) cache_.erase(cache_.begin());
    }
    return (*order)[static_cast<size_t>(step % per_epoch)];
  }

 private:
  EpochSampler sampler_;
  mutable std::mutex mutex_;
  mutable std::map<uint64_t, std::shared_ptr<const std::vector<GlobalBatch>>> cache_;
};

void store_values(const std::vector<float>& values, DataType type, void* out) {
  if (type == DataType::f32) {
    std::memcpy(out, values.data(), values.size() * sizeof(float));
    return;
  }
  uint16_t* half = static_cast<uint16_t*>(out);
  for (size_t i = 0; i < values.size(); ++i)
    half[i] = type == DataType::f16 ? float_to_f16_bits(values[i]) : float_to_bf16_bits(values[i]);
}

// Synthetic token ids of one replica: row t holds the B ids of global samples r*B .. r*B + B - 1
// at position t, as fill_sequence_tokens draws them (row `row` of a reversed copy holds
// position rows - 1 - row).
void synthetic_tokens(int32_t* ids, int rows, int batch, int replicas, int replica, uint64_t seed,
                      uint64_t stream, int vocab, bool reversed) {
  const uint64_t global_batch = static_cast<uint64_t>(replicas) * batch;
  const uint64_t first_sample = static_cast<uint64_t>(replica) * batch;
  for (int row = 0; row < rows; ++row) {
    const int t = reversed ? rows - 1 - row : row;
    for (int b = 0; b < batch; ++b) {
      ids[static_cast<size_t>(row) * batch + b] = static_cast<int32_t>(
          counter_uint(seed, stream, t * global_batch + first_sample + b) % static_cast<uint32_t>(vocab));
    }
  }
}

struct Sharding {
  int batch = 1;     // per replica
  int replicas = 1;
  uint64_t seed = 0;
  bool shuffle = true;
  EpochSamplerConfig sampler() const { return EpochSamplerConfig{replicas, batch, seed, shuffle}; }
};

// ---- images ----------------------------------------------------------------------------------

class ImageBatchSource final : public BatchSource {
 public:
  ImageBatchSource(const ImageSpec& spec, DataFormat format, DataType type, const Sharding& sharding,
                   std::unique_ptr<Cifar10Dataset> data, std::string origin)
      : spec_(spec), format_(format), type_(type), sharding_(sharding), data_(std::move(data)),
        origin_(std::move(origin)) {
    if (data_) orders_ = std::make_unique<EpochOrders>(EpochSampler(data_->size(), sharding.sampler()));
  }

  std::string description() const override {
    if (!data_)
      return "synthetic " + std::to_string(spec_.width) + "x" + std::to_string(spec_.height) + "x" +
             std::to_string(spec_.channels) + " images, built on the host";
    return "cifar10 train: " + std::to_string(data_->size()) + " images from " + origin_;
  }
  std::vector<InputSpec> inputs() const override {
    return {{"images", static_cast<size_t>(sharding_.batch) * pixels() * data_type_bytes(type_)},
            {"labels", sizeof(int32_t) * sharding_.batch}};
  }
  int64_t batches_per_epoch() const override { return orders_ ? orders_->sampler().batches_per_epoch() : 0; }
  int64_t dropped_per_epoch() const override { return orders_ ? orders_->sampler().dropped_per_epoch() : 0; }

  int64_t build(int64_t step, int replica, const std::vector<void*>& into) const override {
    thread_local std::vector<float> values;
    values.resize(static_cast<size_t>(sharding_.batch) * pixels());
    int32_t* labels = static_cast<int32_t*>(into[1]);
    if (data_) {
      const std::vector<int64_t> indices = orders_->sampler().replica_shard(orders_->global_batch(step), replica);
      data_->write_images(indices, format_, values.data());
      data_->write_labels(indices, labels);
    } else {
      synthetic(replica, values.data(), labels);
    }
    store_values(values, type_, into[0]);
    return sharding_.batch;
  }

 private:
  size_t pixels() const { return static_cast<size_t>(spec_.channels) * spec_.height * spec_.width; }

  // CnnModel's synthetic images: value of logical NCHW element i of the global batch =
  // fma(2, u(i), -1), whatever the layout it is stored in.
  void synthetic(int replica, float* values, int32_t* labels) const {
    const int B = sharding_.batch, C = spec_.channels, H = spec_.height, W = spec_.width;
    const uint64_t first_sample = static_cast<uint64_t>(replica) * B;
    const uint64_t first_index = first_sample * pixels();
    size_t logical = 0;
    for (int n = 0; n < B; ++n)
      for (int c = 0; c < C; ++c)
        for (int y = 0; y < H; ++y)
          for (int x = 0; x < W; ++x, ++logical) {
            const size_t stored = format_ == DataFormat::nchw
                                      ? logical
                                      : ((static_cast<size_t>(n) * H + y) * W + x) * C + c;
            values[stored] =
                std::fma(2.0f, counter_uniform(sharding_.seed, kRandomStreamInputs, first_index + logical), -1.0f);
          }
    for (int b = 0; b < B; ++b)
      labels[b] = static_cast<int32_t>(counter_uint(sharding_.seed, kRandomStreamLabels, first_sample + b) %
                                       static_cast<uint32_t>(spec_.classes));
  }

  ImageSpec spec_;
  DataFormat format_;
  DataType type_;
  Sharding sharding_;
  std::unique_ptr<Cifar10Dataset> data_;
  std::string origin_;
  std::unique_ptr<EpochOrders> orders_;
};

// ---- language model --------------------------------------------------------------------------

class LanguageModelBatchSource final : public BatchSource {
 public:
  LanguageModelBatchSource(int steps, int vocab, const Sharding& sharding, std::unique_ptr<TextCorpus> corpus)
      : steps_(steps), vocab_(vocab), sharding_(sharding), corpus_(std::move(corpus)) {
    if (corpus_) orders_ = std::make_unique<EpochOrders>(EpochSampler(corpus_->size(), sharding.sampler()));
  }

  std::string description() const override {
    if (!corpus_) return "synthetic token windows, built on the host";
    return "ptb: " + std::to_string(corpus_->size()) + " sentences from " + corpus_->path();
  }
  std::vector<InputSpec> inputs() const override {
    const size_t B = sharding_.batch;
    return {{"tokens", sizeof(int32_t) * (steps_ + 1) * B}, {"token_weights", sizeof(float) * steps_ * B}};
  }
  int64_t batches_per_epoch() const override { return orders_ ? orders_->sampler().batches_per_epoch() : 0; }
  int64_t dropped_per_epoch() const override { return orders_ ? orders_->sampler().dropped_per_epoch() : 0; }

  int64_t build(int64_t step, int replica, const std::vector<void*>& into) const override {
    const int B = sharding_.batch;
    const size_t predictions = static_cast<size_t>(steps_) * B;
    int32_t* tokens = static_cast<int32_t*>(into[0]);
    float* weights = static_cast<float*>(into[1]);
    if (!corpus_) {
      synthetic_tokens(tokens, steps_ + 1, B, sharding_.replicas, replica, sharding_.seed, kRandomStreamInputs,
                       vocab_, false);
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
  Sharding sharding_;
  std::unique_ptr<TextCorpus> corpus_;
  std::unique_ptr<EpochOrders> orders_;
};

// ---- translation -----------------------------------------------------------------------------

struct TranslationShape {
  int source_steps = 0, target_steps = 0;  // Ts; Tt decoder steps
  int source_vocab = 0, target_vocab = 0;
  bool reversed_source = false;  // nmt's dynamic bidirectional encoder reads a reversed copy
};

class TranslationBatchSource final : public BatchSource {
 public:
  TranslationBatchSource(const TranslationShape& shape, const Sharding& sharding,
                         std::unique_ptr<ParallelCorpus> corpus, int num_buckets)
      : shape_(shape), sharding_(sharding), corpus_(std::move(corpus)) {
    if (corpus_)
      orders_ = std::make_unique<EpochOrders>(EpochSampler(corpus_->buckets(num_buckets), sharding.sampler()));
  }

  std::string description() const override {
    if (!corpus_) return "synthetic sentence pairs, built on the host";
    return "parallel text: " + std::to_string(corpus_->size()) + " sentence pairs";
  }
  std::vector<InputSpec> inputs() const override {
    const size_t B = sharding_.batch;
    std::vector<InputSpec> specs = {{"source_ids", sizeof(int32_t) * shape_.source_steps * B}};
    if (shape_.reversed_source) specs.push_back({"reversed_source_ids", sizeof(int32_t) * shape_.source_steps * B});
    specs.push_back({"target_ids", sizeof(int32_t) * (shape_.target_steps + 1) * B});
    specs.push_back({"target_weights", sizeof(float) * shape_.target_steps * B});
    return specs;
  }
  int64_t batches_per_epoch() const override { return orders_ ? orders_->sampler().batches_per_epoch() : 0; }
  int64_t dropped_per_epoch() const override { return orders_ ? orders_->sampler().dropped_per_epoch() : 0; }

  int64_t build(int64_t step, int replica, const std::vector<void*>& into) const override {
    const int B = sharding_.batch, Ts = shape_.source_steps, Tt = shape_.target_steps;
    size_t next = 0;
    int32_t* source = static_cast<int32_t*>(into[next++]);
    int32_t* reversed = shape_.reversed_source ? static_cast<int32_t*>(into[next++]) : nullptr;
    int32_t* target = static_cast<int32_t*>(into[next++]);
    float* weights = static_cast<float*>(into[next++]);
    const size_t decoder_rows = static_cast<size_t>(Tt) * B;
    if (!corpus_) {
      synthetic_tokens(source, Ts, B, sharding_.replicas, replica, sharding_.seed, kRandomStreamInputs,
                       shape_.source_vocab, false);
      if (reversed)
        synthetic_tokens(reversed, Ts, B, sharding_.replicas, replica, sharding_.seed, kRandomStreamInputs,
                         shape_.source_vocab, true);
      synthetic_tokens(target, Tt + 1, B, sharding_.replicas, replica, sharding_.seed, kRandomStreamDecoderTokens,
                       shape_.target_vocab, false);
      std::fill_n(weights, decoder_rows, 1.0f / static_cast<float>(B));
      return static_cast<int64_t>(Ts + Tt) * B;
    }
    const TranslationBatch batch = corpus_->batch(
        orders_->sampler().replica_shard(orders_->global_batch(step), replica), TranslationBatchShape{true});
    if (batch.source_steps != Ts || batch.target_steps != Tt)
      throw RuntimeError("parallel text batch of " + std::to_string(batch.source_steps) + " x " +
                         std::to_string(batch.target_steps) + " steps for a model of " + std::to_string(Ts) +
                         " x " + std::to_string(Tt));
    std::memcpy(source, batch.source_ids.data(), sizeof(int32_t) * batch.source_ids.size());
    if (reversed)
      for (int row = 0; row < Ts; ++row)
        std::memcpy(reversed + static_cast<size_t>(row) * B,
                    batch.source_ids.data() + static_cast<size_t>(Ts - 1 - row) * B, sizeof(int32_t) * B);
    std::memcpy(target, batch.target_ids.data(), sizeof(int32_t) * batch.target_ids.size());
    // TF NMT's loss: summed over a sentence's real tokens, averaged over the sentences.
    const float per_sentence = 1.0f / static_cast<float>(B);
    for (size_t i = 0; i < decoder_rows; ++i) weights[i] = batch.target_mask[i] * per_sentence;
    return batch.words;
  }

 private:
  TranslationShape shape_;
  Sharding sharding_;
  std::unique_ptr<ParallelCorpus> corpus_;
  std::unique_ptr<EpochOrders> orders_;
};

// A vocabulary file when one is there, else built from the training text (capped at the model's
// size); either way it must fit the model exactly.
Vocabulary load_vocabulary(const std::string& file, const std::string& training_text, const SpecialTokens& specials,
                           int model_size, const std::string& size_flag) {
  Vocabulary vocabulary = file_exists(file) ? Vocabulary::from_file(file, specials)
                                            : Vocabulary::build_from_text(training_text, specials, model_size);
  check_vocabulary_size(vocabulary, model_size, size_flag);
  return vocabulary;
}

}  // namespace

std::unique_ptr<BatchSource> create_batch_source(const RunConfig& config, const Model& model) {
  const DataConfig& data = config.data;
  const Sharding sharding{config.batch_size, config.world_devices(), config.seed, data.shuffle};
  const bool real = !data.data_dir.empty();
  const std::string name = model.name();
  auto wrong_data = [&](const std::string& readers) {
    return ConfigError("--data_name=" + data.data_name + " cannot feed --model=" + name + "; it feeds " + readers);
  };

  const auto* cnn = dynamic_cast<const CnnModel*>(&model);
  if (cnn != nullptr || name == "trivial") {
    const ImageSpec spec = cnn ? cnn->images() : ImageSpec{3, 32, 32, 10};
    const DataFormat format = cnn ? parse_data_format(config.data_format) : DataFormat::nchw;
    const DataType type = cnn ? config.activation_type() : DataType::f32;
    if (!real) return std::make_unique<ImageBatchSource>(spec, format, type, sharding, nullptr, "");
    if (data.data_name != "cifar10") throw wrong_data("nmt (parallel_text) or rnnlm (ptb); image models read cifar10");
    if (spec.channels != kCifar10Channels || spec.height != kCifar10Side || spec.width != kCifar10Side ||
        spec.classes != kCifar10Classes)
      throw ConfigError("--data_name=cifar10: --model=" + name + " is built for " + std::to_string(spec.width) + "x" +
                        std::to_string(spec.height) + " images and " + std::to_string(spec.classes) +
                        " classes; CIFAR-10 (32x32, 10 classes) feeds trivial, cifar10_cnn and the ResNets");
    auto dataset = std::make_unique<Cifar10Dataset>(Cifar10Dataset::load(data.data_dir, Cifar10Split::train));
    return std::make_unique<ImageBatchSource>(spec, format, type, sharding, std::move(dataset), data.data_dir);
  }

  const SequenceConfig& q = config.sequence;
  if (name == "rnnlm") {
    std::unique_ptr<TextCorpus> corpus;
    if (real) {
      if (data.data_name != "ptb") throw wrong_data("its own models; rnnlm reads ptb");
      const std::string training = ptb_file_path(data.data_dir, TextSplit::train);
      if (!data.vocab_file.empty() && !file_exists(under(data.data_dir, data.vocab_file)) &&
          !file_exists(data.vocab_file))
        throw ConfigError("--vocab_file=" + data.vocab_file + ": no such file (looked there and under " +
                          data.data_dir + ")");
      const std::string vocab_path = data.vocab_file.empty()         ? ""
                                     : file_exists(data.vocab_file) ? data.vocab_file
                                                                    : under(data.data_dir, data.vocab_file);
      const Vocabulary vocabulary =
          load_vocabulary(vocab_path, training, ptb_special_tokens(), q.vocab_size, "vocab_size");
      corpus = std::make_unique<TextCorpus>(TextCorpus::load(training, vocabulary));
    }
    return std::make_unique<LanguageModelBatchSource>(q.seq_len, q.vocab_size, sharding, std::move(corpus));
  }

  if (name == "nmt") {
    TranslationShape shape;
    shape.source_steps = q.src_max_len;
    shape.target_steps = q.tgt_max_len;
    shape.source_vocab = q.src_vocab_size;
    shape.target_vocab = q.tgt_vocab_size;
    shape.reversed_source = q.encoder_type == "dynamic" && q.direction == "bi";
    std::unique_ptr<ParallelCorpus> corpus;
    if (real) {
      if (data.data_name != "parallel_text") throw wrong_data("its own models; nmt reads parallel_text");
      if (q.tgt_max_len < 2)
        throw ConfigError("--tgt_max_len=" + std::to_string(q.tgt_max_len) +
                          ": real text needs at least 2 decoder steps (a word and </s>)");
      const std::string source_text = under(data.data_dir, data.train_prefix + "." + data.src);
      const std::string target_text = under(data.data_dir, data.train_prefix + "." + data.tgt);
      const Vocabulary source_vocabulary =
          load_vocabulary(under(data.data_dir, data.vocab_prefix + "." + data.src), source_text,
                          nmt_special_tokens(), q.src_vocab_size, "src_vocab_size");
      const Vocabulary target_vocabulary =
          load_vocabulary(under(data.data_dir, data.vocab_prefix + "." + data.tgt), target_text,
                          nmt_special_tokens(), q.tgt_vocab_size, "tgt_vocab_size");
      // The decoder's steps are the target's words plus </s>.
      corpus = std::make_unique<ParallelCorpus>(ParallelCorpus::load(
          source_text, target_text, source_vocabulary, target_vocabulary,
          ParallelCorpusOptions{q.src_max_len, q.tgt_max_len - 1}));
    }
    return std::make_unique<TranslationBatchSource>(shape, sharding, std::move(corpus), data.num_buckets);
  }
  throw ConfigError("--model=" + name + " has no host data feed");
}

}  // namespace dpbench
