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

#include "engine/backend/device.h"
#include "engine/training/parameter_set.h"

namespace dpbench {

class VocabularyProjection {
 public:
  // Declares "<name>/weights" (vocab, hidden).
  VocabularyProjection(ParameterLayout& layout, const std::string& name, int hidden, int vocab);
  // A projection reading an existing (vocab, hidden) tensor and declaring nothing: the output
  // projection tied to a token embedding (GPT-2's). Its gradient is then that tensor's, which
  // the loss overwrites and the embedding's backward adds to; its owner initialises it.
  static VocabularyProjection tied_to(int weights_id, int hidden, int vocab) {
    return VocabularyProjection(weights_id, hidden, vocab);
  }
  int hidden() const { return hidden_; }
  int vocab() const { return vocab_; }
  int weights_id() const { return weights_id_; }
  GradientRange gradient_range(const ParameterLayout& layout) const {
    return layout.range_of(weights_id_, weights_id_);
  }
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& host_params) const;

 private:
  VocabularyProjection(int weights_id, int hidden, int vocab)
      : hidden_(hidden), vocab_(vocab), weights_id_(weights_id) {}

  int hidden_, vocab_, weights_id_;
};

// Rows per chunk when --loss_chunk_rows is 0: as many as keep a chunk's logits within 8 GiB, which
// holds all of nmt's 38400 x 50000 and rnnlm's 25600 x 10001 at the seed defaults. Fewer, larger
// chunks re-read the projection's gradient less often (on an H200, nmt's step took 59.8 / 59.3 /
// 58.3 / 58.4 ms, means, with 2048 / 2684 / 8192 / 38400 rows per chunk), and one chunk lets the
// projection's weight gradient overlap the decoder's backward pass (see VocabularyLossReplica).
int default_loss_chunk_rows(int rows, int vocab);

// Note [padded logits rows]
// The three GEMMs run over the vocabulary rounded up to a multiple of 16 (Vp), never over V
// itself: cuBLAS takes its vectorised tensor-core kernels only where the vocabulary's dimension
// and every row start are multiples of 16 bytes. rnnlm's 25600 x 10001 x 128 GEMMs took 3.95 ms
// of forward per step in bf16 where a vocabulary of 10008 took 1.42 (fp16: 3.00 against 1.28;
// one H200, batch 512); padding the logits' rows alone (ld 10016 over 10001 columns) left them on
// the slow kernels (4.70 ms a step). So where V is not a multiple of 16 the replica keeps the
// projection padded with zero rows (copied from the parameter each step) and the weight gradient
// in a padded scratch (its first V rows copied out): the padding logits come out 0, their
// gradients stay 0 (the softmax reads and writes the first V columns only), and they add nothing
// to dh. Two copies of V x H per step, against the GEMMs' seconds.
int padded_logits_stride(int vocab);

// The bytes of the logits a loss over `rows` rows keeps, `chunk_rows` of them at a time (0:
// default_loss_chunk_rows), of `type`: what its replica allocates (and what a model counts of
// its activations outside its blocks).
size_t loss_logits_bytes(int rows, int chunk_rows, int vocab, DataType type);

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
  int logits_stride_;  // Vp, elements between rows of the logits: Note [padded logits rows]
  DataType type_;
  Buffer logits_;      // (chunk_rows, Vp), then its gradient
  // Where V < Vp: the projection (Vp, hidden) of `type`, zero past row V, and its gradient (Vp,
  // hidden) fp32. Empty where V is a multiple of 16: the parameter and its gradient serve.
  Buffer padded_weights_, padded_gradient_;
  Buffer row_losses_;  // (rows)
  bool overlap_weight_gradient_ = false;
  std::unique_ptr<Event> logits_gradient_ready_, weight_gradient_done_;
};

}  // namespace dpbench
