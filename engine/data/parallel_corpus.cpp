// Loading parallel text (tokenise, drop empty pairs, truncate, look up ids), bucketing it by
// length, and writing padded, masked translation batches.
#include "engine/data/parallel_corpus.h"

#include <algorithm>

#include "engine/data/text_file.h"
#include "engine/errors.h"

namespace dpbench {

static const char* const kParallelHint =
    "expects source and target text of one sentence per line, line i of one translating line i of "
    "the other";

// The first max_len words (all of them for max_len 0) as ids.
static void append_ids(const std::vector<std::string>& words, int max_len, const Vocabulary& vocabulary,
                       std::vector<int32_t>& ids) {
  const size_t kept = max_len > 0 ? std::min(words.size(), static_cast<size_t>(max_len)) : words.size();
  for (size_t i = 0; i < kept; ++i) ids.push_back(vocabulary.id(words[i]));
}

ParallelCorpus ParallelCorpus::load(const std::string& source_path, const std::string& target_path,
                                    const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
                                    const ParallelCorpusOptions& options) {
  if (options.src_max_len < 0 || options.tgt_max_len < 0)
    throw ConfigError("--src_max_len and --tgt_max_len must be 0 (no limit) or positive");
  TextLineReader source_reader(source_path, kParallelHint);
  TextLineReader target_reader(target_path, kParallelHint);
  ParallelCorpus corpus;
  corpus.source_path_ = source_path;
  corpus.options_ = options;
  corpus.source_padding_id_ = source_vocabulary.padding_id();
  corpus.target_padding_id_ = target_vocabulary.padding_id();
  corpus.target_start_id_ = target_vocabulary.sentence_start_id();
  corpus.target_end_id_ = target_vocabulary.sentence_end_id();
  std::string source_line, target_line;
  for (;;) {
    const bool has_source = source_reader.next(source_line);
    const bool has_target = target_reader.next(target_line);
    if (has_source != has_target) {
      source_reader.skip_rest();  // the longer file's line count, for the message
      target_reader.skip_rest();
      throw ConfigError("parallel corpus: " + source_path + " has " + std::to_string(source_reader.lines_read()) +
                        " lines but " + target_path + " has " + std::to_string(target_reader.lines_read()) +
                        ": line i of one must translate line i of the other");
    }
    if (!has_source) break;
    const std::vector<std::string> source_words = split_whitespace(source_line);
    const std::vector<std::string> target_words = split_whitespace(target_line);
    if (source_words.empty() || target_words.empty()) {
      ++corpus.skipped_empty_pairs_;
      continue;
    }
    append_ids(source_words, options.src_max_len, source_vocabulary, corpus.source_ids_);
    append_ids(target_words, options.tgt_max_len, target_vocabulary, corpus.target_ids_);
    corpus.source_offsets_.push_back(static_cast<int64_t>(corpus.source_ids_.size()));
    corpus.target_offsets_.push_back(static_cast<int64_t>(corpus.target_ids_.size()));
  }
  if (corpus.size() == 0)
    throw ConfigError("parallel corpus " + source_path + " / " + target_path +
                      " holds no pair with both sides non-empty");
  return corpus;
}

void ParallelCorpus::check_index(int64_t pair) const {
  if (pair < 0 || pair >= size())
    throw RuntimeError("parallel corpus " + source_path_ + ": pair " + std::to_string(pair) + " asked of " +
                       std::to_string(size()));
}

int ParallelCorpus::source_length(int64_t pair) const {
  check_index(pair);
  return static_cast<int>(source_offsets_[pair + 1] - source_offsets_[pair]);
}

int ParallelCorpus::target_length(int64_t pair) const {
  check_index(pair);
  return static_cast<int>(target_offsets_[pair + 1] - target_offsets_[pair]);
}

std::vector<int32_t> ParallelCorpus::source(int64_t pair) const {
  check_index(pair);
  return {source_ids_.begin() + source_offsets_[pair], source_ids_.begin() + source_offsets_[pair + 1]};
}

std::vector<int32_t> ParallelCorpus::target(int64_t pair) const {
  check_index(pair);
  return {target_ids_.begin() + target_offsets_[pair], target_ids_.begin() + target_offsets_[pair + 1]};
}

static void check_bucketing(int num_buckets, int bucket_width) {
  if (num_buckets < 1) throw ConfigError("--num_buckets=" + std::to_string(num_buckets) + ": must be at least 1");
  if (bucket_width < 1) throw ConfigError("bucket width " + std::to_string(bucket_width) + ": must be at least 1");
}

int ParallelCorpus::bucket(int64_t pair, int num_buckets, int bucket_width) const {
  check_bucketing(num_buckets, bucket_width);
  const int length = std::max(source_length(pair), target_length(pair) + 1);  // decoder steps
  return std::min(length / bucket_width, num_buckets - 1);
}

std::vector<int> ParallelCorpus::buckets(int num_buckets, int bucket_width) const {
  std::vector<int> result(static_cast<size_t>(size()));
  for (int64_t pair = 0; pair < size(); ++pair) result[pair] = bucket(pair, num_buckets, bucket_width);
  return result;
}

TranslationBatch ParallelCorpus::batch(const std::vector<int64_t>& indices, const TranslationBatchShape& shape) const {
  if (indices.empty()) throw RuntimeError("parallel corpus: a batch needs at least one pair");
  if (shape.pad_to_max_len && (options_.src_max_len == 0 || options_.tgt_max_len == 0))
    throw RuntimeError("translation batch: pad_to_max_len needs src_max_len and tgt_max_len set");
  TranslationBatch out;
  const size_t B = indices.size();
  out.batch = static_cast<int>(B);
  for (int64_t pair : indices) {
    out.source_lengths.push_back(source_length(pair));
    out.target_lengths.push_back(target_length(pair) + 1);
  }
  for (size_t b = 0; b < B; ++b) {
    out.source_steps = std::max(out.source_steps, out.source_lengths[b]);
    out.target_steps = std::max(out.target_steps, out.target_lengths[b]);
    out.source_tokens += out.source_lengths[b];
    out.target_tokens += out.target_lengths[b];
  }
  out.words = out.source_tokens + out.target_tokens;
  if (shape.pad_to_max_len) {
    out.source_steps = options_.src_max_len;
    out.target_steps = options_.tgt_max_len + 1;
  }
  const size_t Ts = static_cast<size_t>(out.source_steps), Tt = static_cast<size_t>(out.target_steps);

  out.source_ids.assign(Ts * B, source_padding_id_);        // (Ts, B)
  out.source_mask.assign(Ts * B, 0.0f);                      // (Ts, B)
  out.target_ids.assign((Tt + 1) * B, target_padding_id_);  // (Tt + 1, B)
  out.target_mask.assign(Tt * B, 0.0f);                      // (Tt, B)
  for (size_t b = 0; b < B; ++b) {
    const int64_t pair = indices[b];
    const int32_t* source = source_ids_.data() + source_offsets_[pair];
    for (size_t t = 0; t < static_cast<size_t>(out.source_lengths[b]); ++t) {
      out.source_ids[t * B + b] = source[t];
      out.source_mask[t * B + b] = 1.0f;
    }
    const int32_t* target = target_ids_.data() + target_offsets_[pair];
    const size_t words = static_cast<size_t>(out.target_lengths[b]) - 1;
    out.target_ids[b] = target_start_id_;                                   // row 0
    for (size_t t = 0; t < words; ++t) out.target_ids[(t + 1) * B + b] = target[t];  // rows 1 .. n
    out.target_ids[(words + 1) * B + b] = target_end_id_;                   // row n + 1
    for (size_t t = 0; t <= words; ++t) out.target_mask[t * B + b] = 1.0f;  // predicts rows 1 .. n + 1
  }
  return out;
}

}  // namespace dpbench
