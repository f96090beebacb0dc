// The output side of a sequence model: hidden states projected onto the vocabulary (no bias) and
// softmax cross-entropy against the next tokens, forward and backward in one pass.
//
// At vocabulary 50000 the logits of a batch (38400 x 50000 floats at nmt's defaults, 7.7 GB) are
// the largest tensor of the step, so they are never kept whole: the rows go through in chunks,
// and each chunk's logits become its gradient in place and are consumed by the two backward
// GEMMs before the next chunk reuses the buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/parameter_set.h"

namespace dpbench {

class VocabularyProjection {
 public:
  // Declares "<name>/weights" (vocab, hidden).
  VocabularyProjection(ParameterLayout& layout, const std::string& name, int hidden, int vocab);
  int hidden() const { return hidden_; }
  int vocab() const { return vocab_; }
  int weights_id() const { return weights_id_; }
  GradientRange gradient_range(const ParameterLayout& layout) const {
    return layout.range_of(weights_id_, weights_id_);
  }
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& host_params) const;

 private:
  int hidden_, vocab_, weights_id_;
};

// Rows per chunk when --loss_chunk_rows is 0: keeps a chunk's logits near 2 GiB (10737 of nmt's
// 38400 rows at vocabulary 50000; all of rnnlm's). Fewer, larger chunks re-read the projection's
// gradient less often: on an H200, nmt's step took 59.8 / 59.3 / 58.3 / 58.4 ms (means) with 2048 / 2684 /
// 8192 / 38400 rows per chunk.
int default_loss_chunk_rows(int rows, int vocab);

class VocabularyLossReplica {
 public:
  // `rows` hidden states per step, `chunk_rows` of them at a time (0: default_loss_chunk_rows).
  VocabularyLossReplica(const VocabularyProjection& projection, Device& device, int rows,
                        int chunk_rows);

  // h (rows, hidden), labels (rows) ->
  //   loss_out (1) = loss_weight * sum of the rows' cross-entropies,
  //   dh (rows, hidden) and the projection's gradient (both overwritten), each row's gradient
  //   scaled by gradient_scale (and by *loss_scale when given).
  void forward_backward(const ParameterSet& params, const float* h, const int32_t* labels,
                        float loss_weight, float gradient_scale, float* dh, float* loss_out,
                        const float* loss_scale);
  int chunk_rows() const { return chunk_rows_; }

 private:
  const VocabularyProjection& projection_;
  Device& device_;
  int rows_, chunk_rows_;
  Buffer logits_;      // (chunk_rows, vocab), then its gradient
  Buffer row_losses_;  // (rows)
};

}  // namespace dpbench
