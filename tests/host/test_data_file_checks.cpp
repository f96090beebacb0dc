// The data readers against files that are not what they should be: a FIFO, a folder, a link loop
// or nothing where a data file belongs (one ConfigError naming the real cause, never a hang in
// open()), --data_dir and vocabulary flags that name the wrong kind of path, empty training
// files, and binary data where text belongs (a warning, and no raw bytes echoed in any message).
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "cli/flags.h"
#include "data_test_support.h"
#include "engine/data/cifar10.h"
#include "engine/data/parallel_corpus.h"
#include "engine/data/text_corpus.h"
#include "engine/data/text_file.h"
#include "engine/data/vocabulary.h"
#include "engine/machine/text_content.h"

using namespace dpbench;
using dpbench::testing::config_error_of;
using dpbench::testing::DataTempDir;
using dpbench::testing::finishes_without_blocking;
using dpbench::testing::make_fifo;
using dpbench::testing::write_bytes;
using dpbench::testing::write_text;
using Catch::Matchers::Contains;

namespace {

// The ConfigError `action` throws, from a call that must not block on `fifos`.
std::string error_without_blocking(const std::function<void()>& action, const std::vector<std::string>& fifos) {
  std::string message = "(no ConfigError)";
  const bool finished = finishes_without_blocking(
      [&] {
        try {
          action();
        } catch (const ConfigError& error) {
          message = error.what();
        }
      },
      fifos);
  return finished ? message : "(blocked)";
}

std::string flag_error(const std::vector<std::string>& args) {
  return config_error_of([&] { parse_run_flags(args, DeviceInventory{8, ""}); });
}

std::vector<uint8_t> random_bytes(size_t count) {
  std::mt19937 random(11);
  std::vector<uint8_t> bytes(count);
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(random());
  return bytes;
}

// Collects the data warnings while alive (and forgets which files were warned about already).
struct CapturedWarnings {
  std::vector<std::string> lines;
  DataWarningHandler previous;
  CapturedWarnings() {
    previous = set_data_warning_handler([this](const std::string& warning) { lines.push_back(warning); });
  }
  ~CapturedWarnings() { set_data_warning_handler(previous); }
};

}  // namespace

TEST_CASE("data: a FIFO in place of a data file is named as one, without blocking", "[data]") {
  DataTempDir dir;
  const std::vector<uint8_t> record(3073, 1);
  for (const char* name : {"data_batch_1.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"})
    write_bytes(dir.file(name), record);
  const std::string cifar_fifo = dir.file("data_batch_2.bin");
  const std::string text_fifo = dir.file("ptb.train.txt");
  const std::string target_fifo = dir.file("train.tgt");
  const std::string vocab_fifo = dir.file("vocab.txt");
  for (const std::string& fifo : {cifar_fifo, text_fifo, target_fifo, vocab_fifo}) make_fifo(fifo);
  write_text(dir.file("train.src"), "a b\n");
  write_text(dir.file("words"), "a\nb\n");
  const Vocabulary vocabulary = Vocabulary::from_file(dir.file("words"), ptb_special_tokens());
  const std::vector<std::string> fifos = {cifar_fifo, text_fifo, target_fifo, vocab_fifo};
  const std::string is_fifo = " is a FIFO (named pipe), not a regular file";

  CHECK_THAT(error_without_blocking([&] { Cifar10Dataset::load(dir.path(), Cifar10Split::train); }, fifos),
             Contains("CIFAR-10: " + cifar_fifo + is_fifo) && Contains("--data_dir"));
  CHECK_THAT(error_without_blocking([&] { TextCorpus::load(text_fifo, vocabulary); }, fifos),
             Contains(text_fifo + is_fifo) && Contains("one sentence per line"));
  CHECK_THAT(error_without_blocking([&] { Vocabulary::build_from_text(text_fifo, ptb_special_tokens()); }, fifos),
             Contains(text_fifo + is_fifo));
  CHECK_THAT(error_without_blocking(
                 [&] { ParallelCorpus::load(dir.file("train.src"), target_fifo, vocabulary, vocabulary); }, fifos),
             Contains(target_fifo + is_fifo));
  CHECK_THAT(error_without_blocking([&] { Vocabulary::from_file(vocab_fifo, ptb_special_tokens()); }, fifos),
             Contains(vocab_fifo + is_fifo) && Contains("one token per line"));

  // Through the flags: --vocab_file names the FIFO; a FIFO where the NMT vocabulary belongs is
  // not silently passed over for a vocabulary built from the text.
  const std::vector<std::string> rnnlm = {"--model=rnnlm", "--data_dir=" + dir.path(), "--vocab_file=vocab.txt"};
  std::string message;
  REQUIRE(finishes_without_blocking([&] { message = flag_error(rnnlm); }, fifos));
  CHECK_THAT(message, Contains("--vocab_file=vocab.txt: " + vocab_fifo + is_fifo));
  make_fifo(dir.file("vocab.src"));
  const std::vector<std::string> nmt = {"--model=nmt", "--data_dir=" + dir.path()};
  REQUIRE(finishes_without_blocking([&] { message = flag_error(nmt); }, {dir.file("vocab.src")}));
  CHECK_THAT(message, Contains("--vocab_prefix=vocab: " + dir.file("vocab.src") + is_fifo));

  // A whole run ends with exit code 2, not a hang.
  int exit_code = -1;
  const std::vector<std::string> run = {"--model=trivial", "--device=cpu", "--data_dir=" + dir.path(),
                                        "--batch_size=1", "--result_file=" + dir.file("never.json")};
  REQUIRE(finishes_without_blocking([&] { exit_code = testing::run_cli(run); }, fifos));
  CHECK(exit_code == 2);
}

