// Vocabularies: from TF NMT-style files and built from a training text (order, specials, unknown
// words, max size), the padding convention, and every error with what its message names.
#include <catch2/catch.hpp>

#include "data_test_support.h"
#include "engine/data/vocabulary.h"

using namespace dpbench;
using dpbench::testing::config_error_of;
using dpbench::testing::DataTempDir;
using dpbench::testing::write_text;
using Catch::Matchers::Contains;

TEST_CASE("data: vocabulary presets pad with the end-of-sentence token", "[data]") {
  DataTempDir dir;
  write_text(dir.file("text"), "w\n");
  const Vocabulary nmt = Vocabulary::build_from_text(dir.file("text"), nmt_special_tokens());
  CHECK(nmt.token(0) == "<unk>");
  CHECK(nmt.token(1) == "<s>");
  CHECK(nmt.token(2) == "</s>");
  CHECK(nmt.unknown_id() == 0);
  CHECK(nmt.sentence_start_id() == 1);
  CHECK(nmt.sentence_end_id() == 2);
  CHECK(nmt.padding_id() == nmt.sentence_end_id());

  const Vocabulary ptb = Vocabulary::build_from_text(dir.file("text"), ptb_special_tokens());
  CHECK(ptb.token(1) == "<bos>");
  CHECK(ptb.token(2) == "<eos>");
  CHECK(ptb.padding_id() == ptb.sentence_end_id());
  CHECK(ptb.size() == 4);  // no row spent on padding
  CHECK(ptb.special_count() == 3);
}

TEST_CASE("data: vocabulary with a dedicated padding token puts it where the specials list it", "[data]") {
  DataTempDir dir;
  write_text(dir.file("text"), "w\n");
  SpecialTokens specials{{"<pad>", "<unk>", "<bos>", "<eos>"}, "<unk>", "<bos>", "<eos>", "<pad>"};
  const Vocabulary vocabulary = Vocabulary::build_from_text(dir.file("text"), specials);
  CHECK(vocabulary.padding_id() == 0);
  CHECK(vocabulary.unknown_id() == 1);
  CHECK(vocabulary.id("w") == 4);
  CHECK(vocabulary.size() == 5);
}

TEST_CASE("data: vocabulary from a file keeps the file's order after the specials", "[data]") {
  DataTempDir dir;
  SECTION("a TF NMT file that starts with the specials keeps their ids") {
    write_text(dir.file("vocab.en"), "<unk>\n<s>\n</s>\nhello\nworld\n");
    const Vocabulary vocabulary = Vocabulary::from_file(dir.file("vocab.en"), nmt_special_tokens());
    CHECK(vocabulary.size() == 5);
    CHECK(vocabulary.id("hello") == 3);
    CHECK(vocabulary.id("world") == 4);
    CHECK(vocabulary.token(4) == "world");
    CHECK(vocabulary.origin() == dir.file("vocab.en"));
  }
  SECTION("a file of words only gets the specials in front") {
    write_text(dir.file("vocab.en"), "hello\r\n  world \r\nthe\n");  // CRLF, spaces, last line unterminated too
    const Vocabulary vocabulary = Vocabulary::from_file(dir.file("vocab.en"), nmt_special_tokens());
    CHECK(vocabulary.size() == 6);
    CHECK(vocabulary.id("hello") == 3);
    CHECK(vocabulary.id("world") == 4);
    CHECK(vocabulary.id("the") == 5);
  }
  SECTION("a special in the middle of the file keeps its special id") {
    write_text(dir.file("vocab.en"), "hello\n<unk>\nworld");
    const Vocabulary vocabulary = Vocabulary::from_file(dir.file("vocab.en"), nmt_special_tokens());
    CHECK(vocabulary.size() == 5);
    CHECK(vocabulary.id("<unk>") == 0);
    CHECK(vocabulary.id("world") == 4);
  }
}

TEST_CASE("data: vocabulary maps unknown words to the unknown token", "[data]") {
  DataTempDir dir;
  write_text(dir.file("vocab"), "hello\n");
  const Vocabulary vocabulary = Vocabulary::from_file(dir.file("vocab"), nmt_special_tokens());
  CHECK(vocabulary.id("hello") == 3);
  CHECK(vocabulary.id("Hello") == vocabulary.unknown_id());
  CHECK(vocabulary.id("") == vocabulary.unknown_id());
  CHECK_FALSE(vocabulary.contains("Hello"));
  CHECK_THROWS_AS(vocabulary.token(4), RuntimeError);
  CHECK_THROWS_AS(vocabulary.token(-1), RuntimeError);
}

