// The TCP process group's framed messages on a socket pair: a length past the caller's bound is
// refused before anything is allocated or read, a body larger than one receive piece arrives
// whole, a receive with a deadline gives up, and parts whose lengths overrun their bytes are
// refused.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine/communication/tcp_wire.h"

using namespace dpbench;

namespace {

struct SocketPair {
  int ends[2] = {-1, -1};
  SocketPair() { REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) == 0); }
  ~SocketPair() {
    ::close(ends[0]);
    ::close(ends[1]);
  }
};

std::string header(uint8_t type, uint64_t length) {
  std::string bytes(kFrameHeaderBytes, '\0');
  bytes[0] = static_cast<char>(type);
  std::memcpy(&bytes[1], &length, sizeof length);
  return bytes;
}

}  // namespace

TEST_CASE("a message's length is checked against the bound before its body is read", "[tcp_wire]") {
  SocketPair pair;
  const std::string announced = header(kHello, uint64_t{1} << 34);
  send_all(pair.ends[0], announced.data(), announced.size());
  CHECK_THROWS_AS(receive_message(pair.ends[1], nullptr, 512), MalformedMessage);
  send_message(pair.ends[0], kPing, std::string(65, 'x'));
  CHECK_THROWS_WITH(receive_message(pair.ends[1], nullptr, kMaxControlMessageBytes),
                    Catch::Matchers::Contains("a message of 65 bytes, past the 64 expected"));
}

TEST_CASE("a body larger than a receive piece arrives whole, in order", "[tcp_wire]") {
  SocketPair pair;
  std::string body(3 * (size_t{1} << 20) + 123, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7 + i / 4096);
  std::thread sender([&] { send_message(pair.ends[0], kParts, body); });
  const auto [type, got] = receive_message(pair.ends[1], nullptr);
  sender.join();
  CHECK(type == kParts);
  CHECK(got == body);
}

TEST_CASE("a receive with a deadline gives up when the peer says nothing, or closes", "[tcp_wire]") {
  SocketPair pair;
  const std::string part = header(kHello, 10) + "abc";  // a header and 3 of 10 bytes, then silence
  send_all(pair.ends[0], part.data(), part.size());
  const auto soon = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  CHECK_THROWS_AS(receive_message_before(pair.ends[1], soon, 512), PeerClosed);
  ::shutdown(pair.ends[0], SHUT_WR);
  CHECK_THROWS_AS(receive_message(pair.ends[1], nullptr), PeerClosed);
}

TEST_CASE("parts joined and split back, and a framing that overruns its bytes is refused", "[tcp_wire]") {
  const std::vector<std::string> parts = {"host-a", "", std::string(300, 'z')};
  CHECK(split_parts(join_parts(parts)) == parts);
  CHECK(split_parts("").empty());
  const std::string joined = join_parts(parts);
  CHECK_THROWS_AS(split_parts(joined.substr(0, joined.size() - 1)), MalformedMessage);
  CHECK_THROWS_AS(split_parts(joined + "abc"), MalformedMessage);
  std::string huge(8, '\0');
  const uint64_t length = ~uint64_t{0} - 4;  // would wrap the position around
  std::memcpy(huge.data(), &length, sizeof length);
  CHECK_THROWS_WITH(split_parts(huge + "abcd"), Catch::Matchers::Contains("runs past its end"));
}