TEST_CASE("data: a folder, a link loop or nothing where a data file belongs says which", "[data]") {
  DataTempDir dir;
  std::filesystem::create_directories(dir.file("ptb.train.txt"));
  std::filesystem::create_symlink("loop.txt", dir.file("loop.txt"));
  write_text(dir.file("words"), "a\n");
  const Vocabulary vocabulary = Vocabulary::from_file(dir.file("words"), ptb_special_tokens());
  CHECK_THAT(config_error_of([&] { TextCorpus::load(dir.file("ptb.train.txt"), vocabulary); }),
             Contains(dir.file("ptb.train.txt") + " is a directory, not a regular file"));
  CHECK_THAT(config_error_of([&] { TextCorpus::load(dir.file("loop.txt"), vocabulary); }),
             Contains(dir.file("loop.txt") + " is a loop of symbolic links"));
  // A missing file still says so, with what was expected there.
  CHECK_THAT(config_error_of([&] { TextCorpus::load(dir.file("ptb.valid.txt"), vocabulary); }),
             Contains(dir.file("ptb.valid.txt") + " does not exist; expects a text of one sentence per line") &&
                 Contains("--data_dir"));
  CHECK_THAT(config_error_of([&] { Cifar10Dataset::load(dir.path(), Cifar10Split::test); }),
             Contains(dir.file("test_batch.bin") + " does not exist; expects the CIFAR-10 binary version"));
}

TEST_CASE("data: --data_dir names a regular file, a link loop or a missing folder as such", "[data]") {
  DataTempDir dir;
  write_text(dir.file("file"), "x\n");
  std::filesystem::create_symlink("loop", dir.file("loop"));
  CHECK(flag_error({"--data_dir=" + dir.file("file")}) ==
        "--data_dir=" + dir.file("file") +
            ": it is a regular file, not a folder; give the folder that holds the data set's files");
  CHECK_THAT(flag_error({"--data_dir=" + dir.file("loop")}), Contains(": it is a loop of symbolic links;"));
  CHECK_THAT(flag_error({"--data_dir=" + dir.file("nowhere")}), Contains(": it does not exist;"));
  make_fifo(dir.file("fifo"));
  std::string message;
  REQUIRE(finishes_without_blocking([&] { message = flag_error({"--data_dir=" + dir.file("fifo")}); },
                                    {dir.file("fifo")}));
  CHECK_THAT(message, Contains(": it is a FIFO (named pipe), not a folder;"));
}

TEST_CASE("data: empty training, source, target and vocabulary files say they are empty", "[data]") {
  DataTempDir dir;
  write_text(dir.file("ptb.train.txt"), "");
  write_text(dir.file("blank.txt"), "\n \n\t\n");
  write_text(dir.file("words"), "a\n");
  write_text(dir.file("train.src"), "a b\n");
  write_text(dir.file("empty.tgt"), "");
  write_text(dir.file("vocab.none"), "");
  const Vocabulary vocabulary = Vocabulary::from_file(dir.file("words"), ptb_special_tokens());
  // Once the vocabulary was three special tokens, and the size check asked for --vocab_size=3.
  CHECK_THAT(config_error_of([&] { Vocabulary::build_from_text(dir.file("ptb.train.txt"), ptb_special_tokens()); }),
             Contains(dir.file("ptb.train.txt") + " is empty; expects the training text"));
  CHECK_THAT(config_error_of([&] { Vocabulary::build_from_text(dir.file("blank.txt"), ptb_special_tokens()); }),
             Contains(dir.file("blank.txt") + " holds only blank lines"));
  CHECK_THAT(config_error_of([&] { TextCorpus::load(dir.file("ptb.train.txt"), vocabulary); }),
             Contains(dir.file("ptb.train.txt") + " is empty"));
  CHECK_THAT(config_error_of([&] {
               ParallelCorpus::load(dir.file("train.src"), dir.file("empty.tgt"), vocabulary, vocabulary);
             }),
             Contains(dir.file("empty.tgt") + " is empty"));
  CHECK_THAT(config_error_of([&] {
               ParallelCorpus::load(dir.file("empty.tgt"), dir.file("train.src"), vocabulary, vocabulary);
             }),
             Contains(dir.file("empty.tgt") + " is empty"));
  CHECK_THAT(config_error_of([&] { Vocabulary::from_file(dir.file("vocab.none"), nmt_special_tokens()); }),
             Contains(dir.file("vocab.none") + " is empty; expects a vocabulary file"));
}

