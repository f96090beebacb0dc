// Token shards as llm.c and nanoGPT write them, and the windows of T + 1 tokens a GPT trains on.
//
// llm.c (dev/data/data_common.py, write_datafile): a header of 256 little-endian int32 values,
// [0] the magic 20240520, [1] the version 1 (GPT-2 tokens as uint16), [2] the token count, then
// that many little-endian uint16 tokens. Its scripts name the shards <name>_train_000001.bin and
// <name>_val_000000.bin (FineWeb: about 100 million tokens, 200 MB, each) or <name>_train.bin and
// <name>_val.bin (tiny Shakespeare). nanoGPT (data/*/prepare.py): train.bin and val.bin, the
// tokens alone, uint16 little-endian, no header.
//
// A shard is never read whole: opening checks each file's kind, header and size, and a window's
// tokens are read with one pread when it is drawn (Note [token ids are checked per window]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dpbench {

enum class TokenShardFormat {
  llmc,     // 1024-byte header, then uint16 tokens
  nanogpt,  // uint16 tokens only
};

enum class TokenSplit { train, val };

constexpr int32_t kLlmcShardMagic = 20240520;
constexpr int32_t kLlmcShardVersion = 1;     // uint16 tokens (GPT-2's vocabulary)
constexpr int32_t kLlmcLlama3Magic = 20240801;  // llm.c's uint32 shards (LLaMA 3): named when met, not read
constexpr int kLlmcHeaderInts = 256;
constexpr int64_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;  // 1024
constexpr int64_t kTokenBytes = 2;                         // uint16

// The files of one split, in reading order.
struct TokenShardFiles {
  TokenShardFormat format = TokenShardFormat::llmc;
  std::vector<std::string> paths;
};

// Whether `file_name` (no folder) is one of llm.c's shards of `split`: a name ending in .bin
// whose stem, cut at '_', has `train` (or `val`) as one of at least two words. nanoGPT's bare
// train.bin and val.bin are not.
bool is_llmc_shard_name(const std::string& file_name, TokenSplit split);

// Where a split's shards are in `directory`: llm.c's shards of that split in name order when
// there are any, else nanoGPT's train.bin (val.bin). llm.c's shards come first because their
// header says what they hold, and llm.c's scripts never write a bare train.bin: a folder with
// both was put together by hand. An entry that matches a name is listed whatever its kind (a
// FIFO or folder is refused when the shards are opened, naming it). ConfigError, naming both
// patterns, when nothing matches or `directory` is not a readable folder.
TokenShardFiles find_token_shards(const std::string& directory, TokenSplit split);

// Where a window lies: tokens [first_token, first_token + window_tokens) of shard `shard`.
struct TokenWindow {
  int shard = 0;
  int64_t first_token = 0;
  bool operator==(const TokenWindow& other) const {
    return shard == other.shard && first_token == other.first_token;
  }
};

// The shards of one split, open and checked, and the windows drawn from them. Reading windows is
// safe from several loader threads at once (pread on descriptors held open for the lifetime:
// one per shard, so a split of more shards than `ulimit -n` allows fails at open, saying so).
class TokenShards {
 public:
  // find_token_shards, then the constructor.
  static TokenShards open(const std::string& directory, TokenSplit split, int window_tokens, int vocab_size);

  // Opens and checks every file: ConfigError, one line naming the file, the problem and the fix,
  // for a FIFO, folder or anything else that is not a readable regular file, an llm.c header of
  // the wrong magic or version, a token count that disagrees with the file size, a headerless
  // file of an odd number of bytes, and a shard of fewer than `window_tokens` tokens.
  // `window_tokens` is T + 1 (T inputs, each predicting the next token); `vocab_size` bounds the
  // token ids (checked as windows are read).
  TokenShards(const TokenShardFiles& files, int window_tokens, int vocab_size);

  TokenShardFormat format() const { return format_; }
  int window_tokens() const { return window_tokens_; }
  int vocab_size() const { return vocab_size_; }
  int shard_count() const { return static_cast<int>(shards_.size()); }
  const std::string& shard_path(int shard) const;
  int64_t shard_tokens(int shard) const;
  int64_t total_tokens() const { return total_tokens_; }
  // Every place a window can start, over all shards: a shard of n tokens has n - window_tokens + 1.
  int64_t window_starts() const { return window_starts_.back(); }
  // "llm.c token shards: 3 files, 300000000 tokens in DIR".
  std::string description() const;

  // Start `index` of window_starts(), counted shard after shard in name order.
  TokenWindow window_at(int64_t index) const;

  // The window global sample `sample` of step `step` trains on: a start drawn uniformly over
  // window_starts() from counter_hash(seed, kRandomStreamTokenWindows + step, sample) (nanoGPT's
  // get_batch draws its windows likewise, with replacement). A pure function of its arguments:
  // replica r of N with batch B takes samples [r*B, (r+1)*B) of the global batch, so one device
  // with batch N*B trains on exactly the N replicas' windows, and a rerun on the same seed
  // reproduces every window.
  TokenWindow draw_window(uint64_t seed, int64_t step, int64_t sample) const;

  // Reads `window`'s tokens into out[0], out[stride], ..., out[(window_tokens - 1) * stride] as
  // int32: stride 1 writes one row of a batch-major (B, T + 1) batch, stride B one column of a
  // time-major (T + 1, B) batch. ConfigError for a token id at or above vocab_size (naming the
  // shard, the token's offset and the id), RuntimeError when the file became shorter or a read
  // failed.
  void read_window(const TokenWindow& window, int32_t* out, size_t stride) const;

  // Replica `replica`'s windows of step `step` as the sequence models' inputs lay tokens out
  // (rnnlm's and the Transformer's "tokens"): time-major (T + 1, B), row t holding the B windows'
  // token t, column b the window of global sample replica * B + b. `out` holds window_tokens * B
  // values.
  void write_time_major_batch(uint64_t seed, int64_t step, int replica, int batch_per_replica, int32_t* out) const;

 private:
  // A descriptor closed when its shard goes away (which makes TokenShards move-only).
  struct Descriptor {
    int fd = -1;
    explicit Descriptor(int opened) : fd(opened) {}
    Descriptor(Descriptor&& other) noexcept : fd(std::exchange(other.fd, -1)) {}
    Descriptor& operator=(Descriptor&& other) noexcept;
    ~Descriptor();
  };
  struct Shard {
    std::string path;
    Descriptor file;
    int64_t tokens = 0;
    int64_t first_token_byte = 0;  // kLlmcHeaderBytes or 0
  };

  void open_shard(const std::string& path);

  TokenShardFormat format_ = TokenShardFormat::llmc;
  int window_tokens_ = 0;
  int vocab_size_ = 0;
  std::string directory_;
  std::vector<Shard> shards_;
  // window_starts_[i]: the window starts of shards before shard i; its last entry is the total.
  std::vector<int64_t> window_starts_{0};
  int64_t total_tokens_ = 0;
};

}  // namespace dpbench
