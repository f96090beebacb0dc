// The TCP rendezvous (Note [what the rendezvous trusts]): the handshake's proofs byte by byte
// (replayed, tampered, another job's, another token's, malformed), then real ranks meeting on this
// host in threads: with strangers connected beside them, ranks whose variables contradict each
// other (one line on both sides), and a rank of another job that never joins.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "engine/communication/keyed_hash.h"
#include "engine/communication/rendezvous_handshake.h"
#include "engine/communication/tcp_rendezvous.h"
#include "engine/errors.h"

using namespace dpbench;

namespace {

LaunchEnvironment job(int rank, int world_size = 2, const std::string& identity = "torchrun run a",
                      const std::string& token = "") {
  LaunchEnvironment launch;
  launch.launcher = Launcher::torchrun;
  launch.rank = rank;
  launch.world_size = world_size;
  launch.local_rank = rank;
  launch.job_identity = identity;
  launch.rendezvous_token = token;
  launch.identity_variables = "TORCHELASTIC_RUN_ID";
  launch.rank_variable = "RANK";
  launch.world_size_variable = "WORLD_SIZE";
  launch.local_rank_variable = "LOCAL_RANK";
  launch.source = "made up";
  launch.rendezvous_host = "127.0.0.1";
  return launch;
}

RankHello rank_hello(int rank = 1) { return RankHello{kDataConnection, rank, 2, rank, "host-b", random_bytes(kNonceBytes)}; }

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A stranger's connection to 127.0.0.1:port once something listens there, -1 after 5 s.
int connect_stranger(int port) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
    ::close(fd);
    ::usleep(10000);
  }
  return -1;
}

void close_all(const MetRanks& met) {
  for (int fd : met.data) if (fd >= 0) ::close(fd);
  for (int fd : met.control) if (fd >= 0) ::close(fd);
}

}  // namespace

TEST_CASE("a hello proves itself for its challenge, its job and its token only", "[rendezvous]") {
  const LaunchEnvironment launch = job(0);
  const std::string challenge = random_bytes(kNonceBytes);
  const RankHello hello = rank_hello();
  const std::string body = hello_body(hello, challenge, launch);
  CHECK(body.size() <= kMaxHelloBytes);
  const auto proven = proven_hello(body, challenge, launch);
  REQUIRE(proven);
  CHECK(proven->rank == 1);
  CHECK(proven->world_size == 2);
  CHECK(proven->local_rank == 1);
  CHECK(proven->host == "host-b");
  CHECK(proven->nonce == hello.nonce);
  CHECK(!proven_hello(body, random_bytes(kNonceBytes), launch));                    // replayed on another connection
  CHECK(!proven_hello(body, challenge, job(0, 2, "torchrun run b")));               // another job's
  CHECK(!proven_hello(body, challenge, job(0, 2, "torchrun run a", "sixteen bytes!!!")));  // another token
  std::string tampered = body;
  tampered[5] = 7;  // the rank it claims
  CHECK(!proven_hello(tampered, challenge, launch));
  CHECK(!proven_hello(body.substr(0, body.size() - 1), challenge, launch));
  CHECK(!proven_hello(body + "x", challenge, launch));
  CHECK(!proven_hello("", challenge, launch));
  CHECK(!proven_hello(std::string(kMaxHelloBytes, '\0'), challenge, launch));
  tampered = body;
  tampered[0] = 'X';  // the magic
  CHECK(!proven_hello(tampered, challenge, launch));
  // With the token on both sides the hello proves itself; the token itself is nowhere in it.
  const LaunchEnvironment secret = job(0, 2, "torchrun run a", "0123456789abcdef");
  const std::string with_token = hello_body(hello, challenge, secret);
  CHECK(proven_hello(with_token, challenge, secret));
  CHECK(!proven_hello(with_token, challenge, launch));
  CHECK(with_token.find("0123456789abcdef") == std::string::npos);
}

TEST_CASE("a host name that cannot travel, and the longest that can", "[rendezvous]") {
  const LaunchEnvironment launch = job(1);
  const std::string challenge = random_bytes(kNonceBytes);
  RankHello hello = rank_hello();
  hello.host = std::string(255, 'h');
  CHECK(hello_body(hello, challenge, launch).size() == kMaxHelloBytes);
  CHECK(proven_hello(hello_body(hello, challenge, launch), challenge, launch)->host == hello.host);
  for (const std::string host : {std::string(256, 'h'), std::string(), std::string("a\x1b[2Jb")}) {
    hello.host = host;
    CHECK_THROWS_AS(hello_body(hello, challenge, launch), ConfigError);
  }
  CHECK_THROWS_WITH(hello_body(hello, challenge, launch), Catch::Matchers::Contains("\"a\\x1B[2Jb\"") &&
                                                              Catch::Matchers::Contains("DPBENCH_HOST_NAME"));
  // Rank 0's own name travels in the host table: refused before it listens.
  LaunchEnvironment zero = job(0);
  zero.rendezvous_ports = {free_port()};
  CHECK_THROWS_AS(gather_ranks(zero, "a\x1b[2Jb", 1), ConfigError);
}

