// A language-model corpus of one sentence per line (PTB: ptb.train.txt, ptb.valid.txt,
// ptb.test.txt, as the rnnlm of the seed notes reads it), held as id sequences
// <bos> w1 .. wn <eos>, and its batches in the models' time-major layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/vocabulary.h"

namespace dpbench {

enum class TextSplit { train, valid, test };

// `directory`/ptb.<split>.txt.
std::string ptb_file_path(const std::string& directory, TextSplit split);

// How long a batch is. A sentence of n words makes n + 1 predictions (w1 .. wn, then <eos>).
struct LanguageModelBatchShape {
  // > 0: a sentence with more than max_steps predictions is truncated to its first max_steps (it
  // keeps <bos> w1 .. w_max_steps and loses the rest, <eos> included). 0: no limit.
  int max_steps = 0;
  // true: T = max_steps for every batch (a fixed shape for models built once); false: T is the
  // batch's longest sentence (after truncation).
  bool pad_to_max_steps = false;
};

struct LanguageModelBatch {
  int batch = 0;  // B sentences
  int steps = 0;  // T predictions per column
  // (T + 1, B) time-major: row t holds the B tokens at position t. The model reads rows [0, T)
  // and predicts rows [1, T]. Past a sentence's end the column holds the padding id.
  std::vector<int32_t> tokens;
  // (T, B): 1 where row t + 1 of column b is a real token (a word or <eos>), 0 for padding.
  std::vector<float> mask;
  std::vector<int32_t> lengths;  // (B): real predictions of each sentence (its mask column's sum)
  int64_t target_tokens = 0;     // the mask's sum: the tokens the loss counts
};

class TextCorpus {
 public:
  // ConfigError for a file that cannot be read (a FIFO, a folder, nothing there), an empty one, or
  // one without a sentence. Blank lines are skipped (they are no sentence); sentence i is the i-th
  // non-blank line.
  static TextCorpus load(const std::string& path, const Vocabulary& vocabulary);

  int64_t size() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  std::vector<int32_t> sentence(int64_t index) const;  // <bos> ids <eos>
  int sentence_length(int64_t index) const;            // its tokens, <bos> and <eos> included
  int64_t prediction_count() const;  // every sentence's n + 1 predictions: tokens of one epoch
  int64_t skipped_blank_lines() const { return skipped_blank_lines_; }
  const std::string& path() const { return path_; }

  // The batch of sentences `indices` (column b is sentence indices[b]).
  LanguageModelBatch batch(const std::vector<int64_t>& indices,
                           const LanguageModelBatchShape& shape = {}) const;

 private:
  void check_index(int64_t index) const;

  std::string path_;
  std::vector<int32_t> ids_;             // every sentence back to back
  std::vector<int64_t> offsets_{0};      // sentence i is ids_[offsets_[i], offsets_[i + 1])
  int32_t padding_id_ = 0;
  int64_t skipped_blank_lines_ = 0;
};

}  // namespace dpbench
