// The token inputs of a translation replica, shared by nmt's LSTM and Transformer variants: the
// source sentences, the target sentences the decoder reads and predicts, and each target token's
// weight in the loss.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/backend/device.h"
#include "engine/training/model.h"
#include "models/sequence/embedding.h"

namespace dpbench {

struct SentencePairs {
  // Synthetic pairs for `shard` (real text overwrites them through the model's inputs).
  SentencePairs(Device& device, const ReplicaShard& shard, int src_len, int tgt_len, int src_vocab, int tgt_vocab);

  size_t source_tokens() const { return static_cast<size_t>(src_len) * batch; }
  size_t target_tokens() const { return static_cast<size_t>(tgt_len) * batch; }
  // Rows [1, Tt] of target_ids: the tokens the decoder predicts.
  const int32_t* predicted_ids() const { return target_ids.as<int32_t>() + batch; }

  // The embeddings' gradients as a sparse exchange sees them, the target's first (the order the
  // layout holds them in).
  std::vector<SparseGradientSource> sparse_gradients(const ParameterLayout& layout, const EmbeddingTable& source,
                                                     const EmbeddingTable& target) const;

  int src_len, tgt_len, batch;
  Buffer source_ids;      // int32 (Ts, B)
  Buffer target_ids;      // int32 (Tt + 1, B): the decoder reads tokens [0, Tt) and predicts [1, Tt]
  Buffer target_weights;  // (Tt, B): each decoder step's weight in the loss, 1 / B (0 on real text's padding)
};

}  // namespace dpbench
