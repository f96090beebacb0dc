// The messages of the TCP process group (engine/communication/tcp_process_group.h) on a socket: a type byte, an
// 8-byte length, the bytes. Every length read from the wire is checked against a bound the caller
// gives before anything is allocated, and a body grows as its bytes arrive, never to the length a
// peer claims: a peer that announces 16 GiB and sends nothing costs nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/errors.h"

namespace dpbench {

enum MessageType : uint8_t {
  kHello = 1, kParts = 2, kVote = 3, kAbort = 4, kPing = 5, kPong = 6, kBye = 7,
  kChallenge = 8, kWelcome = 9, kRefused = 10,  // the rendezvous' handshake (engine/communication/tcp_rendezvous.h)
};

constexpr size_t kFrameHeaderBytes = 9;
// The largest message between ranks that proved they belong to the job (results, flag checks).
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 34;
// Control messages (abort codes, probes, goodbyes) are a few bytes.
constexpr uint64_t kMaxControlMessageBytes = 64;

// The peer closed the connection (or it broke) while we sent or waited.
struct PeerClosed : RuntimeError {
  using RuntimeError::RuntimeError;
};
// The peer sent something no dpbench rank sends (an unknown frame, a length past the bound).
struct MalformedMessage : RuntimeError {
  using RuntimeError::RuntimeError;
};

void send_all(int fd, const void* data, size_t bytes);
void send_message(int fd, MessageType type, const std::string& body);

// Called every 100 ms while a receive waits, with the seconds waited; may throw to give up.
using WaitCallback = std::function<void(double waited_seconds)>;
void receive_all(int fd, void* data, size_t bytes, const WaitCallback& on_wait);
// The next message; MalformedMessage when its length is past `max_length`.
std::pair<MessageType, std::string> receive_message(int fd, const WaitCallback& on_wait,
                                                    uint64_t max_length = kMaxMessageBytes);

// The next message, given up (PeerClosed) at `deadline` however the bytes trickle in.
std::pair<MessageType, std::string> receive_message_before(int fd, std::chrono::steady_clock::time_point deadline,
                                                           uint64_t max_length);

// Parts framed as (8-byte length, bytes) after each other, and back (MalformedMessage for a
// framing that overruns its bytes).
std::string join_parts(const std::vector<std::string>& parts);
std::vector<std::string> split_parts(const std::string& joined);

void set_no_delay(int fd);

}  // namespace dpbench
