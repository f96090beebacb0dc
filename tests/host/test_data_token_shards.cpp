// Token shards of llm.c and nanoGPT: finding them in a folder, reading windows past llm.c's
// header, windows drawn reproducibly and split over replicas as one device's batch, and the one
// line each bad shard gets (header, size, token ids, short shards, FIFOs and folders, nothing).
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <set>

#include "data_test_support.h"
#include "engine/data/token_shards.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;

namespace {

constexpr int kVocab = 1000;
constexpr int kWindow = 5;  // T + 1 with T = 4

// Token i of shard s: every id says where it lies, so a window's contents name its place.
uint16_t known_token(int shard, int64_t i) { return static_cast<uint16_t>(shard * 100 + i); }

std::vector<uint16_t> known_tokens(int shard, int count) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < count; ++i) tokens.push_back(known_token(shard, i));
  return tokens;
}

void append_int32(std::vector<uint8_t>& bytes, int32_t value) {
  const auto bits = static_cast<uint32_t>(value);
  for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<uint8_t>(bits >> (8 * k)));
}

void append_tokens(std::vector<uint8_t>& bytes, const std::vector<uint16_t>& tokens) {
  for (uint16_t token : tokens) {
    bytes.push_back(static_cast<uint8_t>(token & 0xFF));
    bytes.push_back(static_cast<uint8_t>(token >> 8));
  }
}

// llm.c's layout (dev/data/data_common.py's write_datafile): 256 int32, then uint16 tokens. No
// `count`: the true one.
std::vector<uint8_t> llmc_shard(const std::vector<uint16_t>& tokens, int32_t magic = kLlmcShardMagic,
                                int32_t version = kLlmcShardVersion, std::optional<int32_t> count = {}) {
  std::vector<uint8_t> bytes;
  append_int32(bytes, magic);
  append_int32(bytes, version);
  append_int32(bytes, count.value_or(static_cast<int32_t>(tokens.size())));
  while (bytes.size() < static_cast<size_t>(kLlmcHeaderBytes)) bytes.push_back(0);
  append_tokens(bytes, tokens);
  return bytes;
}

std::vector<uint8_t> nanogpt_file(const std::vector<uint16_t>& tokens) {
  std::vector<uint8_t> bytes;
  append_tokens(bytes, tokens);
  return bytes;
}

// Two llm.c training shards written out of name order (shard 1 of 30 tokens, shard 0 of 20), a
// validation shard and a file that is no shard.
void write_llmc_folder(const DataTempDir& dir) {
  write_bytes(dir.file("fineweb_train_000002.bin"), llmc_shard(known_tokens(1, 30)));
  write_bytes(dir.file("fineweb_train_000001.bin"), llmc_shard(known_tokens(0, 20)));
  write_bytes(dir.file("fineweb_val_000000.bin"), llmc_shard(known_tokens(5, 10)));
  dpbench::testing::write_text(dir.file("README.txt"), "not a shard\n");
}

// The window's tokens as read, batch-major (stride 1).
std::vector<int32_t> window_tokens(const TokenShards& shards, const TokenWindow& window) {
  std::vector<int32_t> out(static_cast<size_t>(shards.window_tokens()), -1);
  shards.read_window(window, out.data(), 1);
  return out;
}

std::vector<int32_t> expected_window(const TokenWindow& window, int window_length = kWindow) {
  std::vector<int32_t> out;
  for (int t = 0; t < window_length; ++t) out.push_back(known_token(window.shard, window.first_token + t));
  return out;
}

std::string open_error(const DataTempDir& dir, int vocab = kVocab) {
  return config_error_of([&] { TokenShards::open(dir.path(), TokenSplit::train, kWindow, vocab); });
}

// The error of reading the one window of a shard of exactly kWindow tokens.
std::string window_error(const DataTempDir& dir, int vocab) {
  const TokenShards shards = TokenShards::open(dir.path(), TokenSplit::train, kWindow, vocab);
  REQUIRE(shards.window_starts() == 1);
  return config_error_of([&] { window_tokens(shards, shards.draw_window(1, 0, 0)); });
}

}  // namespace

