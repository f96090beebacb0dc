// Finding llm.c's and nanoGPT's token shards in a folder, checking each file once at open, and
// reading the windows drawn from them with one pread each.
#include "engine/data/token_shards.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/backend/counter_random.h"
#include "engine/errors.h"
#include "engine/machine/file_checks.h"
#include "engine/machine/text_content.h"

namespace dpbench {

namespace fs = std::filesystem;

// Note [token ids are checked per window]
// A token id at or above the vocabulary would index past the embedding table on the device, so
// every id is checked before it reaches a batch. The check runs as a window is read, not in one
// pass over every shard at open: a benchmark run reads a sliver of its data (100 steps of 8 x
// 1025 tokens is 0.01% of FineWeb's 10 billion), and a pass over 20 GB of shards would cost
// minutes of start-up on every run, while the check per window is one comparison per token
// copied. What a whole pass would catch earlier, a bad shard's header and size, is checked at
// open; a corrupt id is reported, with its shard and offset, by the step that draws it.

namespace {

const char* split_word(TokenSplit split) { return split == TokenSplit::train ? "train" : "val"; }

std::string quoted(const std::string& path) { return escaped_value(path); }

std::string format_hint(TokenShardFormat format) {
  if (format == TokenShardFormat::llmc)
    return "expects llm.c's token shards (a 256 x int32 header with magic 20240520 and version 1, then "
           "uint16 tokens, as llm.c's dev/data scripts write them)";
  return "expects nanoGPT's headerless uint16 tokens (train.bin, val.bin, as its data/*/prepare.py write them)";
}

int32_t little_endian_int32(const uint8_t* bytes) {
  const uint32_t value = static_cast<uint32_t>(bytes[0]) | static_cast<uint32_t>(bytes[1]) << 8 |
                         static_cast<uint32_t>(bytes[2]) << 16 | static_cast<uint32_t>(bytes[3]) << 24;
  return static_cast<int32_t>(value);
}

// Reads exactly `bytes` at `offset`, or fewer where the file ends first; returns what it read.
size_t read_at(int fd, uint8_t* into, size_t bytes, int64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd, into + done, bytes - done, static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw RuntimeError("error while reading token shard " + quoted(path) + ": " + std::strerror(errno));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

// The llm.c header's token count, after its magic and version are checked.
int64_t llmc_header_tokens(int fd, int64_t file_bytes, const std::string& path) {
  const std::string name = "token shard " + quoted(path);
  if (file_bytes < kLlmcHeaderBytes)
    throw ConfigError(name + " has " + std::to_string(file_bytes) +
                      " bytes, fewer than llm.c's 1024-byte header: the file is truncated; write it again with "
                      "llm.c's dev/data scripts");
  uint8_t header[kLlmcHeaderBytes];
  if (read_at(fd, header, sizeof(header), 0, path) != sizeof(header))
    throw RuntimeError(name + " became shorter while its header was read");
  const int32_t magic = little_endian_int32(header);
  const int32_t version = little_endian_int32(header + 4);
  const int32_t tokens = little_endian_int32(header + 8);
  if (magic == kLlmcLlama3Magic)
    throw ConfigError(name + " has magic 20240801, llm.c's LLaMA 3 shards of uint32 tokens: dpbench reads "
                      "GPT-2 shards (magic 20240520, uint16 tokens); tokenize the data with GPT-2's tokenizer");
  if (magic != kLlmcShardMagic)
    throw ConfigError(name + " has magic " + std::to_string(magic) +
                      " in its header, not llm.c's 20240520: it is not an llm.c token shard (nanoGPT's "
                      "headerless tokens are read from a file named train.bin); " +
                      format_hint(TokenShardFormat::llmc));
  if (version != kLlmcShardVersion)
    throw ConfigError(name + " has header version " + std::to_string(version) +
                      ", not 1 (uint16 GPT-2 tokens), the one llm.c version dpbench reads; write it again with "
                      "llm.c's dev/data scripts");
  const int64_t expected_bytes = kLlmcHeaderBytes + kTokenBytes * static_cast<int64_t>(tokens);
  if (tokens < 0 || expected_bytes != file_bytes)
    throw ConfigError(name + ": its header counts " + std::to_string(tokens) + " tokens (" +
                      std::to_string(expected_bytes) + " bytes with the header) but the file has " +
                      std::to_string(file_bytes) +
                      " bytes: it is truncated or was not written by llm.c's dev/data scripts; write it again");
  return tokens;
}

// The token count of a headerless (nanoGPT) file.
int64_t nanogpt_tokens(int fd, int64_t file_bytes, const std::string& path) {
  const std::string name = "token shard " + quoted(path);
  if (file_bytes % kTokenBytes != 0)
    throw ConfigError(name + " has " + std::to_string(file_bytes) +
                      " bytes, an odd number, so not whole uint16 tokens: it is truncated or not nanoGPT's "
                      "format; write it again with nanoGPT's prepare.py");
  uint8_t start[4] = {};
  // An llm.c shard renamed to train.bin would train on its header's bytes as tokens.
  if (file_bytes >= 4 && read_at(fd, start, sizeof(start), 0, path) == sizeof(start) &&
      little_endian_int32(start) == kLlmcShardMagic)
    throw ConfigError(name + " begins with llm.c's header (magic 20240520) but is named as nanoGPT's headerless "
                      "tokens: name it <name>_train.bin (or _val.bin) so that its header is read as one");
  return file_bytes / kTokenBytes;
}

}  // namespace

bool is_llmc_shard_name(const std::string& file_name, TokenSplit split) {
  const std::string suffix = ".bin";
  if (file_name.size() <= suffix.size() ||
      file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string stem = file_name.substr(0, file_name.size() - suffix.size());
  if (stem.find('_') == std::string::npos) return false;  // nanoGPT's train.bin, or another file
  const std::string word = split_word(split);
  size_t begin = 0;
  for (;;) {
    const size_t end = std::min(stem.find('_', begin), stem.size());
    if (stem.compare(begin, end - begin, word) == 0) return true;  // the whole word, not a prefix
    if (end == stem.size()) return false;
    begin = end + 1;
  }
}

TokenShardFiles find_token_shards(const std::string& directory, TokenSplit split) {
  const std::string word = split_word(split);
  // llm.c's scripts number the validation shard 000000 and the training shards from 000001.
  const std::string first = split == TokenSplit::train ? "_000001" : "_000000";
  const std::string looked_for = "looked for llm.c's shards (<name>_" + word + first + ".bin, <name>_" + word +
                                 ".bin) and nanoGPT's " + word + ".bin";
  const std::string why_not = why_not_folder(directory);
  if (!why_not.empty())
    throw ConfigError("token shards: --data_dir=" + quoted(directory) + " " + why_not + "; " + looked_for +
                      " in it");

  TokenShardFiles found;
  std::error_code error;
  fs::directory_iterator entries(directory, error);
  for (; !error && entries != fs::directory_iterator(); entries.increment(error)) {
    const std::string name = entries->path().filename().string();
    if (is_llmc_shard_name(name, split)) found.paths.push_back(entries->path().string());
  }
  if (error)
    throw ConfigError("token shards: cannot list --data_dir=" + quoted(directory) + ": " + error.message());
  if (!found.paths.empty()) {
    // Name order, as llm.c's glob returns them: shard 000001 before 000002.
    std::sort(found.paths.begin(), found.paths.end());
    found.format = TokenShardFormat::llmc;
    return found;
  }
  // Whatever is there under nanoGPT's name, a FIFO or a folder too: opening it names its kind.
  const std::string nanogpt = (fs::path(directory) / (word + ".bin")).string();
  if (inspect_path(nanogpt).kind != PathKind::missing) {
    found.format = TokenShardFormat::nanogpt;
    found.paths.push_back(nanogpt);
    return found;
  }
  throw ConfigError("no token shards in --data_dir=" + quoted(directory) + ": " + looked_for +
                    "; point --data_dir at the folder llm.c's dev/data scripts or nanoGPT's prepare.py wrote");
}

TokenShards::Descriptor& TokenShards::Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (fd >= 0) ::close(fd);
    fd = std::exchange(other.fd, -1);
  }
  return *this;
}

TokenShards::Descriptor::~Descriptor() {
  if (fd >= 0) ::close(fd);
}

TokenShards TokenShards::open(const std::string& directory, TokenSplit split, int window_tokens, int vocab_size) {
  TokenShards shards(find_token_shards(directory, split), window_tokens, vocab_size);
  shards.directory_ = directory;
  return shards;
}

TokenShards::TokenShards(const TokenShardFiles& files, int window_tokens, int vocab_size)
    : format_(files.format), window_tokens_(window_tokens), vocab_size_(vocab_size) {
  if (window_tokens < 2)
    throw RuntimeError("token shards: a window of " + std::to_string(window_tokens) +
                       " tokens; needs at least 2 (one input and the token it predicts)");
  if (vocab_size < 1) throw RuntimeError("token shards: a vocabulary of " + std::to_string(vocab_size) + " ids");
  if (files.paths.empty()) throw RuntimeError("token shards: no files given");
  directory_ = fs::path(files.paths.front()).parent_path().string();
  for (const std::string& path : files.paths) open_shard(path);
}

void TokenShards::open_shard(const std::string& path) {
  std::string why;
  Descriptor file(open_regular_file_for_reading(path, &why));
  if (file.fd < 0 && errno == EMFILE)
    throw ConfigError("token shard " + quoted(path) + " " + why + " (" + std::to_string(shards_.size()) +
                      " shards are open already, one descriptor each): raise the limit with ulimit -n");
  if (file.fd < 0) throw ConfigError("token shard " + quoted(path) + " " + why + "; " + format_hint(format_));
  struct stat status {};
  if (::fstat(file.fd, &status) != 0)
    throw RuntimeError("token shard " + quoted(path) + " cannot be examined: " + std::strerror(errno));
  const auto bytes = static_cast<int64_t>(status.st_size);
  const bool llmc = format_ == TokenShardFormat::llmc;
  const int64_t tokens = llmc ? llmc_header_tokens(file.fd, bytes, path) : nanogpt_tokens(file.fd, bytes, path);
  if (tokens < window_tokens_)
    throw ConfigError("token shard " + quoted(path) + " holds " + std::to_string(tokens) +
                      " tokens, fewer than one window of " + std::to_string(window_tokens_) + " (--seq_len=" +
                      std::to_string(window_tokens_ - 1) +
                      " inputs and the token after them): use a smaller --seq_len or longer shards");
  shards_.push_back(Shard{path, std::move(file), tokens, llmc ? kLlmcHeaderBytes : 0});
  total_tokens_ += tokens;
  window_starts_.push_back(window_starts_.back() + tokens - window_tokens_ + 1);
}

const std::string& TokenShards::shard_path(int shard) const { return shards_.at(static_cast<size_t>(shard)).path; }

int64_t TokenShards::shard_tokens(int shard) const { return shards_.at(static_cast<size_t>(shard)).tokens; }

std::string TokenShards::description() const {
  const std::string kind = format_ == TokenShardFormat::llmc ? "llm.c token shards" : "nanoGPT tokens";
  const std::string files = shards_.size() == 1 ? "1 file" : std::to_string(shards_.size()) + " files";
  return kind + ": " + files + ", " + std::to_string(total_tokens_) + " tokens in " + quoted(directory_);
}

TokenWindow TokenShards::window_at(int64_t index) const {
  if (index < 0 || index >= window_starts())
    throw RuntimeError("token shards: window start " + std::to_string(index) + " asked of " +
                       std::to_string(window_starts()));
  // The last shard whose first start is at or before `index`.
  const auto after = std::upper_bound(window_starts_.begin(), window_starts_.end(), index);
  const auto shard = static_cast<int>(after - window_starts_.begin()) - 1;
  return TokenWindow{shard, index - window_starts_[static_cast<size_t>(shard)]};
}

TokenWindow TokenShards::draw_window(uint64_t seed, int64_t step, int64_t sample) const {
  if (step < 0 || sample < 0)
    throw RuntimeError("token shards: step " + std::to_string(step) + ", sample " + std::to_string(sample));
  // Uniform over the starts: the modulo's bias is below window_starts() / 2^64, negligible.
  const uint64_t draw = counter_hash(seed, kRandomStreamTokenWindows + static_cast<uint64_t>(step),
                                     static_cast<uint64_t>(sample));
  return window_at(static_cast<int64_t>(draw % static_cast<uint64_t>(window_starts())));
}

void TokenShards::read_window(const TokenWindow& window, int32_t* out, size_t stride) const {
  const Shard& shard = shards_.at(static_cast<size_t>(window.shard));
  if (window.first_token < 0 || window.first_token + window_tokens_ > shard.tokens)
    throw RuntimeError("token shards: window at token " + std::to_string(window.first_token) + " of " +
                       quoted(shard.path) + ", which holds " + std::to_string(shard.tokens));
  const size_t bytes = static_cast<size_t>(window_tokens_) * kTokenBytes;
  std::vector<uint8_t> raw(bytes);
  const int64_t offset = shard.first_token_byte + window.first_token * kTokenBytes;
  if (read_at(shard.file.fd, raw.data(), bytes, offset, shard.path) != bytes)
    throw RuntimeError("token shard " + quoted(shard.path) + " became shorter while it was read (it held " +
                       std::to_string(shard.tokens) + " tokens when it was opened)");
  // Note [token ids are checked per window].
  for (int t = 0; t < window_tokens_; ++t) {
    const int32_t id = static_cast<int32_t>(raw[2 * t]) | static_cast<int32_t>(raw[2 * t + 1]) << 8;
    if (id >= vocab_size_) {
      const int64_t token = window.first_token + t;
      throw ConfigError("token shard " + quoted(shard.path) + ": token " + std::to_string(token) + " (byte offset " +
                        std::to_string(shard.first_token_byte + token * kTokenBytes) + ") is id " +
                        std::to_string(id) + ", at or above the vocabulary's " + std::to_string(vocab_size_) +
                        " ids: the shard was tokenized for a larger vocabulary or is corrupt; use a larger "
                        "--vocab_size or write the shard again");
    }
    out[static_cast<size_t>(t) * stride] = id;
  }
}

void TokenShards::write_time_major_batch(uint64_t seed, int64_t step, int replica, int batch_per_replica,
                                         int32_t* out) const {
  if (replica < 0 || batch_per_replica < 1)
    throw RuntimeError("token shards: replica " + std::to_string(replica) + " with a batch of " +
                       std::to_string(batch_per_replica));
  const auto B = static_cast<size_t>(batch_per_replica);
  for (size_t b = 0; b < B; ++b) {
    const int64_t sample = static_cast<int64_t>(replica) * batch_per_replica + static_cast<int64_t>(b);
    read_window(draw_window(seed, step, sample), out + b, B);  // column b of (T + 1, B)
  }
}

}  // namespace dpbench
