// Language-model corpus (PTB layout): sentences as <bos> .. <eos> ids, time-major batches with
// padding, masks, lengths and counts, truncation, fixed shapes, and the file errors.
#include <catch2/catch.hpp>

#include "data_test_support.h"
#include "engine/data/text_corpus.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;

namespace {

// A 3-sentence corpus with a blank line and its vocabulary: <unk> 0, <bos> 1, <eos> 2, then
// a 3, b 4, c 5, d 6.
struct SmallPtb {
  DataTempDir dir;
  std::string path = dir.file("ptb.train.txt");
  Vocabulary vocabulary = make();

  Vocabulary make() {
    write_text(path, "a b c\n\nb a\nd\n");
    write_text(dir.file("vocab"), "a\nb\nc\nd\n");
    return Vocabulary::from_file(dir.file("vocab"), ptb_special_tokens());
  }
};

constexpr int32_t kBos = 1, kEos = 2, kA = 3, kB = 4, kC = 5, kD = 6;

}  // namespace

TEST_CASE("data: text corpus reads sentences as <bos> words <eos>", "[data]") {
  SmallPtb ptb;
  const TextCorpus corpus = TextCorpus::load(ptb.path, ptb.vocabulary);
  REQUIRE(corpus.size() == 3);
  CHECK(corpus.skipped_blank_lines() == 1);
  CHECK(corpus.sentence(0) == std::vector<int32_t>{kBos, kA, kB, kC, kEos});
  CHECK(corpus.sentence(1) == std::vector<int32_t>{kBos, kB, kA, kEos});
  CHECK(corpus.sentence(2) == std::vector<int32_t>{kBos, kD, kEos});
  CHECK(corpus.sentence_length(0) == 5);
  CHECK(corpus.prediction_count() == 4 + 3 + 2);
  CHECK(corpus.path() == ptb.path);
  CHECK_THROWS_AS(corpus.sentence(3), RuntimeError);
}

TEST_CASE("data: text corpus maps words outside the vocabulary to <unk>", "[data]") {
  SmallPtb ptb;
  write_text(ptb.dir.file("vocab_ab"), "a\nb\n");
  const Vocabulary small = Vocabulary::from_file(ptb.dir.file("vocab_ab"), ptb_special_tokens());
  const TextCorpus corpus = TextCorpus::load(ptb.path, small);
  CHECK(corpus.sentence(0) == std::vector<int32_t>{kBos, kA, kB, small.unknown_id(), kEos});
}

TEST_CASE("data: text corpus batch is time-major, padded and masked", "[data]") {
  SmallPtb ptb;
  const TextCorpus corpus = TextCorpus::load(ptb.path, ptb.vocabulary);
  const LanguageModelBatch batch = corpus.batch({0, 1, 2});
  REQUIRE(batch.batch == 3);
  REQUIRE(batch.steps == 4);  // sentence 0: a b c <eos>
  const int32_t pad = ptb.vocabulary.padding_id();
  CHECK(pad == kEos);
  // (T + 1, B): row t holds the three sentences' tokens at position t.
  CHECK(batch.tokens == std::vector<int32_t>{kBos, kBos, kBos,   //
                                             kA,   kB,   kD,     //
                                             kB,   kA,   kEos,   //
                                             kC,   kEos, pad,    //
                                             kEos, pad,  pad});
  // (T, B): 1 where row t + 1 is a real token.
  CHECK(batch.mask == std::vector<float>{1, 1, 1,  //
                                         1, 1, 1,  //
                                         1, 1, 0,  //
                                         1, 0, 0});
  CHECK(batch.lengths == std::vector<int32_t>{4, 3, 2});
  CHECK(batch.target_tokens == 9);

  // Another order, another column order; a repeated sentence is allowed.
  const LanguageModelBatch reordered = corpus.batch({2, 2});
  CHECK(reordered.steps == 2);
  CHECK(reordered.tokens == std::vector<int32_t>{kBos, kBos, kD, kD, kEos, kEos});
  CHECK(reordered.mask == std::vector<float>{1, 1, 1, 1});
  CHECK(reordered.target_tokens == 4);
}

TEST_CASE("data: text corpus truncates to max_steps and pads to a fixed shape", "[data]") {
  SmallPtb ptb;
  const TextCorpus corpus = TextCorpus::load(ptb.path, ptb.vocabulary);
  SECTION("truncation keeps <bos> and the first max_steps words") {
    const LanguageModelBatch batch = corpus.batch({0, 2}, {2, false});
    REQUIRE(batch.steps == 2);
    CHECK(batch.tokens == std::vector<int32_t>{kBos, kBos, kA, kD, kB, kEos});
    CHECK(batch.mask == std::vector<float>{1, 1, 1, 1});
    CHECK(batch.lengths == std::vector<int32_t>{2, 2});
    CHECK(batch.target_tokens == 4);
  }
  SECTION("a cap above the longest sentence changes nothing") {
    const LanguageModelBatch batch = corpus.batch({1, 2}, {10, false});
    CHECK(batch.steps == 3);
    CHECK(batch.target_tokens == 5);
  }
  SECTION("pad_to_max_steps gives every batch T = max_steps") {
    const LanguageModelBatch batch = corpus.batch({2}, {5, true});
    REQUIRE(batch.steps == 5);
    const int32_t pad = ptb.vocabulary.padding_id();
    CHECK(batch.tokens == std::vector<int32_t>{kBos, kD, kEos, pad, pad, pad});
    CHECK(batch.mask == std::vector<float>{1, 1, 0, 0, 0});
    CHECK(batch.target_tokens == 2);
  }
  CHECK_THROWS_AS(corpus.batch({0}, {0, true}), RuntimeError);
  CHECK_THROWS_AS(corpus.batch({}), RuntimeError);
}

TEST_CASE("data: text corpus pads with a dedicated padding token when the specials have one", "[data]") {
  SmallPtb ptb;
  SpecialTokens specials{{"<pad>", "<unk>", "<bos>", "<eos>"}, "<unk>", "<bos>", "<eos>", "<pad>"};
  const Vocabulary vocabulary = Vocabulary::build_from_text(ptb.path, specials);
  const TextCorpus corpus = TextCorpus::load(ptb.path, vocabulary);
  const LanguageModelBatch batch = corpus.batch({2, 1});
  // <pad> 0, <unk> 1, <bos> 2, <eos> 3, then a 4, b 5 (count 2 each, a seen first), c 6, d 7.
  CHECK(batch.tokens == std::vector<int32_t>{2, 2, 7, 5, 3, 4, 0, 3});
}

TEST_CASE("data: text corpus file errors", "[data]") {
  DataTempDir dir;
  write_text(dir.file("vocab"), "a\n");
  const Vocabulary vocabulary = Vocabulary::from_file(dir.file("vocab"), ptb_special_tokens());
  CHECK_THAT(config_error_of([&] { TextCorpus::load(ptb_file_path(dir.path(), TextSplit::valid), vocabulary); }),
             Contains("ptb.valid.txt") && Contains("--data_dir"));
  write_text(dir.file("ptb.test.txt"), "\n  \n\n");
  CHECK_THAT(config_error_of([&] { TextCorpus::load(ptb_file_path(dir.path(), TextSplit::test), vocabulary); }),
             Contains("ptb.test.txt") && Contains("no sentence"));
  CHECK(ptb_file_path("/data/ptb", TextSplit::train) == "/data/ptb/ptb.train.txt");
}