TEST_CASE("token shards: llm.c shard names of each split", "[data][token_shards]") {
  CHECK(is_llmc_shard_name("fineweb_train_000001.bin", TokenSplit::train));
  CHECK(is_llmc_shard_name("edu_fineweb_train_000099.bin", TokenSplit::train));
  CHECK(is_llmc_shard_name("tiny_shakespeare_train.bin", TokenSplit::train));
  CHECK(is_llmc_shard_name("fineweb_val_000000.bin", TokenSplit::val));
  CHECK_FALSE(is_llmc_shard_name("fineweb_val_000000.bin", TokenSplit::train));
  CHECK_FALSE(is_llmc_shard_name("train.bin", TokenSplit::train));  // nanoGPT's
  CHECK_FALSE(is_llmc_shard_name("fineweb_training_000001.bin", TokenSplit::train));
  CHECK_FALSE(is_llmc_shard_name("fineweb_train_000001.txt", TokenSplit::train));
  CHECK_FALSE(is_llmc_shard_name("_train_.bi", TokenSplit::train));
}

TEST_CASE("token shards: llm.c shards are read in name order past their header", "[data][token_shards]") {
  DataTempDir dir;
  write_llmc_folder(dir);
  const TokenShardFiles files = find_token_shards(dir.path(), TokenSplit::train);
  CHECK(files.format == TokenShardFormat::llmc);
  REQUIRE(files.paths == std::vector<std::string>{dir.file("fineweb_train_000001.bin"),
                                                  dir.file("fineweb_train_000002.bin")});

  const TokenShards shards = TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab);
  REQUIRE(shards.shard_count() == 2);
  CHECK(shards.shard_tokens(0) == 20);
  CHECK(shards.shard_tokens(1) == 30);
  CHECK(shards.total_tokens() == 50);
  CHECK(shards.window_starts() == (20 - kWindow + 1) + (30 - kWindow + 1));
  CHECK_THAT(shards.description(), Contains("llm.c token shards: 2 files, 50 tokens"));
  // Starts count shard after shard: 0..15 in shard 0, 16.. in shard 1.
  CHECK(shards.window_at(0) == TokenWindow{0, 0});
  CHECK(shards.window_at(15) == TokenWindow{0, 15});
  CHECK(shards.window_at(16) == TokenWindow{1, 0});
  CHECK(shards.window_at(shards.window_starts() - 1) == TokenWindow{1, 30 - kWindow});
  CHECK_THROWS_AS(shards.window_at(shards.window_starts()), RuntimeError);
  for (const TokenWindow window : {TokenWindow{0, 0}, TokenWindow{0, 15}, TokenWindow{1, 7}, TokenWindow{1, 25}})
    CHECK(window_tokens(shards, window) == expected_window(window));

  const TokenShards val = TokenShards::open(dir.path(), TokenSplit::val, kWindow, kVocab);
  REQUIRE(val.shard_count() == 1);
  CHECK(val.shard_path(0) == dir.file("fineweb_val_000000.bin"));
  CHECK(window_tokens(val, {0, 5}) == std::vector<int32_t>{505, 506, 507, 508, 509});
}

TEST_CASE("token shards: nanoGPT's headerless train.bin and val.bin", "[data][token_shards]") {
  DataTempDir dir;
  write_bytes(dir.file("train.bin"), nanogpt_file(known_tokens(0, 40)));
  write_bytes(dir.file("val.bin"), nanogpt_file(known_tokens(3, 8)));
  const TokenShards train = TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab);
  CHECK(train.format() == TokenShardFormat::nanogpt);
  REQUIRE(train.shard_count() == 1);
  CHECK(train.total_tokens() == 40);
  CHECK(train.window_starts() == 36);
  CHECK_THAT(train.description(), Contains("nanoGPT tokens: 1 file, 40 tokens"));
  CHECK(window_tokens(train, {0, 0}) == expected_window({0, 0}));
  CHECK(window_tokens(train, {0, 35}) == expected_window({0, 35}));
  const TokenShards val = TokenShards::open(dir.path(), TokenSplit::val, kWindow, kVocab);
  CHECK(val.total_tokens() == 8);
  CHECK(window_tokens(val, {0, 3}) == std::vector<int32_t>{303, 304, 305, 306, 307});
}

