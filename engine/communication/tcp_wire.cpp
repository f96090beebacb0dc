// Framed messages on POSIX sockets (see the header).
#include "engine/communication/tcp_wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace dpbench {
namespace {

// A body is read in pieces of at most this many bytes, the string growing piece by piece.
constexpr size_t kReceivePieceBytes = size_t{1} << 20;

// Waits until `fd` is readable, calling `on_wait(seconds waited)` every 100 ms while it is not.
void wait_readable(int fd, const WaitCallback& on_wait) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    pollfd entry{fd, POLLIN, 0};
    const int ready = ::poll(&entry, 1, 100);
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) throw RuntimeError(std::string("poll failed: ") + std::strerror(errno));
    if (on_wait) on_wait(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

// `bytes` from `fd`, calling `wait(fd)` to block until some are readable.
template <typename Wait>
void receive_bytes(int fd, void* data, size_t bytes, const Wait& wait) {
  char* at = static_cast<char*>(data);
  while (bytes > 0) {
    wait(fd);
    const ssize_t got = ::recv(fd, at, bytes, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) throw PeerClosed(got == 0 ? "the connection was closed" : std::strerror(errno));
    at += got;
    bytes -= static_cast<size_t>(got);
  }
}

template <typename Wait>
std::pair<MessageType, std::string> receive_framed(int fd, uint64_t max_length, const Wait& wait) {
  char header[kFrameHeaderBytes];
  receive_bytes(fd, header, sizeof header, wait);
  uint64_t length = 0;
  std::memcpy(&length, header + 1, sizeof length);
  if (length > max_length)
    throw MalformedMessage("a peer announced a message of " + std::to_string(length) + " bytes, past the " +
                           std::to_string(max_length) + " expected");
  std::string body;
  while (body.size() < length) {
    const size_t have = body.size();
    body.resize(have + static_cast<size_t>(std::min<uint64_t>(length - have, kReceivePieceBytes)));
    receive_bytes(fd, body.data() + have, body.size() - have, wait);
  }
  return {static_cast<MessageType>(header[0]), std::move(body)};
}

}  // namespace

void send_all(int fd, const void* data, size_t bytes) {
  const char* at = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t sent = ::send(fd, at, bytes, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) throw PeerClosed(std::string("send failed: ") + std::strerror(errno));
    at += sent;
    bytes -= static_cast<size_t>(sent);
  }
}

void send_message(int fd, MessageType type, const std::string& body) {
  std::string frame(kFrameHeaderBytes, '\0');
  frame[0] = static_cast<char>(type);
  const uint64_t length = body.size();
  std::memcpy(&frame[1], &length, sizeof length);
  frame += body;
  send_all(fd, frame.data(), frame.size());
}


void receive_all(int fd, void* data, size_t bytes, const WaitCallback& on_wait) {
  receive_bytes(fd, data, bytes, [&](int socket) { wait_readable(socket, on_wait); });
}

std::pair<MessageType, std::string> receive_message(int fd, const WaitCallback& on_wait, uint64_t max_length) {
  return receive_framed(fd, max_length, [&](int socket) { wait_readable(socket, on_wait); });
}

std::pair<MessageType, std::string> receive_message_before(int fd, std::chrono::steady_clock::time_point deadline,
                                                           uint64_t max_length) {
  return receive_framed(fd, max_length, [deadline](int socket) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw PeerClosed("no answer in time");
      pollfd entry{socket, POLLIN, 0};
      const int ready = ::poll(&entry, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
      if (ready > 0) return;
      if (ready < 0 && errno != EINTR) throw RuntimeError(std::string("poll failed: ") + std::strerror(errno));
    }
  });
}

std::string join_parts(const std::vector<std::string>& parts) {
  std::string joined;
  for (const std::string& part : parts) {
    const uint64_t length = part.size();
    joined.append(reinterpret_cast<const char*>(&length), sizeof length);
    joined += part;
  }
  return joined;
}

std::vector<std::string> split_parts(const std::string& joined) {
  std::vector<std::string> parts;
  for (size_t at = 0; at < joined.size();) {
    uint64_t length = 0;
    if (joined.size() - at < sizeof length) throw MalformedMessage("a message's parts end inside a length");
    std::memcpy(&length, joined.data() + at, sizeof length);
    at += sizeof length;
    if (length > joined.size() - at) throw MalformedMessage("a message's part runs past its end");
    parts.push_back(joined.substr(at, static_cast<size_t>(length)));
    at += static_cast<size_t>(length);
  }
  return parts;
}

void set_no_delay(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

}  // namespace dpbench
