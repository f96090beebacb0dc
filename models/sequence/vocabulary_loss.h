// The output side of a sequence model: hidden states projected onto the vocabulary (no bias) and
// softmax cross-entropy against the next tokens, forward and backward in one pass.
//
// Under mixed precision h, dh, the logits and the projection's weights (its 16-bit copy) are 16-bit
// (the GEMMs and the softmax accumulate in fp32), the projection's gradient and the loss fp32.
//
// At vocabulary 50000 the logits of a batch (38400 x 50000 floats at nmt's defaults, 7.7 GB) are
// the largest tensor of the step, so only one buffer of them exists, each row's logits become
// their gradient in place, and the two backward GEMMs consume them right there. Batches whose
// logits do not fit the budget go through in chunks of rows that reuse the buffer.
#pragma once

#include <cstdint>
#include <memory>
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

// Rows per chunk when --loss_chunk_rows is 0: as many as keep a chunk's logits within 8 GiB, which
// holds all of nmt's 38400 x 50000 and rnnlm's 25600 x 10001 at the seed defaults. Fewer, larger
// chunks re-read the projection's gradient less often (on an H200, nmt's step took 59.8 / 59.3 /
// 58.3 / 58.4 ms, means, with 2048 / 2684 / 8192 / 38400 rows per chunk), and one chunk lets the
// projection's weight gradient overlap the decoder's backward pass (see VocabularyLossReplica).
int default_loss_chunk_rows(int rows, int vocab);

// When all rows fit one chunk, the projection's weight gradient (one of the three big GEMMs) runs
// on the auxiliary stream, overlapping whatever the compute stream does next (the LSTM's backward
// pass, latency-bound by its time steps); finish_weight_gradient() joins it.
class VocabularyLossReplica {
 public:
  // `rows` hidden states per step, `chunk_rows` of them at a time (0: default_loss_chunk_rows);
  // h, dh and the logits hold `type`.
  VocabularyLossReplica(const VocabularyProjection& projection, Device& device, int rows,
                        int chunk_rows, DataType type = DataType::f32);

  // h (rows, hidden), labels (rows) ->
  //   loss_out (1) = loss_weight * sum of the rows' cross-entropies (each times row_weights[r]),
  //   dh (rows, hidden) and the projection's gradient (both overwritten), each row's gradient
  //   scaled by gradient_scale (and by row_weights[r] and *loss_scale when given).
  // row_weights: device memory (rows) or nullptr; weight 0 masks a padded token out.
  // `gradients` false (inference, --forward_only): the loss alone; dh and the projection's
  // gradient are not computed (the logits' gradient still replaces the logits in place).
  void forward_backward(const ParameterSet& params, const void* h, const int32_t* labels,
                        float loss_weight, float gradient_scale, void* dh, float* loss_out,
                        const float* loss_scale, const float* row_weights = nullptr, bool gradients = true);
  int chunk_rows() const { return chunk_rows_; }
  // The compute stream waits for the projection's weight gradient (a no-op when it was computed
  // in line); call it before announcing the projection's gradient range, every step.
  void finish_weight_gradient();

 private:
  const VocabularyProjection& projection_;
  Device& device_;
  int rows_, chunk_rows_;
  DataType type_;
  Buffer logits_;      // (chunk_rows, vocab), then its gradient
  Buffer row_losses_;  // (rows)
  bool overlap_weight_gradient_ = false;
  std::unique_ptr<Event> logits_gradient_ready_, weight_gradient_done_;
};

}  // namespace dpbench
