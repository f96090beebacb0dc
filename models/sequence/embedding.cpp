// Embedding tables and synthetic token data of the sequence models.
#include "models/sequence/embedding.h"

#include "engine/backend/counter_random.h"

namespace dpbench {

EmbeddingTable::EmbeddingTable(ParameterLayout& layout, const std::string& name, int vocab, int dim)
    : vocab_(vocab), dim_(dim) {
  table_id_ = layout.declare(name + "/table", {vocab, dim});
}

void EmbeddingTable::initialize(const ParameterLayout& layout, uint64_t seed,
                                std::vector<float>& host_params) const {
  const TensorView& table = layout.tensor(table_id_);
  const uint64_t stream = kRandomStreamParameters + static_cast<uint64_t>(table_id_);
  for (size_t i = 0; i < table.count; ++i)
    host_params[table.offset + i] = 0.1f * (2.0f * counter_uniform(seed, stream, i) - 1.0f);
}

void EmbeddingTable::forward(Backend& ops, const ParameterSet& params, const int32_t* ids,
                             size_t n, DataType type, void* y) const {
  ops.embedding_forward(type, params.parameter_as(table_id_, type), ids, n, dim_, y);
}

void EmbeddingTable::backward(Backend& ops, const ParameterSet& params, const int32_t* ids,
                              size_t n, DataType type, const void* dy, bool first) const {
  float* dtable = params.gradient(table_id_);
  if (first) ops.fill(dtable, static_cast<size_t>(vocab_) * dim_, 0.0f);
  ops.embedding_backward(ids, type, dy, n, dim_, dtable);
}

void fill_sequence_tokens(Backend& ops, int32_t* ids, int seq_len, const ReplicaShard& shard,
                          uint64_t stream, int vocab, bool reversed) {
  const uint64_t global_batch = static_cast<uint64_t>(shard.num_replicas) * shard.batch_size;
  for (int row = 0; row < seq_len; ++row) {
    const int t = reversed ? seq_len - 1 - row : row;
    ops.fill_labels_by_index(ids + static_cast<size_t>(row) * shard.batch_size, shard.batch_size,
                             shard.seed, stream, t * global_batch + shard.first_global_sample(), vocab);
  }
}

}  // namespace dpbench
