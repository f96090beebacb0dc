// Word <-> id tables of the sequence models' real data, as TF NMT and the PTB language models
// use them: special tokens take the first ids, then the words; a word not in the table maps to
// the unknown token.
//
// Padding convention: padded time steps hold SpecialTokens::padding. The presets pad with the
// end-of-sentence token, as TF NMT does. A padded target is masked out of the loss, and a padded
// decoder or language-model input comes after its sentence's end, so a causal LSTM's real steps
// never see it: the id only has to be a valid row and needs no row of its own. That keeps PTB at
// 10001 ids (9998 words + <unk>, <bos>, <eos>), the rnnlm's default --vocab_size. (Padded source
// steps do reach an encoder's final state unless the model stops at each source length.) A
// dedicated "<pad>" works too: list it in SpecialTokens::tokens and name it as padding.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace dpbench {

struct SpecialTokens {
  std::vector<std::string> tokens;  // ids 0 .. tokens.size() - 1, in this order
  // The roles; each names one of `tokens`.
  std::string unknown;         // what out-of-vocabulary words map to
  std::string sentence_start;  // NMT: starts the decoder's input; PTB: starts every sentence
  std::string sentence_end;    // NMT: ends the decoder's output; PTB: ends every sentence
  std::string padding;         // fills time steps past a sentence's end
};

// {"<unk>", "<s>", "</s>"}, padding "</s>": TF NMT's vocabulary files and padding.
SpecialTokens nmt_special_tokens();
// {"<unk>", "<bos>", "<eos>"}, padding "<eos>": PTB sentences as <bos> words <eos>.
SpecialTokens ptb_special_tokens();

class Vocabulary {
 public:
  // One token per line (TF NMT's vocab files). The specials come first; the file's lines follow in
  // order, except a line naming a special token (so a file that already starts with them, as
  // TF NMT's do, keeps its ids). Whitespace around a token is ignored. ConfigError for a missing
  // or empty file, a blank line, a line of two tokens, or a token listed twice.
  static Vocabulary from_file(const std::string& path, const SpecialTokens& specials);

  // Built from a training text: its whitespace tokens by descending count, ties by first
  // appearance, after the specials (a special token in the text, as PTB's "<unk>", keeps its
  // special id). max_size > 0 caps the total size, specials included; the rarer words are left
  // out and map to the unknown token. ConfigError for a missing or empty file, one of blank lines
  // only, or a max_size smaller than the number of specials.
  static Vocabulary build_from_text(const std::string& path, const SpecialTokens& specials,
                                    int64_t max_size = 0);

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t id(const std::string& word) const;  // the unknown id for a word not in the table
  bool contains(const std::string& word) const { return ids_.count(word) != 0; }
  const std::string& token(int32_t id) const;  // RuntimeError outside [0, size())

  int32_t unknown_id() const { return unknown_id_; }
  int32_t sentence_start_id() const { return start_id_; }
  int32_t sentence_end_id() const { return end_id_; }
  int32_t padding_id() const { return padding_id_; }
  int32_t special_count() const { return static_cast<int32_t>(specials_.tokens.size()); }
  // Where the table came from ("vocab.en", "built from ptb.train.txt"), for messages.
  const std::string& origin() const { return origin_; }

 private:
  Vocabulary(const SpecialTokens& specials, std::string origin);
  void add(const std::string& token);

  SpecialTokens specials_;
  std::string origin_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t unknown_id_ = 0, start_id_ = 0, end_id_ = 0, padding_id_ = 0;
};

// The model's embedding and softmax have exactly model_vocab_size rows: a vocabulary of another
// size either indexes past them or measures a model the data does not need. ConfigError naming
// both sizes, the vocabulary's origin and the flag to set (flag_name without dashes, e.g.
// "src_vocab_size").
void check_vocabulary_size(const Vocabulary& vocabulary, int64_t model_vocab_size,
                           const std::string& flag_name);

}  // namespace dpbench
