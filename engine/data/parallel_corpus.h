// A parallel corpus for nmt (source and target text, line i of one translating line i of the
// other), read as TF NMT's training iterator reads it, and its batches in the models' time-major
// layout: the decoder's input is <s> + target, its expected output target + </s>.
//
// Length bucketing (TF NMT's rule as its comment states it): a pair's length is
// max(source words, decoder steps), decoder steps = target words + 1, both after truncation;
// bucket = min(length / bucket_width, num_buckets - 1). With width 10: lengths 0..9 go to
// bucket 0, 10..19 to bucket 1, ..., and everything from (num_buckets - 1) * 10 up to the last.
// (TF NMT's code took min(length / width, num_buckets), one bucket more than asked for, and a
// width of ceil(src_max_len / num_buckets) when src_max_len was set; here the width is always the
// caller's.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/vocabulary.h"

namespace dpbench {

constexpr int kDefaultBucketWidth = 10;

struct ParallelCorpusOptions {
  int src_max_len = 0;  // > 0: keep a source sentence's first src_max_len words (--src_max_len)
  int tgt_max_len = 0;  // > 0: keep a target's first tgt_max_len words, before <s> / </s> are added
};

struct TranslationBatchShape {
  // true: Ts = src_max_len and Tt = tgt_max_len + 1 for every batch (a fixed shape for models
  // built once; needs both limits set); false: the batch's longest source and target.
  bool pad_to_max_len = false;
};

struct TranslationBatch {
  int batch = 0;          // B pairs
  int source_steps = 0;   // Ts: source rows
  int target_steps = 0;   // Tt: decoder steps, the longest target's words + 1
  // (Ts, B) time-major, padded with the source padding id; mask 1 on real words.
  std::vector<int32_t> source_ids;
  std::vector<float> source_mask;
  // (Tt + 1, B) time-major, as nmt's target_ids: row 0 is <s>, rows 1 .. n the target's n words,
  // row n + 1 </s>, then the target padding id. The decoder reads rows [0, Tt) and predicts rows
  // [1, Tt]. Mask (Tt, B): 1 where row t + 1 of column b is a real word or </s>.
  std::vector<int32_t> target_ids;
  std::vector<float> target_mask;
  std::vector<int32_t> source_lengths;  // (B) source words
  std::vector<int32_t> target_lengths;  // (B) decoder steps: target words + 1 (the mask's column sums)
  int64_t source_tokens = 0;  // sum of source_lengths
  int64_t target_tokens = 0;  // sum of target_lengths: the predictions the loss counts
  // source_tokens + target_tokens: the seed tables' and TF NMT's word count (TF NMT's
  // source_sequence_length + target_sequence_length, the target counted with its </s>), which is
  // also what synthetic nmt counts per sample (src_len + tgt_len decoder steps).
  int64_t words = 0;
};

class ParallelCorpus {
 public:
  // ConfigError for a file that cannot be read (a FIFO, a folder, nothing there), an empty file,
  // files of different line counts (naming both files and counts), or no usable pair. A pair
  // with an empty (blank) side is skipped, as TF NMT filters them; pair i is the i-th pair kept.
  static ParallelCorpus load(const std::string& source_path, const std::string& target_path,
                             const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
                             const ParallelCorpusOptions& options = {});

  int64_t size() const { return static_cast<int64_t>(source_offsets_.size()) - 1; }
  int64_t skipped_empty_pairs() const { return skipped_empty_pairs_; }
  std::vector<int32_t> source(int64_t pair) const;  // source word ids, truncated
  std::vector<int32_t> target(int64_t pair) const;  // target word ids, truncated, no <s> / </s>
  int source_length(int64_t pair) const;
  int target_length(int64_t pair) const;  // target words (decoder steps - 1)

  // The pair's bucket (see the top of this file). ConfigError for num_buckets or width below 1.
  int bucket(int64_t pair, int num_buckets, int bucket_width = kDefaultBucketWidth) const;
  std::vector<int> buckets(int num_buckets, int bucket_width = kDefaultBucketWidth) const;

  // The batch of pairs `indices` (column b is pair indices[b]).
  TranslationBatch batch(const std::vector<int64_t>& indices, const TranslationBatchShape& shape = {}) const;

 private:
  void check_index(int64_t pair) const;

  std::string source_path_;
  ParallelCorpusOptions options_;
  std::vector<int32_t> source_ids_, target_ids_;  // every pair's words back to back
  std::vector<int64_t> source_offsets_{0}, target_offsets_{0};
  int32_t source_padding_id_ = 0, target_padding_id_ = 0;
  int32_t target_start_id_ = 0, target_end_id_ = 0;
  int64_t skipped_empty_pairs_ = 0;
};

}  // namespace dpbench