TEST_CASE("token shards: llm.c shards come before a train.bin in the same folder", "[data][token_shards]") {
  DataTempDir dir;
  write_bytes(dir.file("train.bin"), nanogpt_file(known_tokens(0, 40)));
  write_bytes(dir.file("tiny_shakespeare_train.bin"), llmc_shard(known_tokens(2, 12)));
  const TokenShardFiles files = find_token_shards(dir.path(), TokenSplit::train);
  CHECK(files.format == TokenShardFormat::llmc);
  CHECK(files.paths == std::vector<std::string>{dir.file("tiny_shakespeare_train.bin")});
}

TEST_CASE("token shards: windows are reproducible and cover every shard", "[data][token_shards]") {
  DataTempDir dir;
  write_llmc_folder(dir);
  const TokenShards first = TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab);
  const TokenShards again = TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab);
  std::set<int> shards_seen;
  std::set<int64_t> starts_seen;
  int moved_with_step = 0, moved_with_seed = 0;
  for (int64_t sample = 0; sample < 200; ++sample) {
    const TokenWindow window = first.draw_window(7, 3, sample);
    CHECK(again.draw_window(7, 3, sample) == window);  // a pure function of (seed, step, sample)
    CHECK(window_tokens(first, window) == expected_window(window));
    shards_seen.insert(window.shard);
    starts_seen.insert(window.shard * 1000 + window.first_token);
    if (!(first.draw_window(7, 4, sample) == window)) ++moved_with_step;
    if (!(first.draw_window(8, 3, sample) == window)) ++moved_with_seed;
  }
  CHECK(shards_seen == std::set<int>{0, 1});
  // 200 draws over 42 starts: nearly every start is drawn.
  CHECK(starts_seen.size() >= 35);
  CHECK(moved_with_step > 150);
  CHECK(moved_with_seed > 150);
}

TEST_CASE("token shards: replicas' windows are one device's batch split into columns", "[data][token_shards]") {
  DataTempDir dir;
  write_llmc_folder(dir);
  const TokenShards shards = TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab);
  constexpr int N = 3, B = 2;
  for (int64_t step : {0, 1, 57}) {
    // One device with the global batch N * B: (T + 1, N * B) time-major.
    std::vector<int32_t> whole(static_cast<size_t>(kWindow) * N * B, -1);
    shards.write_time_major_batch(11, step, 0, N * B, whole.data());
    for (int replica = 0; replica < N; ++replica) {
      std::vector<int32_t> mine(static_cast<size_t>(kWindow) * B, -1);
      shards.write_time_major_batch(11, step, replica, B, mine.data());
      for (int b = 0; b < B; ++b) {
        const int sample = replica * B + b;
        const std::vector<int32_t> expected = expected_window(shards.draw_window(11, step, sample));
        for (int t = 0; t < kWindow; ++t) {
          REQUIRE(mine[static_cast<size_t>(t * B + b)] == whole[static_cast<size_t>(t * N * B + sample)]);
          REQUIRE(mine[static_cast<size_t>(t * B + b)] == expected[static_cast<size_t>(t)]);
        }
      }
    }
  }
}

TEST_CASE("token shards: a moved reader keeps its open shards", "[data][token_shards]") {
  DataTempDir dir;
  write_llmc_folder(dir);
  TokenShards moved = TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab);
  TokenShards shards = std::move(moved);
  CHECK(window_tokens(shards, {1, 2}) == expected_window({1, 2}));
  shards = TokenShards::open(dir.path(), TokenSplit::val, kWindow, kVocab);
  CHECK(window_tokens(shards, {0, 0}) == std::vector<int32_t>{500, 501, 502, 503, 504});
}

TEST_CASE("token shards: a wrong llm.c magic or version names the file and the expected value",
          "[data][token_shards]") {
  DataTempDir dir;
  write_bytes(dir.file("x_train_000001.bin"), llmc_shard(known_tokens(0, 20), 12345));
  CHECK_THAT(open_error(dir), Contains("x_train_000001.bin") && Contains("magic 12345") && Contains("20240520") &&
                                  Contains("train.bin"));
  write_bytes(dir.file("x_train_000001.bin"), llmc_shard(known_tokens(0, 20), kLlmcLlama3Magic, 7));
  CHECK_THAT(open_error(dir), Contains("x_train_000001.bin") && Contains("LLaMA 3") && Contains("uint32"));
  write_bytes(dir.file("x_train_000001.bin"), llmc_shard(known_tokens(0, 20), kLlmcShardMagic, 2));
  CHECK_THAT(open_error(dir), Contains("x_train_000001.bin") && Contains("header version 2") && Contains("not 1"));
}

