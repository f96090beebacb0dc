// gpt's inputs (see gpt.h): per replica, B windows of T + 1 token ids, time-major (T + 1, B):
// synthetic (as the model draws them on the device) or windows of llm.c / nanoGPT token shards
// (--data_name=tokens), drawn afresh every step from the run's seed (engine/data/token_shards.h).
#include <memory>
#include <string>

#include "engine/backend/counter_random.h"
#include "engine/data/token_shards.h"
#include "models/batch_source_support.h"
#include "models/sequence/gpt.h"

namespace dpbench {
namespace {

class TokenWindowBatchSource final : public BatchSource {
 public:
  TokenWindowBatchSource(int seq_len, int vocab, const Sharding& sharding, std::unique_ptr<TokenShards> shards)
      : seq_len_(seq_len), vocab_(vocab), sharding_(sharding), shards_(std::move(shards)) {}

  std::string description() const override {
    return shards_ ? shards_->description() : "synthetic token windows, built on the host";
  }
  std::vector<InputSpec> inputs() const override {
    return {{"tokens", sizeof(int32_t) * static_cast<size_t>(seq_len_ + 1) * sharding_.batch}};
  }
  // Windows are drawn with replacement, as nanoGPT draws them: there are no epochs.
  int64_t batches_per_epoch() const override { return 0; }

  int64_t build(int64_t step, int replica, const std::vector<void*>& into) const override {
    int32_t* tokens = static_cast<int32_t*>(into[0]);
    if (shards_)
      shards_->write_time_major_batch(sharding_.seed, step, replica, sharding_.batch, tokens);
    else
      synthetic_tokens(tokens, seq_len_ + 1, sharding_, replica, kRandomStreamInputs, vocab_, false);
    return static_cast<int64_t>(seq_len_) * sharding_.batch;
  }

 private:
  int seq_len_, vocab_;
  Sharding sharding_;
  std::unique_ptr<TokenShards> shards_;  // null for synthetic windows
};

std::unique_ptr<BatchSource> token_shard_batches(const ModelSettings& config, const Model&) {
  const SequenceConfig& q = config.sequence;
  auto shards = std::make_unique<TokenShards>(
      TokenShards::open(config.data.data_dir, TokenSplit::train, q.seq_len + 1, q.vocab_size));
  return std::make_unique<TokenWindowBatchSource>(q.seq_len, q.vocab_size, sharding_of(config), std::move(shards));
}

}  // namespace

ModelInputs gpt_inputs() {
  BatchSourceFactory synthetic = [](const ModelSettings& config, const Model&) -> std::unique_ptr<BatchSource> {
    return std::make_unique<TokenWindowBatchSource>(config.sequence.seq_len, config.sequence.vocab_size,
                                                    sharding_of(config), nullptr);
  };
  return ModelInputs{synthetic, {{"tokens", token_shard_batches}}};
}

}  // namespace dpbench
