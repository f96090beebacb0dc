// Vocabularies from TF NMT-style files or counted from a training text, and the size check
// against the model.
#include "engine/data/vocabulary.h"

#include <algorithm>

#include "engine/data/text_file.h"
#include "engine/errors.h"
#include "engine/machine/text_content.h"

namespace dpbench {

SpecialTokens nmt_special_tokens() {
  return {{"<unk>", "<s>", "</s>"}, "<unk>", "<s>", "</s>", "</s>"};
}

SpecialTokens ptb_special_tokens() {
  return {{"<unk>", "<bos>", "<eos>"}, "<unk>", "<bos>", "<eos>", "<eos>"};
}

static void check_specials(const SpecialTokens& specials) {
  for (size_t i = 0; i < specials.tokens.size(); ++i) {
    const std::string& token = specials.tokens[i];
    // A token with whitespace could never match a word of the whitespace-split text.
    if (split_whitespace(token) != std::vector<std::string>{token})
      throw ConfigError("special token \"" + token + "\" must be one word without whitespace");
    for (size_t j = 0; j < i; ++j)
      if (specials.tokens[j] == token) throw ConfigError("special token \"" + token + "\" is listed twice");
  }
  const std::pair<const char*, const std::string*> roles[] = {
      {"unknown", &specials.unknown},
      {"sentence start", &specials.sentence_start},
      {"sentence end", &specials.sentence_end},
      {"padding", &specials.padding}};
  for (const auto& [role, token] : roles)
    if (std::find(specials.tokens.begin(), specials.tokens.end(), *token) == specials.tokens.end())
      throw ConfigError(std::string("the ") + role + " token \"" + *token +
                        "\" is not one of the vocabulary's special tokens");
}

Vocabulary::Vocabulary(const SpecialTokens& specials, std::string origin)
    : specials_(specials), origin_(std::move(origin)) {
  check_specials(specials_);
  for (const std::string& token : specials_.tokens) add(token);
  unknown_id_ = ids_.at(specials_.unknown);
  start_id_ = ids_.at(specials_.sentence_start);
  end_id_ = ids_.at(specials_.sentence_end);
  padding_id_ = ids_.at(specials_.padding);
}

void Vocabulary::add(const std::string& token) {
  ids_.emplace(token, static_cast<int32_t>(tokens_.size()));
  tokens_.push_back(token);
}

int32_t Vocabulary::id(const std::string& word) const {
  const auto found = ids_.find(word);
  return found == ids_.end() ? unknown_id_ : found->second;
}

const std::string& Vocabulary::token(int32_t id) const {
  if (id < 0 || id >= size())
    throw RuntimeError("vocabulary " + origin_ + ": id " + std::to_string(id) + " outside [0, " +
                       std::to_string(size()) + ")");
  return tokens_[static_cast<size_t>(id)];
}

Vocabulary Vocabulary::from_file(const std::string& path, const SpecialTokens& specials) {
  TextLineReader reader(path, "expects a vocabulary file with one token per line");
  Vocabulary vocabulary(specials, path);
  std::unordered_map<std::string, int64_t> line_of;  // 1-based line of each token, for duplicates
  std::string line;
  while (reader.next(line)) {
    const std::string where = path + " line " + std::to_string(reader.lines_read());
    const std::vector<std::string> words = split_whitespace(line);
    if (words.empty())
      throw ConfigError("vocabulary " + where + " is blank: one token per line, no empty lines");
    if (words.size() > 1)
      throw ConfigError("vocabulary " + where + " holds " + std::to_string(words.size()) + " tokens (\"" +
                        escaped_excerpt(line) + "\"): one token per line");
    const std::string& word = words[0];
    const auto [seen, inserted] = line_of.emplace(word, reader.lines_read());
    if (!inserted)
      throw ConfigError("vocabulary " + where + " repeats \"" + escaped_excerpt(word) + "\" of line " +
                        std::to_string(seen->second) + ": every token must be listed once");
    if (!vocabulary.contains(word)) vocabulary.add(word);  // a special keeps its special id
  }
  return vocabulary;
}

Vocabulary Vocabulary::build_from_text(const std::string& path, const SpecialTokens& specials,
                                       int64_t max_size) {
  TextLineReader reader(path, "expects the training text to build the vocabulary from");
  Vocabulary vocabulary(specials, "built from " + path);
  if (max_size > 0 && max_size < vocabulary.size())
    throw ConfigError("a vocabulary of at most " + std::to_string(max_size) + " tokens cannot hold its " +
                      std::to_string(vocabulary.size()) + " special tokens");

  struct WordCount {
    std::string word;
    int64_t count;
  };
  std::vector<WordCount> counts;  // in order of first appearance
  std::unordered_map<std::string, size_t> slot;
  std::string line;
  bool any_word = false;
  while (reader.next(line)) {
    for (const std::string& word : split_whitespace(line)) {
      any_word = true;
      if (vocabulary.contains(word)) continue;  // a special token keeps its special id
      const auto [it, inserted] = slot.emplace(word, counts.size());
      if (inserted) counts.push_back({word, 0});
      ++counts[it->second].count;
    }
  }
  // Else the specials alone would make a vocabulary, and the size check would ask for their count.
  if (!any_word)
    throw ConfigError(path + " holds only blank lines; expects the training text to build the vocabulary from");
  // stable_sort keeps first-appearance order among equal counts.
  std::stable_sort(counts.begin(), counts.end(),
                   [](const WordCount& a, const WordCount& b) { return a.count > b.count; });
  for (const WordCount& entry : counts) {
    if (max_size > 0 && vocabulary.size() >= max_size) break;
    vocabulary.add(entry.word);
  }
  return vocabulary;
}

void check_vocabulary_size(const Vocabulary& vocabulary, int64_t model_vocab_size,
                           const std::string& flag_name) {
  if (vocabulary.size() == model_vocab_size) return;
  throw ConfigError("the vocabulary " + vocabulary.origin() + " has " + std::to_string(vocabulary.size()) +
                    " tokens (" + std::to_string(vocabulary.special_count()) +
                    " special) but the model was built for " + std::to_string(model_vocab_size) +
                    ": set --" + flag_name + "=" + std::to_string(vocabulary.size()));
}

}  // namespace dpbench