TEST_CASE("token shards: a token count that disagrees with the file size", "[data][token_shards]") {
  DataTempDir dir;
  write_bytes(dir.file("x_train_000001.bin"), llmc_shard(known_tokens(0, 20)));
  // Shard 2 claims 30 tokens and holds 20: a truncated download.
  write_bytes(dir.file("x_train_000002.bin"), llmc_shard(known_tokens(1, 20), kLlmcShardMagic, 1, 30));
  CHECK_THAT(open_error(dir), Contains("x_train_000002.bin") && Contains("counts 30 tokens") &&
                                  Contains("1084 bytes with the header") && Contains("file has 1064 bytes"));
  write_bytes(dir.file("x_train_000002.bin"), llmc_shard(known_tokens(1, 20), kLlmcShardMagic, 1, -7));
  CHECK_THAT(open_error(dir), Contains("x_train_000002.bin") && Contains("counts -7 tokens"));
  std::vector<uint8_t> cut = llmc_shard({});
  cut.resize(100);
  write_bytes(dir.file("x_train_000002.bin"), cut);
  CHECK_THAT(open_error(dir), Contains("x_train_000002.bin") && Contains("100 bytes") && Contains("1024-byte header"));
}

TEST_CASE("token shards: nanoGPT files of an odd size or with llm.c's header", "[data][token_shards]") {
  DataTempDir dir;
  std::vector<uint8_t> odd = nanogpt_file(known_tokens(0, 20));
  odd.pop_back();
  write_bytes(dir.file("train.bin"), odd);
  CHECK_THAT(open_error(dir), Contains("train.bin") && Contains("39 bytes") && Contains("uint16"));
  write_bytes(dir.file("train.bin"), llmc_shard(known_tokens(0, 20)));
  CHECK_THAT(open_error(dir), Contains("train.bin") && Contains("llm.c's header") && Contains("_train.bin"));
}

TEST_CASE("token shards: a token id at or above the vocabulary names the shard, offset and id",
          "[data][token_shards]") {
  SECTION("llm.c") {
    DataTempDir dir;
    std::vector<uint16_t> tokens = known_tokens(0, kWindow);
    tokens[3] = 999;
    write_bytes(dir.file("x_train_000001.bin"), llmc_shard(tokens));
    const TokenShards fits = TokenShards::open(dir.path(), TokenSplit::train, kWindow, 1000);
    CHECK(window_tokens(fits, {0, 0})[3] == 999);  // the last id of the vocabulary is one
    CHECK_THAT(window_error(dir, 999), Contains("x_train_000001.bin") && Contains("token 3 (byte offset 1030)") &&
                                           Contains("id 999") && Contains("999 ids") && Contains("--vocab_size"));
  }
  SECTION("nanoGPT") {
    DataTempDir dir;
    std::vector<uint16_t> tokens = known_tokens(0, kWindow);
    tokens[4] = 65535;
    write_bytes(dir.file("train.bin"), nanogpt_file(tokens));
    CHECK_THAT(window_error(dir, 50304),
               Contains("train.bin") && Contains("token 4 (byte offset 8)") && Contains("id 65535"));
  }
}

TEST_CASE("token shards: a shard shorter than one window", "[data][token_shards]") {
  DataTempDir dir;
  write_bytes(dir.file("x_train_000001.bin"), llmc_shard(known_tokens(0, 20)));
  write_bytes(dir.file("x_train_000002.bin"), llmc_shard(known_tokens(1, kWindow - 1)));
  CHECK_THAT(open_error(dir), Contains("x_train_000002.bin") && Contains("holds 4 tokens") &&
                                  Contains("window of 5") && Contains("--seq_len"));
  write_bytes(dir.file("x_train_000002.bin"), llmc_shard({}));
  CHECK_THAT(open_error(dir), Contains("x_train_000002.bin") && Contains("holds 0 tokens"));
  write_bytes(dir.file("x_train_000002.bin"), llmc_shard(known_tokens(1, kWindow)));
  CHECK(TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab).window_starts() == 16 + 1);
}

