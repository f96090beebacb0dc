// Parallel corpus (nmt): pairs read as TF NMT reads them, the batch layout the nmt model expects
// (target rows <s> .. </s>, decoder reads [0, Tt) and predicts [1, Tt]), truncation, word counts,
// length buckets, and the file errors.
#include <catch2/catch.hpp>

#include <sstream>

#include "data_test_support.h"
#include "engine/data/parallel_corpus.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;

namespace {

// Source vocabulary: <unk> 0, <s> 1, </s> 2, a 3, b 4, c 5, d 6, e 7, f 8.
// Target vocabulary: <unk> 0, <s> 1, </s> 2, x 3, y 4, z 5, w 6, u 7, v 8.
struct SmallParallel {
  DataTempDir dir;
  std::string source_path = dir.file("train.en"), target_path = dir.file("train.de");
  Vocabulary source_vocabulary = vocabulary("vocab.en", "a\nb\nc\nd\ne\nf\n");
  Vocabulary target_vocabulary = vocabulary("vocab.de", "x\ny\nz\nw\nu\nv\n");

  SmallParallel() {
    // Line 3 has an empty source: TF NMT drops such a pair.
    write_text(source_path, "a b c\nd e\n\nf\n");
    write_text(target_path, "x y\nz\nw\nu v w x\n");
  }
  Vocabulary vocabulary(const std::string& name, const std::string& words) {
    write_text(dir.file(name), words);
    return Vocabulary::from_file(dir.file(name), nmt_special_tokens());
  }
  ParallelCorpus load(const ParallelCorpusOptions& options = {}) const {
    return ParallelCorpus::load(source_path, target_path, source_vocabulary, target_vocabulary, options);
  }
};

constexpr int32_t kS = 1, kE = 2;                                       // <s>, </s> (also the padding)
constexpr int32_t kA = 3, kB = 4, kC = 5, kD = 6, kEe = 7, kF = 8;      // source words
constexpr int32_t kX = 3, kY = 4, kZ = 5, kW = 6, kU = 7, kV = 8;       // target words

// `count` words "t0 t1 .." for a line of known length.
std::string words(int count) {
  std::ostringstream line;
  for (int i = 0; i < count; ++i) line << (i ? " " : "") << "t" << i;
  return line.str();
}

}  // namespace

TEST_CASE("data: parallel corpus reads pairs and drops those with an empty side", "[data]") {
  SmallParallel data;
  const ParallelCorpus corpus = data.load();
  REQUIRE(corpus.size() == 3);
  CHECK(corpus.skipped_empty_pairs() == 1);
  CHECK(corpus.source(0) == std::vector<int32_t>{kA, kB, kC});
  CHECK(corpus.target(0) == std::vector<int32_t>{kX, kY});
  CHECK(corpus.source(2) == std::vector<int32_t>{kF});
  CHECK(corpus.target(2) == std::vector<int32_t>{kU, kV, kW, kX});
  CHECK(corpus.source_length(1) == 2);
  CHECK(corpus.target_length(1) == 1);
  CHECK_THROWS_AS(corpus.source(3), RuntimeError);
}

TEST_CASE("data: parallel corpus batch matches nmt's time-major target layout", "[data]") {
  SmallParallel data;
  const TranslationBatch batch = data.load().batch({0, 1, 2});
  REQUIRE(batch.batch == 3);
  REQUIRE(batch.source_steps == 3);
  REQUIRE(batch.target_steps == 5);  // pair 2: u v w x </s>
  // (Ts, B), padded with </s> as TF NMT pads.
  CHECK(batch.source_ids == std::vector<int32_t>{kA, kD, kF,  //
                                                 kB, kEe, kE,  //
                                                 kC, kE, kE});
  CHECK(batch.source_mask == std::vector<float>{1, 1, 1, 1, 1, 0, 1, 0, 0});
  // (Tt + 1, B): row 0 <s>, then the words, then </s>, then padding.
  CHECK(batch.target_ids == std::vector<int32_t>{kS, kS, kS,  //
                                                 kX, kZ, kU,  //
                                                 kY, kE, kV,  //
                                                 kE, kE, kW,  //
                                                 kE, kE, kX,  //
                                                 kE, kE, kE});
  // (Tt, B): decoder step t predicts row t + 1; real up to and including </s>.
  CHECK(batch.target_mask == std::vector<float>{1, 1, 1,  //
                                                1, 1, 1,  //
                                                1, 0, 1,  //
                                                0, 0, 1,  //
                                                0, 0, 1});
  CHECK(batch.source_lengths == std::vector<int32_t>{3, 2, 1});
  CHECK(batch.target_lengths == std::vector<int32_t>{3, 2, 5});
  CHECK(batch.source_tokens == 6);
  CHECK(batch.target_tokens == 10);
  CHECK(batch.words == 16);
  CHECK_THROWS_AS(data.load().batch({}), RuntimeError);
}

