// The messages with which a connection to the TCP rendezvous proves that it belongs to the job
// (Note [what the rendezvous trusts] in engine/communication/tcp_rendezvous.h): rank 0's challenge, a rank's
// hello, rank 0's welcome or refusal. Pure functions of their bytes, so every proof and every
// malformed message is host-tested without a socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/communication/launch_environment.h"

namespace dpbench {

enum ConnectionKind : uint8_t { kDataConnection = 0, kControlConnection = 1 };

constexpr size_t kNonceBytes = 32, kMacBytes = 32;
constexpr size_t kMaxHostBytes = 255;
// The most bytes each message may take: only these are ever read from a peer not yet proven.
constexpr size_t kChallengeBytes = 4 + kNonceBytes;
constexpr size_t kMaxHelloBytes = 4 + 1 + 3 * 4 + kNonceBytes + 1 + kMaxHostBytes + kMacBytes;
constexpr size_t kMaxRefusalBytes = kMacBytes + 1024;

// What a rank says of itself in a hello, besides its proof.
struct RankHello {
  ConnectionKind kind = kDataConnection;
  int rank = 0, world_size = 1, local_rank = 0;
  std::string host;   // 1 to kMaxHostBytes printable characters
  std::string nonce;  // the rank's own, kNonceBytes, for rank 0's proof in return
};

// Only printable ASCII: text from a peer that may be quoted in a message as it is.
bool printable(const std::string& text);

// ConfigError when this host's name cannot travel to the other ranks (empty, too long, not
// printable): it names DPBENCH_HOST_NAME.
void check_host_name(const std::string& host);

// Rank 0's challenge holds its fresh nonce.
std::string challenge_body(const std::string& nonce);
std::optional<std::string> nonce_of_challenge(const std::string& body);

// check_host_name's ConfigError for hello.host.
std::string hello_body(const RankHello& hello, const std::string& challenge_nonce, const LaunchEnvironment& launch);
// The hello in `body` when it proves itself for `challenge_nonce` and this job; none otherwise
// (a stranger's, another job's, one replayed from another challenge, a malformed one).
std::optional<RankHello> proven_hello(const std::string& body, const std::string& challenge_nonce,
                                      const LaunchEnvironment& launch);

// Rank 0's answer to a proven hello, itself proven: the rank knows it reached its own job.
std::string welcome_body(const RankHello& hello, const std::string& challenge_nonce, const LaunchEnvironment& launch);
bool proven_welcome(const std::string& body, const RankHello& hello, const std::string& challenge_nonce,
                    const LaunchEnvironment& launch);

// Rank 0's refusal of a proven rank (the line that ends the job), proven too: a stranger cannot
// end a rank by claiming to be rank 0.
std::string refusal_body(const std::string& line, const RankHello& hello, const std::string& challenge_nonce,
                         const LaunchEnvironment& launch);
std::optional<std::string> proven_refusal(const std::string& body, const RankHello& hello,
                                          const std::string& challenge_nonce, const LaunchEnvironment& launch);

}  // namespace dpbench