TEST_CASE("token shards: no shard found says what was looked for", "[data][token_shards]") {
  DataTempDir dir;
  dpbench::testing::write_text(dir.file("input.txt"), "raw text, not tokens\n");
  write_bytes(dir.file("x_val_000000.bin"), llmc_shard(known_tokens(0, 20)));
  CHECK_THAT(open_error(dir), Contains("no token shards") && Contains(dir.path()) &&
                                  Contains("_train_000001.bin") && Contains("nanoGPT's train.bin"));
  CHECK_THAT(config_error_of([&] { find_token_shards(dir.file("missing"), TokenSplit::train); }),
             Contains("missing") && Contains("does not exist"));
  CHECK_THAT(config_error_of([&] { find_token_shards(dir.file("input.txt"), TokenSplit::train); }),
             Contains("input.txt") && Contains("not a folder"));
  std::filesystem::remove(dir.file("x_val_000000.bin"));
  CHECK_THAT(config_error_of([&] { find_token_shards(dir.path(), TokenSplit::val); }),
             Contains("<name>_val_000000.bin") && Contains("nanoGPT's val.bin"));
}

TEST_CASE("token shards: a FIFO or a folder in place of a shard is named without blocking",
          "[data][token_shards]") {
  DataTempDir dir;
  write_bytes(dir.file("x_train_000001.bin"), llmc_shard(known_tokens(0, 20)));
  make_fifo(dir.file("x_train_000002.bin"));
  std::string message;
  CHECK(finishes_without_blocking([&] { message = open_error(dir); }, {dir.file("x_train_000002.bin")}));
  CHECK_THAT(message, Contains("x_train_000002.bin") && Contains("FIFO"));

  std::filesystem::remove(dir.file("x_train_000002.bin"));
  std::filesystem::create_directory(dir.file("x_train_000002.bin"));
  CHECK_THAT(open_error(dir), Contains("x_train_000002.bin") && Contains("directory"));

  DataTempDir nanogpt;
  make_fifo(nanogpt.file("train.bin"));
  CHECK(finishes_without_blocking([&] { message = open_error(nanogpt); }, {nanogpt.file("train.bin")}));
  CHECK_THAT(message, Contains("train.bin") && Contains("FIFO") && Contains("nanoGPT"));
  std::filesystem::remove(nanogpt.file("train.bin"));
  std::filesystem::create_directory(nanogpt.file("train.bin"));
  CHECK_THAT(open_error(nanogpt), Contains("train.bin") && Contains("directory"));
}

TEST_CASE("token shards: a shard cut short after it was opened fails its read", "[data][token_shards]") {
  DataTempDir dir;
  write_bytes(dir.file("train.bin"), nanogpt_file(known_tokens(0, 40)));
  const TokenShards shards = TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab);
  REQUIRE(::truncate(dir.file("train.bin").c_str(), 20) == 0);  // 10 tokens left
  CHECK(window_tokens(shards, {0, 5}) == expected_window({0, 5}));
  try {
    window_tokens(shards, {0, 30});
    FAIL("expected a RuntimeError");
  } catch (const RuntimeError& error) {
    CHECK_THAT(error.what(), Contains("train.bin") && Contains("became shorter"));
  }
}

TEST_CASE("token shards: more shards than open descriptors allowed names ulimit", "[data][token_shards]") {
  DataTempDir dir;
  for (int s = 10; s < 42; ++s)
    write_bytes(dir.file("x_train_0000" + std::to_string(s) + ".bin"), llmc_shard(known_tokens(0, 10)));
  // A limit that leaves four descriptors free (the listing of /proc/self/fd holds one of the
  // open ones, closed again by then): one for listing the folder, then room for a few shards.
  std::set<int> open_now;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    open_now.insert(std::stoi(entry.path().filename().string()));
  int limit = 0;
  for (int free_below = 0; free_below < 4; ++limit)
    if (open_now.count(limit) == 0) ++free_below;
  rlimit before {};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  rlimit tight = before;
  tight.rlim_cur = static_cast<rlim_t>(limit);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  std::string message;
  try {
    TokenShards::open(dir.path(), TokenSplit::train, kWindow, kVocab);
  } catch (const ConfigError& error) {
    message = error.what();
  }
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &before) == 0);
  CHECK_THAT(message, Contains("x_train_0000") && Contains("shards are open already") && Contains("ulimit -n"));
}
