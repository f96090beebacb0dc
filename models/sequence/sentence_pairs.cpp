// The token inputs of a translation replica (sentence_pairs.h).
#include "models/sequence/sentence_pairs.h"

#include "engine/backend/counter_random.h"

namespace dpbench {

SentencePairs::SentencePairs(Device& device, const ReplicaShard& shard, int source_len, int target_len,
                             int src_vocab, int tgt_vocab)
    : src_len(source_len), tgt_len(target_len), batch(shard.batch_size) {
  const size_t B = static_cast<size_t>(shard.batch_size);
  Backend& ops = device.ops();
  const MemoryTag batch_tag{MemoryCategory::data, "sentence pairs"};
  source_ids = device.allocate(sizeof(int32_t) * source_tokens(), batch_tag);
  fill_sequence_tokens(ops, source_ids.as<int32_t>(), src_len, shard, kRandomStreamInputs, src_vocab);
  target_ids = device.allocate(sizeof(int32_t) * (target_tokens() + B), batch_tag);
  fill_sequence_tokens(ops, target_ids.as<int32_t>(), tgt_len + 1, shard, kRandomStreamDecoderTokens, tgt_vocab);
  target_weights = device.allocate(sizeof(float) * target_tokens(), batch_tag);
  ops.fill(target_weights.as<float>(), target_tokens(), 1.0f / static_cast<float>(B));
}

std::vector<SparseGradientSource> SentencePairs::sparse_gradients(const ParameterLayout& layout,
                                                                  const EmbeddingTable& source,
                                                                  const EmbeddingTable& target) const {
  return {target.sparse_source(layout, target_ids.as<int32_t>(), target_tokens()),
          source.sparse_source(layout, source_ids.as<int32_t>(), source_tokens())};
}

}  // namespace dpbench