TEST_CASE("data: vocabulary built from text orders by count then first appearance", "[data]") {
  DataTempDir dir;
  // Counts: a 3, b 2, d 2 (b seen first), c 1; <unk> is a special already.
  write_text(dir.file("train.txt"), "b a c a\n  b\ta d \n<unk> d\n");
  const Vocabulary full = Vocabulary::build_from_text(dir.file("train.txt"), ptb_special_tokens());
  REQUIRE(full.size() == 7);
  CHECK(full.token(3) == "a");
  CHECK(full.token(4) == "b");
  CHECK(full.token(5) == "d");
  CHECK(full.token(6) == "c");
  CHECK(full.id("<unk>") == 0);
  CHECK(full.origin() == "built from " + dir.file("train.txt"));

  // max_size counts the specials: 5 leaves room for a and b only.
  const Vocabulary capped = Vocabulary::build_from_text(dir.file("train.txt"), ptb_special_tokens(), 5);
  CHECK(capped.size() == 5);
  CHECK(capped.id("b") == 4);
  CHECK(capped.id("d") == capped.unknown_id());
  CHECK(capped.id("c") == capped.unknown_id());
  // A cap above the corpus's words changes nothing.
  CHECK(Vocabulary::build_from_text(dir.file("train.txt"), ptb_special_tokens(), 100).size() == 7);
}

TEST_CASE("data: vocabulary file errors name the file, the line and the fix", "[data]") {
  DataTempDir dir;
  CHECK_THAT(config_error_of([&] { Vocabulary::from_file(dir.file("vocab.missing"), nmt_special_tokens()); }),
             Contains("vocab.missing") && Contains("one token per line"));

  write_text(dir.file("vocab.none"), "");
  CHECK_THAT(config_error_of([&] { Vocabulary::from_file(dir.file("vocab.none"), nmt_special_tokens()); }),
             Contains(dir.file("vocab.none") + " is empty"));

  write_text(dir.file("dup"), "a\nb\na\n");
  CHECK_THAT(config_error_of([&] { Vocabulary::from_file(dir.file("dup"), nmt_special_tokens()); }),
             Contains(dir.file("dup") + " line 3") && Contains("\"a\"") && Contains("line 1"));

  write_text(dir.file("dup_special"), "<unk>\na\n<unk>\n");
  CHECK_THAT(config_error_of([&] { Vocabulary::from_file(dir.file("dup_special"), nmt_special_tokens()); }),
             Contains("line 3") && Contains("<unk>"));

  write_text(dir.file("blank"), "a\n\nb\n");
  CHECK_THAT(config_error_of([&] { Vocabulary::from_file(dir.file("blank"), nmt_special_tokens()); }),
             Contains(dir.file("blank") + " line 2") && Contains("blank"));

  write_text(dir.file("two"), "a\nb c\n");
  CHECK_THAT(config_error_of([&] { Vocabulary::from_file(dir.file("two"), nmt_special_tokens()); }),
             Contains(dir.file("two") + " line 2") && Contains("2 tokens"));
}

TEST_CASE("data: vocabulary build errors and bad special tokens", "[data]") {
  DataTempDir dir;
  CHECK_THAT(config_error_of([&] { Vocabulary::build_from_text(dir.file("ptb.train.txt"), ptb_special_tokens()); }),
             Contains("ptb.train.txt"));
  write_text(dir.file("text"), "a b\n");
  CHECK_THAT(config_error_of([&] { Vocabulary::build_from_text(dir.file("text"), ptb_special_tokens(), 2); }),
             Contains("2") && Contains("3 special"));

  SpecialTokens missing_role = nmt_special_tokens();
  missing_role.padding = "<pad>";
  CHECK_THAT(config_error_of([&] { Vocabulary::build_from_text(dir.file("text"), missing_role); }),
             Contains("padding") && Contains("<pad>"));
  SpecialTokens repeated = nmt_special_tokens();
  repeated.tokens.push_back("<s>");
  CHECK_THAT(config_error_of([&] { Vocabulary::build_from_text(dir.file("text"), repeated); }),
             Contains("<s>") && Contains("twice"));
  SpecialTokens spaced = nmt_special_tokens();
  spaced.tokens.push_back("a b");
  CHECK_THAT(config_error_of([&] { Vocabulary::build_from_text(dir.file("text"), spaced); }),
             Contains("\"a b\""));
}

TEST_CASE("data: vocabulary size check names both sizes and the flag", "[data]") {
  DataTempDir dir;
  write_text(dir.file("vocab.de"), "x\ny\n");
  const Vocabulary vocabulary = Vocabulary::from_file(dir.file("vocab.de"), nmt_special_tokens());
  CHECK_NOTHROW(check_vocabulary_size(vocabulary, 5, "tgt_vocab_size"));
  CHECK_THAT(config_error_of([&] { check_vocabulary_size(vocabulary, 50000, "tgt_vocab_size"); }),
             Contains("vocab.de") && Contains("has 5 tokens") && Contains("50000") &&
                 Contains("--tgt_vocab_size=5"));
  CHECK_THAT(config_error_of([&] { check_vocabulary_size(vocabulary, 4, "tgt_vocab_size"); }),
             Contains("has 5 tokens") && Contains("for 4"));
}
