// Loading a sentence-per-line corpus and writing padded, masked language-model batches.
#include "engine/data/text_corpus.h"

#include <algorithm>
#include <filesystem>

#include "engine/data/text_file.h"
#include "engine/errors.h"

namespace dpbench {

std::string ptb_file_path(const std::string& directory, TextSplit split) {
  const char* name = split == TextSplit::train ? "ptb.train.txt"
                     : split == TextSplit::valid ? "ptb.valid.txt"
                                                 : "ptb.test.txt";
  return (std::filesystem::path(directory) / name).string();
}

TextCorpus TextCorpus::load(const std::string& path, const Vocabulary& vocabulary) {
  TextLineReader reader(path,
                        "expects a text of one sentence per line (PTB: ptb.train.txt, ptb.valid.txt, "
                        "ptb.test.txt in the folder given by --data_dir)");
  TextCorpus corpus;
  corpus.path_ = path;
  corpus.padding_id_ = vocabulary.padding_id();
  std::string line;
  while (reader.next(line)) {
    const std::vector<std::string> words = split_whitespace(line);
    if (words.empty()) {
      ++corpus.skipped_blank_lines_;
      continue;
    }
    corpus.ids_.push_back(vocabulary.sentence_start_id());
    for (const std::string& word : words) corpus.ids_.push_back(vocabulary.id(word));
    corpus.ids_.push_back(vocabulary.sentence_end_id());
    corpus.offsets_.push_back(static_cast<int64_t>(corpus.ids_.size()));
  }
  if (corpus.size() == 0)
    throw ConfigError("text corpus " + path + " holds no sentence: expects one sentence per line");
  return corpus;
}

void TextCorpus::check_index(int64_t index) const {
  if (index < 0 || index >= size())
    throw RuntimeError("text corpus " + path_ + ": sentence " + std::to_string(index) + " asked of " +
                       std::to_string(size()));
}

int TextCorpus::sentence_length(int64_t index) const {
  check_index(index);
  return static_cast<int>(offsets_[index + 1] - offsets_[index]);
}

std::vector<int32_t> TextCorpus::sentence(int64_t index) const {
  check_index(index);
  return {ids_.begin() + offsets_[index], ids_.begin() + offsets_[index + 1]};
}

int64_t TextCorpus::prediction_count() const {
  return static_cast<int64_t>(ids_.size()) - size();  // every token but each sentence's <bos>
}

LanguageModelBatch TextCorpus::batch(const std::vector<int64_t>& indices,
                                     const LanguageModelBatchShape& shape) const {
  if (indices.empty()) throw RuntimeError("text corpus " + path_ + ": a batch needs at least one sentence");
  if (shape.max_steps < 0 || (shape.pad_to_max_steps && shape.max_steps == 0))
    throw RuntimeError("language-model batch: pad_to_max_steps needs max_steps > 0");
  LanguageModelBatch out;
  out.batch = static_cast<int>(indices.size());
  const size_t B = indices.size();
  for (size_t b = 0; b < B; ++b) {
    int predictions = sentence_length(indices[b]) - 1;
    if (shape.max_steps > 0) predictions = std::min(predictions, shape.max_steps);
    out.lengths.push_back(predictions);
    out.target_tokens += predictions;
  }
  out.steps = shape.pad_to_max_steps ? shape.max_steps : *std::max_element(out.lengths.begin(), out.lengths.end());
  const size_t T = static_cast<size_t>(out.steps);

  out.tokens.assign((T + 1) * B, padding_id_);  // (T + 1, B)
  out.mask.assign(T * B, 0.0f);                  // (T, B)
  for (size_t b = 0; b < B; ++b) {
    const int32_t* sentence = ids_.data() + offsets_[indices[b]];
    const size_t predictions = static_cast<size_t>(out.lengths[b]);
    for (size_t t = 0; t <= predictions; ++t) out.tokens[t * B + b] = sentence[t];
    for (size_t t = 0; t < predictions; ++t) out.mask[t * B + b] = 1.0f;
  }
  return out;
}

}  // namespace dpbench