TEST_CASE("data: a text corpus of binary data is warned about once", "[data]") {
  DataTempDir dir;
  CapturedWarnings warnings;
  const std::string binary = dir.file("ptb.train.txt");
  write_bytes(binary, random_bytes(size_t{1} << 20));
  const Vocabulary vocabulary = Vocabulary::build_from_text(binary, ptb_special_tokens());
  TextCorpus::load(binary, vocabulary);  // the same file again: no second warning
  REQUIRE(warnings.lines.size() == 1);
  CHECK_THAT(warnings.lines[0], Contains(binary + " looks like binary data (") &&
                                    Contains("% of its first MiB is not text); is it the right file?"));

  // Text passes, in UTF-8 or with a few Latin-1 accents; a small binary file is named for all of it.
  write_text(dir.file("text.txt"), "der Bäcker backt \xC3\xA9\xE2\x82\xAC Brötchen\r\nnaïve caf\xE9 text\n");
  Vocabulary::build_from_text(dir.file("text.txt"), ptb_special_tokens());
  CHECK(warnings.lines.size() == 1);
  write_bytes(dir.file("small.tgt"), random_bytes(1000));
  Vocabulary::build_from_text(dir.file("small.tgt"), nmt_special_tokens());
  REQUIRE(warnings.lines.size() == 2);
  CHECK_THAT(warnings.lines[1], Contains("% of it is not text)"));

  CHECK(non_text_share("plain text\twith tabs\r\n") == 0);
  CHECK(non_text_share("\xE2\x82\xAC\xF0\x9F\x98\x80") == 0);  // valid UTF-8 (euro sign, emoji)
  CHECK(non_text_share("abc\xE2\x82") == 0);                   // cut off by the sample's end
  CHECK(non_text_share(std::string("ab\0\x01", 4)) == 0.5);
  CHECK(non_text_share("\xC0\xAF\xED\xA0\x80") == 1);  // an overlong form and a surrogate
  const std::vector<uint8_t> noise = random_bytes(4096);
  CHECK(non_text_share(std::string(noise.begin(), noise.end())) > 0.3);
}

TEST_CASE("data: tokens quoted in messages escape raw bytes and are cut short", "[data]") {
  CHECK(escaped_excerpt("plain") == "plain");
  CHECK(escaped_excerpt("naïve \"q\" a\\b") == "naïve \\\"q\\\" a\\\\b");
  CHECK(escaped_excerpt("\x1B[31mred\x7F\xFF\xC2\x85") == "\\x1B[31mred\\x7F\\xFF\\xC2\\x85");
  CHECK(escaped_excerpt(std::string(100, 'w')) == std::string(kQuotedExcerptBytes, 'w') + "...");

  DataTempDir dir;
  write_text(dir.file("vocab.bad"), "a\nb\x01\x02 c\xFF\n");
  const std::string message =
      config_error_of([&] { Vocabulary::from_file(dir.file("vocab.bad"), nmt_special_tokens()); });
  CHECK_THAT(message, Contains("line 2 holds 2 tokens (\"b\\x01\\x02 c\\xFF\")"));
  CHECK(message.find('\x01') == std::string::npos);
  CHECK(message.find('\xFF') == std::string::npos);
  write_text(dir.file("vocab.dup"), "\x1B[2J" + std::string(200, 'z') + "\na\n\x1B[2J" + std::string(200, 'z') + "\n");
  const std::string duplicate =
      config_error_of([&] { Vocabulary::from_file(dir.file("vocab.dup"), nmt_special_tokens()); });
  CHECK_THAT(duplicate, Contains("repeats \"\\x1B[2Jzzz") && Contains("z...\" of line 1"));
  CHECK(duplicate.find('\x1B') == std::string::npos);
  CHECK(duplicate.size() < 250);
}