TEST_CASE("data: parallel corpus truncates to src_max_len and tgt_max_len before <s> and </s>", "[data]") {
  SmallParallel data;
  const ParallelCorpus corpus = data.load({2, 2});
  CHECK(corpus.source(0) == std::vector<int32_t>{kA, kB});
  CHECK(corpus.target(2) == std::vector<int32_t>{kU, kV});
  const TranslationBatch batch = corpus.batch({0, 2});
  REQUIRE(batch.source_steps == 2);
  REQUIRE(batch.target_steps == 3);  // tgt_max_len words + </s>
  CHECK(batch.source_ids == std::vector<int32_t>{kA, kF, kB, kE});
  CHECK(batch.target_ids == std::vector<int32_t>{kS, kS, kX, kU, kY, kV, kE, kE});
  CHECK(batch.target_mask == std::vector<float>{1, 1, 1, 1, 1, 1});
  CHECK(batch.words == (2 + 1) + (3 + 3));

  SECTION("pad_to_max_len fixes Ts = src_max_len and Tt = tgt_max_len + 1") {
    const TranslationBatch fixed = corpus.batch({1}, {true});
    REQUIRE(fixed.source_steps == 2);
    REQUIRE(fixed.target_steps == 3);
    CHECK(fixed.source_ids == std::vector<int32_t>{kD, kEe});
    CHECK(fixed.target_ids == std::vector<int32_t>{kS, kZ, kE, kE});
    CHECK(fixed.target_mask == std::vector<float>{1, 1, 0});
    CHECK(fixed.words == 2 + 2);
    CHECK_THROWS_AS(data.load().batch({1}, {true}), RuntimeError);  // no limits to pad to
  }
  CHECK_THAT(config_error_of([&] { data.load({-1, 0}); }), Contains("--src_max_len"));
}

TEST_CASE("data: parallel corpus buckets by max(source words, target words + 1)", "[data]") {
  DataTempDir dir;
  // (source words, target words) -> length max(src, tgt + 1) -> bucket of width 10, 3 buckets
  const std::vector<std::pair<int, int>> lengths = {
      {3, 2},    // 3 -> 0
      {9, 8},    // 9 -> 0
      {9, 9},    // 10 (the decoder's </s> step) -> 1
      {15, 1},   // 15 -> 1
      {2, 19},   // 20 -> 2
      {25, 3},   // 25 -> 2
      {40, 2}};  // 40 -> min(4, 2) = 2: the last bucket takes everything longer
  std::string sources, targets;
  for (const auto& [s, t] : lengths) {
    sources += words(s) + "\n";
    targets += words(t) + "\n";
  }
  write_text(dir.file("src"), sources);
  write_text(dir.file("tgt"), targets);
  write_text(dir.file("vocab"), "t0\n");
  const Vocabulary vocabulary = Vocabulary::from_file(dir.file("vocab"), nmt_special_tokens());
  const ParallelCorpus corpus = ParallelCorpus::load(dir.file("src"), dir.file("tgt"), vocabulary, vocabulary);
  CHECK(corpus.buckets(3) == std::vector<int>{0, 0, 1, 1, 2, 2, 2});
  CHECK(corpus.buckets(5) == std::vector<int>{0, 0, 1, 1, 2, 2, 4});
  CHECK(corpus.buckets(1) == std::vector<int>{0, 0, 0, 0, 0, 0, 0});
  CHECK(corpus.buckets(100, 5) == std::vector<int>{0, 1, 2, 3, 4, 5, 8});
  CHECK(corpus.bucket(2, 3) == 1);

  // Truncation comes first: with src_max_len = tgt_max_len = 9 every pair is at most 10 long.
  const ParallelCorpus truncated =
      ParallelCorpus::load(dir.file("src"), dir.file("tgt"), vocabulary, vocabulary, {9, 9});
  CHECK(truncated.buckets(3) == std::vector<int>{0, 0, 1, 0, 1, 0, 0});
  // The words of an all-unknown 40-word line count as 40 real words.
  CHECK(corpus.batch({6}).words == 40 + 3);

  CHECK_THAT(config_error_of([&] { corpus.buckets(0); }), Contains("--num_buckets=0"));
  CHECK_THAT(config_error_of([&] { corpus.bucket(0, 2, 0); }), Contains("width 0"));
}

TEST_CASE("data: parallel corpus errors name both files and both line counts", "[data]") {
  SmallParallel data;
  write_text(data.target_path, "x y\nz\nw\nu v w x\nextra\n");
  CHECK_THAT(config_error_of([&] { data.load(); }),
             Contains(data.source_path + " has 4 lines") && Contains(data.target_path + " has 5"));
  write_text(data.target_path, "x y\n");
  CHECK_THAT(config_error_of([&] { data.load(); }),
             Contains(data.source_path + " has 4 lines") && Contains(data.target_path + " has 1"));

  CHECK_THAT(config_error_of([&] {
               ParallelCorpus::load(data.dir.file("nothing.en"), data.target_path, data.source_vocabulary,
                                    data.target_vocabulary);
             }),
             Contains("nothing.en"));
  CHECK_THAT(config_error_of([&] {
               ParallelCorpus::load(data.source_path, data.dir.file("nothing.de"), data.source_vocabulary,
                                    data.target_vocabulary);
             }),
             Contains("nothing.de"));

  write_text(data.source_path, "a\n\n");
  write_text(data.target_path, "\nx\n");
  CHECK_THAT(config_error_of([&] { data.load(); }), Contains("no pair") && Contains(data.source_path));
}
