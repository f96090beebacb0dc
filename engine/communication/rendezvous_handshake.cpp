// The rendezvous handshake's messages (see the header).
#include "engine/communication/rendezvous_handshake.h"

#include <algorithm>
#include <cstring>

#include "engine/communication/keyed_hash.h"
#include "engine/errors.h"
#include "engine/machine/text_content.h"

namespace dpbench {
namespace {

constexpr char kMagic[4] = {'D', 'P', 'B', '2'};
constexpr size_t kHelloFixedBytes = sizeof kMagic + 1 + 3 * 4 + kNonceBytes + 1;

void append_int(std::string* out, int32_t value) { out->append(reinterpret_cast<const char*>(&value), sizeof value); }
int32_t read_int(const std::string& from, size_t at) {
  int32_t value = 0;
  std::memcpy(&value, from.data() + at, sizeof value);
  return value;
}

// The keyed hash every proof is: over what it proves, the job's identity and a label that keeps
// one kind of proof from passing for another.
std::string proof(const LaunchEnvironment& launch, const char* label, const std::string& what) {
  std::string message = std::string("dpbench rendezvous ") + label;
  message += '\0';
  message += launch.job_identity;
  message += '\0';
  message += what;
  return digest_bytes(hmac_sha256(launch.rendezvous_token, message));
}

std::string about_rank(const RankHello& hello, const std::string& challenge_nonce) {
  std::string what = challenge_nonce + hello.nonce + static_cast<char>(hello.kind);
  append_int(&what, hello.rank);
  return what;
}

}  // namespace

bool printable(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

std::string challenge_body(const std::string& nonce) { return std::string(kMagic, sizeof kMagic) + nonce; }

std::optional<std::string> nonce_of_challenge(const std::string& body) {
  if (body.size() != kChallengeBytes || body.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0) return std::nullopt;
  return body.substr(sizeof kMagic);
}

void check_host_name(const std::string& host) {
  if (host.empty() || host.size() > kMaxHostBytes || !printable(host))
    throw ConfigError("this host's name \"" + escaped_excerpt(host) +
                      "\" (DPBENCH_HOST_NAME, or the machine's) is not 1 to 255 printable characters; give another");
}

std::string hello_body(const RankHello& hello, const std::string& challenge_nonce, const LaunchEnvironment& launch) {
  check_host_name(hello.host);
  std::string body(kMagic, sizeof kMagic);
  body += static_cast<char>(hello.kind);
  append_int(&body, hello.rank);
  append_int(&body, hello.world_size);
  append_int(&body, hello.local_rank);
  body += hello.nonce;
  body += static_cast<char>(hello.host.size());
  body += hello.host;
  return body + proof(launch, "hello", challenge_nonce + body);
}

std::optional<RankHello> proven_hello(const std::string& body, const std::string& challenge_nonce,
                                      const LaunchEnvironment& launch) {
  if (body.size() < kHelloFixedBytes + 1 + kMacBytes || body.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  const size_t host_bytes = static_cast<uint8_t>(body[kHelloFixedBytes - 1]);
  if (body.size() != kHelloFixedBytes + host_bytes + kMacBytes) return std::nullopt;
  const std::string signed_part = body.substr(0, body.size() - kMacBytes);
  if (!same_bytes(body.substr(signed_part.size()), proof(launch, "hello", challenge_nonce + signed_part)))
    return std::nullopt;
  RankHello hello;
  const uint8_t kind = static_cast<uint8_t>(body[sizeof kMagic]);
  if (kind != kDataConnection && kind != kControlConnection) return std::nullopt;
  hello.kind = static_cast<ConnectionKind>(kind);
  hello.rank = read_int(body, sizeof kMagic + 1);
  hello.world_size = read_int(body, sizeof kMagic + 5);
  hello.local_rank = read_int(body, sizeof kMagic + 9);
  hello.nonce = body.substr(sizeof kMagic + 13, kNonceBytes);
  hello.host = body.substr(kHelloFixedBytes, host_bytes);
  if (hello.host.empty() || !printable(hello.host)) return std::nullopt;
  return hello;
}

std::string welcome_body(const RankHello& hello, const std::string& challenge_nonce, const LaunchEnvironment& launch) {
  return proof(launch, "welcome", about_rank(hello, challenge_nonce));
}

bool proven_welcome(const std::string& body, const RankHello& hello, const std::string& challenge_nonce,
                    const LaunchEnvironment& launch) {
  return same_bytes(body, welcome_body(hello, challenge_nonce, launch));
}

std::string refusal_body(const std::string& line, const RankHello& hello, const std::string& challenge_nonce,
                         const LaunchEnvironment& launch) {
  return proof(launch, "refusal", about_rank(hello, challenge_nonce) + line) + line;
}

std::optional<std::string> proven_refusal(const std::string& body, const RankHello& hello,
                                          const std::string& challenge_nonce, const LaunchEnvironment& launch) {
  if (body.size() <= kMacBytes) return std::nullopt;
  const std::string line = body.substr(kMacBytes);
  if (!printable(line) || !same_bytes(body, refusal_body(line, hello, challenge_nonce, launch))) return std::nullopt;
  return line;
}

}  // namespace dpbench