TEST_CASE("rank 0's challenge, welcome and refusal", "[rendezvous]") {
  const LaunchEnvironment launch = job(0);
  const std::string nonce = random_bytes(kNonceBytes);
  CHECK(challenge_body(nonce).size() == kChallengeBytes);
  CHECK(nonce_of_challenge(challenge_body(nonce)) == nonce);
  CHECK(!nonce_of_challenge(challenge_body(nonce) + "x"));
  CHECK(!nonce_of_challenge(std::string(kChallengeBytes, 'x')));
  const RankHello hello = rank_hello();
  const std::string welcome = welcome_body(hello, nonce, launch);
  CHECK(proven_welcome(welcome, hello, nonce, launch));
  CHECK(!proven_welcome(welcome, rank_hello(), nonce, launch));  // another rank's nonce
  CHECK(!proven_welcome(welcome, hello, nonce, job(0, 2, "torchrun run b")));
  CHECK(!proven_welcome(std::string(kMacBytes, '\0'), hello, nonce, launch));
  const std::string refusal = refusal_body("rendezvous at h:1: two processes say they are rank 1", hello, nonce, launch);
  CHECK(proven_refusal(refusal, hello, nonce, launch) == "rendezvous at h:1: two processes say they are rank 1");
  // A stranger cannot end a rank with a line of its own.
  CHECK(!proven_refusal(std::string(kMacBytes, '\0') + "give up", hello, nonce, launch));
  std::string changed = refusal;
  changed.back() = '2';
  CHECK(!proven_refusal(changed, hello, nonce, launch));
  CHECK(!proven_refusal("", hello, nonce, launch));
  CHECK(!proven_refusal(refusal, hello, nonce, job(0, 2, "torchrun run b")));
}

TEST_CASE("two ranks meet with strangers connected beside them, and the port is free afterwards",
          "[rendezvous]") {
  const int port = free_port();
  LaunchEnvironment zero = job(0), one = job(1);
  zero.rendezvous_ports = one.rendezvous_ports = {port};
  auto gathered = std::async(std::launch::async, [&] { return gather_ranks(zero, "host-a", 20); });
  // Strangers first: one idle, one sending garbage, one announcing 16 GiB, one forging a hello.
  const int idle = connect_stranger(port);
  const int garbage = connect_stranger(port);
  const int huge = connect_stranger(port);
  const int forger = connect_stranger(port);
  REQUIRE(idle >= 0);
  const std::string junk = "GET / HTTP/1.0\r\n\r\n";
  ::send(garbage, junk.data(), junk.size(), MSG_NOSIGNAL);
  char header[9] = {1};
  const uint64_t length = uint64_t{1} << 34;
  std::memcpy(header + 1, &length, sizeof length);
  ::send(huge, header, sizeof header, MSG_NOSIGNAL);
  char forged[9 + kMaxHelloBytes] = {1};
  const uint64_t hello_length = kMaxHelloBytes;
  std::memcpy(forged + 1, &hello_length, sizeof hello_length);
  std::memcpy(forged + 9, "DPB2", 4);
  ::send(forger, forged, sizeof forged, MSG_NOSIGNAL);
  const MetRanks joined = join_rank_zero(one, "host-b", 20);
  const MetRanks met = gathered.get();
  CHECK(met.hostnames == std::vector<std::string>{"host-a", "host-b"});
  CHECK(joined.hostnames == met.hostnames);
  CHECK(met.data.size() == 2);
  CHECK(met.data[1] >= 0);
  CHECK(joined.data.size() == 1);
  close_all(met);
  close_all(joined);
  for (int fd : {idle, garbage, huge, forger}) ::close(fd);
  // Rank 0 stopped listening once the job was complete: nothing answers there now.
  const int late = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  CHECK(::connect(late, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0);
  ::close(late);
}

TEST_CASE("ranks whose variables contradict each other end the job on both sides with one line",
          "[rendezvous]") {
  struct Clash {
    std::function<void(LaunchEnvironment&)> change;
    std::string line;
  };
  const std::vector<Clash> clashes = {
      {[](LaunchEnvironment& l) { l.local_rank = 0; }, "ranks 0 and 1 both say they are local rank 0 of host host-a; give "
                                                       "every process of a host its own LOCAL_RANK"},
      {[](LaunchEnvironment& l) { l.world_size = 3; }, "rank 1 was started for 3 processes, rank 0 for 2; start every "
                                                       "rank with the same WORLD_SIZE"},
  };
  for (const Clash& clash : clashes) {
    INFO(clash.line);
    const int port = free_port();
    LaunchEnvironment zero = job(0), one = job(1);
    zero.rendezvous_ports = one.rendezvous_ports = {port};
    clash.change(one);
    auto gathered = std::async(std::launch::async, [&] { return gather_ranks(zero, "host-a", 20); });
    CHECK_THROWS_WITH(join_rank_zero(one, "host-a", 20), Catch::Matchers::Contains(clash.line));
    CHECK_THROWS_WITH(gathered.get(), Catch::Matchers::Contains(clash.line));
  }
}

TEST_CASE("a rank of another job (or given another token) never joins", "[rendezvous]") {
  for (const auto& [identity, token] : std::vector<std::pair<std::string, std::string>>{
           {"torchrun run b", ""}, {"torchrun run a", "0123456789abcdef"}}) {
    INFO(identity + " / " + token);
    const int port = free_port();
    LaunchEnvironment zero = job(0), other = job(1, 2, identity, token);
    zero.rendezvous_ports = other.rendezvous_ports = {port};
    auto gathered = std::async(std::launch::async, [&] { return gather_ranks(zero, "host-a", 2); });
    CHECK_THROWS_WITH(join_rank_zero(other, "host-b", 2),
                      Catch::Matchers::Contains("is not this job's: another job's, or one given other "
                                                "TORCHELASTIC_RUN_ID or DPBENCH_RENDEZVOUS_TOKEN"));
    CHECK_THROWS_WITH(gathered.get(), Catch::Matchers::Contains("rank 1 of 2 did not arrive within 2 s") &&
                                          Catch::Matchers::Contains("did not prove to be this job's were closed"));
  }
}
