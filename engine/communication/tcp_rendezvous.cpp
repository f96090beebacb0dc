// The rendezvous of a job started without MPI (see the header): rank 0's gathering of the ranks
// (one poll loop serving every connection at once), and the other ranks' join.
#include "engine/communication/tcp_rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "engine/communication/keyed_hash.h"
#include "engine/communication/tcp_wire.h"
#include "engine/errors.h"
#include "engine/machine/text_content.h"

namespace dpbench {
namespace {

using Clock = std::chrono::steady_clock;

// How long a connection may take to prove itself (it takes a real rank milliseconds), and how
// many may try at once: past that, the oldest is dropped (a real rank that loses its place retries).
constexpr double kHandshakeSeconds = 3.0;
constexpr size_t kMaxPendingConnections = 64;

Clock::time_point after(Clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
}

// A small frame to a peer that must not hold us up: all of it at once, or the peer is dropped.
bool send_now(int fd, MessageType type, const std::string& body) {
  std::string frame(kFrameHeaderBytes, '\0');
  frame[0] = static_cast<char>(type);
  const uint64_t length = body.size();
  std::memcpy(&frame[1], &length, sizeof length);
  frame += body;
  return ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(frame.size());
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

std::string identity_hint(const LaunchEnvironment& launch) {
  return launch.identity_variables + " or DPBENCH_RENDEZVOUS_TOKEN";
}

// Rank 0's side: listening sockets, connections still proving themselves, and the ranks' places.
class Gathering {
 public:
  Gathering(const LaunchEnvironment& launch, const std::string& my_host, double timeout_seconds)
      : launch_(launch), timeout_seconds_(timeout_seconds), deadline_(after(Clock::now(), timeout_seconds)) {
    check_host_name(my_host);  // it travels in the host table
    const size_t size = static_cast<size_t>(launch.world_size);
    data_.assign(size, -1);
    control_.assign(size, -1);
    joined_.assign(size, RankHello{});
    challenges_.assign(size, "");
    hosts_.assign(size, "");
    hosts_[0] = my_host;
    joined_[0].host = my_host;
    joined_[0].local_rank = launch.local_rank;
  }
  ~Gathering() {
    for (int fd : listeners_) close_quietly(fd);
    for (const Pending& p : pending_) close_quietly(p.fd);
    for (int fd : data_) close_quietly(fd);
    for (int fd : control_) close_quietly(fd);
  }
  Gathering(const Gathering&) = delete;
  Gathering& operator=(const Gathering&) = delete;

  MetRanks run();

 private:
  struct Pending {
    int fd;
    Clock::time_point deadline;
    std::string challenge;
    std::string received;
  };
  struct Place {  // a registered connection: which rank, which kind
    int rank;
    ConnectionKind kind;
  };

  void listen();
  bool bind_port(int port, std::string* why);
  void accept_new(int listener);
  void read_pending(Pending& p);
  void on_hello(Pending& p, const std::string& body);
  std::string misfit(const RankHello& hello) const;
  [[noreturn]] void end_job(const std::string& line, int offender_fd, const RankHello& offender, const std::string& challenge);
  [[noreturn]] void time_out() const;
  void drop(Pending& p) {
    close_quietly(p.fd);
    p.fd = -1;
    ++strangers_;
  }
  int& slot(const Place& place) { return (place.kind == kDataConnection ? data_ : control_)[static_cast<size_t>(place.rank)]; }
  bool complete() const {
    for (size_t r = 1; r < data_.size(); ++r)
      if (data_[r] < 0 || control_[r] < 0) return false;
    return true;
  }
  std::string address() const { return launch_.rendezvous_host + ":" + std::to_string(port_); }

  const LaunchEnvironment& launch_;
  double timeout_seconds_;
  Clock::time_point deadline_;
  int port_ = 0;
  std::vector<int> listeners_;
  std::vector<Pending> pending_;
  std::vector<int> data_, control_;
  std::vector<RankHello> joined_;                  // by rank: its data connection's hello
  std::vector<std::string> challenges_;            // by rank: the data connection's challenge
  std::vector<std::string> hosts_;
  int strangers_ = 0;                              // connections closed without proof
};

bool Gathering::bind_port(int port, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(launch_.rendezvous_host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0)
    throw ConfigError("rendezvous: rank 0 cannot resolve " + launch_.rendezvous_host + " (" + gai_strerror(resolved) +
                      "), where it should listen; name rank 0's host in MASTER_ADDR (" + launch_.source + ")");
  bool busy = false;
  for (addrinfo* a = found; a != nullptr && !busy; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (a->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listeners_.push_back(fd);
      continue;
    }
    busy = errno == EADDRINUSE;
    *why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (busy || listeners_.empty()) {
    for (int fd : listeners_) ::close(fd);
    listeners_.clear();
    if (!busy)
      throw ConfigError("rendezvous: rank 0 cannot listen at " + launch_.rendezvous_host + " (" + *why +
                        "): it is no address of this host; name rank 0's host in MASTER_ADDR (" + launch_.source + ")");
    return false;
  }
  port_ = port;
  return true;
}

void Gathering::listen() {
  std::string why = "no address to listen at";
  for (int port : launch_.rendezvous_ports)
    if (bind_port(port, &why)) return;
  throw RuntimeError("rendezvous: rank 0 cannot listen on port " + describe_ports(launch_.rendezvous_ports) + " at " +
                     launch_.rendezvous_host + " (" + why +
                     "); give a free port with --rendezvous_port (or MASTER_PORT)");
}

void Gathering::accept_new(int listener) {
  for (;;) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;  // none left (EAGAIN), or one that vanished
    if (pending_.size() >= kMaxPendingConnections) {
      drop(pending_.front());
      pending_.erase(pending_.begin());
    }
    set_no_delay(fd);
    Pending p{fd, after(Clock::now(), kHandshakeSeconds), random_bytes(kNonceBytes), ""};
    if (!send_now(fd, kChallenge, challenge_body(p.challenge))) {
      drop(p);
      continue;
    }
    pending_.push_back(std::move(p));
  }
}

// What has arrived of a hello: its header first (a hello, no longer than a hello can be), then
// its body. Never more than a hello's bytes are held for a connection that has not proven itself.
void Gathering::read_pending(Pending& p) {
  size_t wanted = kFrameHeaderBytes;
  if (p.received.size() >= kFrameHeaderBytes) {
    uint64_t length = 0;
    std::memcpy(&length, p.received.data() + 1, sizeof length);
    wanted += static_cast<size_t>(length);
  }
  char buffer[kFrameHeaderBytes + kMaxHelloBytes];
  const ssize_t got = ::recv(p.fd, buffer, wanted - p.received.size(), MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) return drop(p);
  p.received.append(buffer, static_cast<size_t>(got));
  if (p.received.size() == kFrameHeaderBytes) {
    uint64_t length = 0;
    std::memcpy(&length, p.received.data() + 1, sizeof length);
    if (static_cast<uint8_t>(p.received[0]) != kHello || length > kMaxHelloBytes || length == 0) return drop(p);
    return;
  }
  if (p.received.size() == wanted) on_hello(p, p.received.substr(kFrameHeaderBytes));
}

std::string Gathering::misfit(const RankHello& hello) const {
  const std::string at = "rendezvous at " + address() + ": ";
  if (hello.world_size != launch_.world_size)
    return at + "rank " + std::to_string(hello.rank) + " was started for " + std::to_string(hello.world_size) +
           " processes, rank 0 for " + std::to_string(launch_.world_size) + "; start every rank with the same " +
           launch_.world_size_variable;
  const std::vector<int>& slots = hello.kind == kDataConnection ? data_ : control_;
  if (hello.rank < 1 || hello.rank >= launch_.world_size || slots[static_cast<size_t>(hello.rank)] >= 0)
    return at + "two processes say they are rank " + std::to_string(hello.rank) + "; give every process its own " +
           launch_.rank_variable;
  if (hello.kind == kDataConnection)
    for (size_t r = 0; r < joined_.size(); ++r)
      if ((r == 0 || data_[r] >= 0) && joined_[r].host == hello.host && joined_[r].local_rank == hello.local_rank)
        return at + "ranks " + std::to_string(r) + " and " + std::to_string(hello.rank) + " both say they are local rank " +
               std::to_string(hello.local_rank) + " of host " + hello.host + "; give every process of a host its own " +
               launch_.local_rank_variable;
  return "";
}

void Gathering::on_hello(Pending& p, const std::string& body) {
  const std::optional<RankHello> hello = proven_hello(body, p.challenge, launch_);
  if (!hello) {
    send_now(p.fd, kRefused, "");  // no reason given to whoever it is: it learns nothing of the job
    return drop(p);
  }
  const std::string problem = misfit(*hello);
  if (!problem.empty()) end_job(problem, p.fd, *hello, p.challenge);
  const Place place{hello->rank, hello->kind};
  if (!send_now(p.fd, kWelcome, welcome_body(*hello, p.challenge, launch_))) return drop(p);
  slot(place) = p.fd;
  p.fd = -1;
  if (hello->kind == kDataConnection) {
    joined_[static_cast<size_t>(hello->rank)] = *hello;
    challenges_[static_cast<size_t>(hello->rank)] = p.challenge;
    hosts_[static_cast<size_t>(hello->rank)] = hello->host;
  }
}

void Gathering::end_job(const std::string& line, int offender_fd, const RankHello& offender, const std::string& challenge) {
  send_now(offender_fd, kRefused, refusal_body(line, offender, challenge, launch_));
  for (size_t r = 1; r < data_.size(); ++r)
    if (data_[r] >= 0) send_now(data_[r], kRefused, refusal_body(line, joined_[r], challenges_[r], launch_));
  throw ConfigError(line);
}

void Gathering::time_out() const {
  std::vector<int> missing;
  for (size_t r = 1; r < data_.size(); ++r)
    if (data_[r] < 0 || control_[r] < 0) missing.push_back(static_cast<int>(r));
  std::string strangers;
  if (strangers_ > 0)
    strangers = "; " + std::to_string(strangers_) + " connection" + (strangers_ > 1 ? "s" : "") +
                " that did not prove to be this job's were closed (a rank given other " + identity_hint(launch_) + "?)";
  throw RuntimeError("rendezvous at " + address() + ": rank" + (missing.size() > 1 ? "s " : " ") + list_ranks(missing) +
                     " of " + std::to_string(launch_.world_size) + " did not arrive within " +
                     seconds_text(timeout_seconds_) + " s; start every rank (" + launch_.source +
                     "), or raise --collective_timeout" + strangers);
}

MetRanks Gathering::run() {
  listen();
  while (!complete()) {
    if (Clock::now() >= deadline_) time_out();
    std::vector<pollfd> entries;
    for (int fd : listeners_) entries.push_back(pollfd{fd, POLLIN, 0});
    for (const Pending& p : pending_) entries.push_back(pollfd{p.fd, POLLIN, 0});
    std::vector<Place> places;  // a rank that leaves before the job is complete frees its place
    for (int r = 1; r < launch_.world_size; ++r)
      for (ConnectionKind kind : {kDataConnection, kControlConnection})
        if (slot(Place{r, kind}) >= 0) {
          entries.push_back(pollfd{slot(Place{r, kind}), POLLRDHUP, 0});
          places.push_back(Place{r, kind});
        }
    if (::poll(entries.data(), entries.size(), 100) < 0 && errno != EINTR)
      throw RuntimeError(std::string("rendezvous: poll failed: ") + std::strerror(errno));
    const size_t first_pending = listeners_.size(), first_place = first_pending + pending_.size();
    for (size_t i = 0; i < places.size(); ++i)
      if (entries[first_place + i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        close_quietly(slot(places[i]));
        slot(places[i]) = -1;
      }
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (entries[first_pending + i].revents != 0) read_pending(pending_[i]);
      if (pending_[i].fd >= 0 && now > pending_[i].deadline) drop(pending_[i]);
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return p.fd < 0; }),
                   pending_.end());
    for (size_t i = 0; i < first_pending; ++i)
      if (entries[i].revents & POLLIN) accept_new(listeners_[i]);
  }
  // Every rank is in: the port is free for the next job, and latecomers find nobody.
  for (int fd : listeners_) ::close(fd);
  listeners_.clear();
  for (Pending& p : pending_) drop(p);
  pending_.clear();
  const std::string table = join_parts(hosts_);
  for (size_t r = 1; r < data_.size(); ++r) send_message(data_[r], kParts, table);
  MetRanks met{data_, control_, hosts_};
  data_.assign(data_.size(), -1);
  control_.assign(control_.size(), -1);
  return met;
}

// ---- the other ranks ----

// A connection to host:port within `deadline`; -1 with `why` when none.
int connect_before(const std::string& host, int port, Clock::time_point deadline, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0) {
    *why = std::string("cannot resolve the host: ") + gai_strerror(resolved);
    return -1;
  }
  int connected = -1;
  for (addrinfo* a = found; a != nullptr && connected < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int error = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd entry{fd, POLLOUT, 0};
      socklen_t length = sizeof error;
      if (::poll(&entry, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) error = ETIMEDOUT;
      else ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    }
    if (error == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      set_no_delay(fd);
      connected = fd;
    } else {
      *why = std::strerror(error);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  return connected;
}

struct Joined {
  int fd = -1;
  RankHello hello;
  std::string challenge;
};

// One connection to the rank 0 at `port` that proves itself both ways; fd -1 with `why` when the
// one answering is not this job's rank 0 (or nobody answers); ConfigError when rank 0 ends the job.
Joined open_proven(const LaunchEnvironment& launch, const std::string& my_host, int port, ConnectionKind kind,
                   Clock::time_point deadline, std::string* why) {
  const Clock::time_point soon = std::min(deadline, after(Clock::now(), kHandshakeSeconds));
  Joined joined;
  const int fd = connect_before(launch.rendezvous_host, port, soon, why);
  if (fd < 0) return joined;
  const std::string where = launch.rendezvous_host + ":" + std::to_string(port);
  try {
    const auto [type, body] = receive_message_before(fd, soon, kChallengeBytes);
    const std::optional<std::string> challenge = nonce_of_challenge(body);
    if (type != kChallenge || !challenge) throw MalformedMessage("something that is not a dpbench rendezvous answers at " + where);
    joined.hello = RankHello{kind, launch.rank, launch.world_size, launch.local_rank, my_host, random_bytes(kNonceBytes)};
    joined.challenge = *challenge;
    send_message(fd, kHello, hello_body(joined.hello, joined.challenge, launch));
    const auto [verdict, answer] = receive_message_before(fd, soon, kMaxRefusalBytes);
    if (verdict == kWelcome && proven_welcome(answer, joined.hello, joined.challenge, launch)) {
      joined.fd = fd;
      return joined;
    }
    if (verdict == kRefused)
      if (const std::optional<std::string> line = proven_refusal(answer, joined.hello, joined.challenge, launch))
        throw ConfigError(*line);
    *why = "the rank 0 at " + where + " is not this job's: another job's, or one given other " + identity_hint(launch);
  } catch (const ConfigError&) {
    ::close(fd);
    throw;
  } catch (const RuntimeError& error) {
    *why = error.what();
  }
  ::close(fd);
  return joined;
}

// The job's hosts from rank 0, once every rank is in (or the line that ends the job).
std::vector<std::string> receive_host_table(const LaunchEnvironment& launch, const Joined& data,
                                            Clock::time_point deadline, const std::string& address) {
  const std::string timeout = "rendezvous at " + address + ": rank 0 did not hear from every rank in time; start every rank (" +
                              launch.source + "), or raise --collective_timeout";
  std::pair<MessageType, std::string> answer;
  try {
    answer = receive_message_before(data.fd, deadline,
                                    static_cast<uint64_t>(launch.world_size) * (8 + kMaxHostBytes));
  } catch (const PeerClosed&) {
    throw RuntimeError(timeout);
  }
  if (answer.first == kRefused)
    if (const std::optional<std::string> line = proven_refusal(answer.second, data.hello, data.challenge, launch))
      throw ConfigError(*line);
  std::vector<std::string> hosts;
  if (answer.first == kParts) hosts = split_parts(answer.second);
  const bool fine = hosts.size() == static_cast<size_t>(launch.world_size) &&
                    std::all_of(hosts.begin(), hosts.end(), [](const std::string& h) { return !h.empty() && printable(h); });
  if (!fine) throw RuntimeError("rendezvous at " + address + ": rank 0 answered with something else than the job's hosts");
  return hosts;
}

}  // namespace

MetRanks gather_ranks(const LaunchEnvironment& launch, const std::string& my_host, double timeout_seconds) {
  Gathering gathering(launch, my_host, timeout_seconds);
  return gathering.run();
}

MetRanks join_rank_zero(const LaunchEnvironment& launch, const std::string& my_host, double timeout_seconds) {
  const Clock::time_point deadline = after(Clock::now(), timeout_seconds);
  const std::string address = launch.rendezvous_host + ":" + describe_ports(launch.rendezvous_ports);
  std::string why = "nothing answered";
  while (Clock::now() < deadline) {
    for (int port : launch.rendezvous_ports) {
      Joined data = open_proven(launch, my_host, port, kDataConnection, deadline, &why);
      if (data.fd < 0) continue;
      const std::string at = launch.rendezvous_host + ":" + std::to_string(port);
      Joined control;
      try {
        // The control connection goes to the same rank 0; should it end the job meanwhile, it
        // says why on the data connection.
        while (control.fd < 0 && Clock::now() < deadline) {
          pollfd entry{data.fd, POLLIN, 0};
          if (::poll(&entry, 1, 0) > 0) receive_host_table(launch, data, deadline, at);
          control = open_proven(launch, my_host, port, kControlConnection, deadline, &why);
          if (control.fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (control.fd >= 0) return MetRanks{{data.fd}, {control.fd}, receive_host_table(launch, data, deadline, at)};
      } catch (...) {
        ::close(data.fd);
        close_quietly(control.fd);
        throw;
      }
      ::close(data.fd);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw RuntimeError("rendezvous: rank " + std::to_string(launch.rank) + " could not reach rank 0 at " + address +
                     " within " + seconds_text(timeout_seconds) + " s (" + why + "); is rank 0 running, and " +
                     address + " reachable from " + my_host + "? (" + launch.source + ")");
}

}  // namespace dpbench
