// TcpProcessGroup (see the header) on POSIX sockets.
#include "engine/tcp_process_group.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "engine/environment.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Every message: a type byte, an 8-byte length, the bytes.
enum MessageType : uint8_t { kHello = 1, kParts = 2, kVote = 3, kAbort = 4, kPing = 5, kPong = 6, kBye = 7 };
enum ConnectionKind : uint8_t { kDataConnection = 0, kControlConnection = 1 };
constexpr char kMagic[4] = {'D', 'P', 'B', '1'};
constexpr double kProbeReplySeconds = 5.0;

struct PeerClosed : RuntimeError {
  using RuntimeError::RuntimeError;
};

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
  std::string frame(9, '\0');
  frame[0] = static_cast<char>(type);
  const uint64_t length = body.size();
  std::memcpy(&frame[1], &length, sizeof length);
  frame += body;
  send_all(fd, frame.data(), frame.size());
}

// Waits until `fd` is readable, calling `on_wait(seconds waited)` every 100 ms while it is not.
void wait_readable(int fd, const std::function<void(double)>& on_wait) {
  const Clock::time_point start = Clock::now();
  for (;;) {
    pollfd entry{fd, POLLIN, 0};
    const int ready = ::poll(&entry, 1, 100);
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) throw RuntimeError(std::string("poll failed: ") + std::strerror(errno));
    if (on_wait) on_wait(seconds_since(start));
  }
}

void receive_all(int fd, void* data, size_t bytes, const std::function<void(double)>& on_wait) {
  char* at = static_cast<char*>(data);
  while (bytes > 0) {
    wait_readable(fd, on_wait);
    const ssize_t got = ::recv(fd, at, bytes, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) throw PeerClosed(got == 0 ? "the connection was closed" : std::strerror(errno));
    at += got;
    bytes -= static_cast<size_t>(got);
  }
}

std::pair<MessageType, std::string> receive_message(int fd, const std::function<void(double)>& on_wait) {
  char header[9];
  receive_all(fd, header, sizeof header, on_wait);
  uint64_t length = 0;
  std::memcpy(&length, header + 1, sizeof length);
  if (length > (uint64_t{1} << 34)) throw RuntimeError("a peer sent a message of " + std::to_string(length) + " bytes");
  std::string body(length, '\0');
  if (length > 0) receive_all(fd, body.data(), length, on_wait);
  return {static_cast<MessageType>(header[0]), std::move(body)};
}

// Parts framed as (8-byte length, bytes) after each other, and back.
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
  for (size_t at = 0; at + 8 <= joined.size();) {
    uint64_t length = 0;
    std::memcpy(&length, joined.data() + at, sizeof length);
    parts.push_back(joined.substr(at + 8, length));
    at += 8 + length;
  }
  return parts;
}

std::string hello(ConnectionKind kind, int rank, int size, const std::string& host) {
  std::string body(kMagic, sizeof kMagic);
  body += static_cast<char>(kind);
  const int32_t numbers[2] = {rank, size};
  body.append(reinterpret_cast<const char*>(numbers), sizeof numbers);
  return body + host;
}

void set_no_delay(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// A connection to host:port, retried while nobody listens there yet; -1 with `why` at the deadline.
int connect_until(const std::string& host, int port, Clock::time_point deadline, std::string* why) {
  while (Clock::now() < deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (resolved != 0) {
      *why = std::string("cannot resolve the host: ") + gai_strerror(resolved);
    } else {
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          set_no_delay(fd);
          return fd;
        }
        *why = std::strerror(errno);
        ::close(fd);
      }
      ::freeaddrinfo(found);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return -1;
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

}  // namespace

struct TcpProcessGroup::Connections {
  int listener = -1;
  // Rank 0: one per rank (its own entry -1). The others: entry 0, their connection to rank 0.
  std::vector<int> data, control;
  std::vector<bool> said_goodbye;
  std::mutex control_send;
  std::mutex pongs_mutex;
  std::vector<Clock::time_point> last_pong;
  ~Connections() {
    for (int fd : data) if (fd >= 0) ::close(fd);
    for (int fd : control) if (fd >= 0) ::close(fd);
    if (listener >= 0) ::close(listener);
  }
  void send_control(int to, MessageType type, const std::string& body) {
    std::lock_guard<std::mutex> lock(control_send);
    const int fd = control.at(static_cast<size_t>(to));
    if (fd >= 0) send_message(fd, type, body);
  }
};

TcpProcessGroup::TcpProcessGroup(const LaunchEnvironment& launch, double timeout_seconds)
    : launch_(launch), rank_(launch.rank), size_(launch.world_size), local_rank_(launch.local_rank),
      connections_(std::make_unique<Connections>()) {
  const std::string me = host_name();
  hostnames_.assign(static_cast<size_t>(size_), me);
  if (size_ == 1) return;
  Connections& c = *connections_;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout_seconds));
  const std::string address = launch.rendezvous_host + ":" + std::to_string(launch.rendezvous_port);
  char timeout_text[32];
  std::snprintf(timeout_text, sizeof timeout_text, "%g", timeout_seconds);
  c.data.assign(rank_ == 0 ? static_cast<size_t>(size_) : 1, -1);
  c.control.assign(c.data.size(), -1);
  c.said_goodbye.assign(c.data.size(), false);
  c.last_pong.assign(c.data.size(), Clock::time_point{});

  if (rank_ == 0) {
    c.listener = ::socket(AF_INET6, SOCK_STREAM, 0);
    const bool six = c.listener >= 0;
    if (!six) c.listener = ::socket(AF_INET, SOCK_STREAM, 0);
    const int on = 1, off = 0;
    ::setsockopt(c.listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    int bound = -1;
    if (six) {
      ::setsockopt(c.listener, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);  // IPv4 peers too
      sockaddr_in6 any{};
      any.sin6_family = AF_INET6;
      any.sin6_addr = in6addr_any;
      any.sin6_port = htons(static_cast<uint16_t>(launch.rendezvous_port));
      bound = ::bind(c.listener, reinterpret_cast<sockaddr*>(&any), sizeof any);
    } else {
      sockaddr_in any{};
      any.sin_family = AF_INET;
      any.sin_addr.s_addr = htonl(INADDR_ANY);
      any.sin_port = htons(static_cast<uint16_t>(launch.rendezvous_port));
      bound = ::bind(c.listener, reinterpret_cast<sockaddr*>(&any), sizeof any);
    }
    if (bound != 0 || ::listen(c.listener, 2 * size_) != 0)
      throw RuntimeError("rendezvous: rank 0 cannot listen on port " + std::to_string(launch.rendezvous_port) + " (" +
                         std::strerror(errno) + "); give a free port with --rendezvous_port (or MASTER_PORT)");
    for (int accepted = 0; accepted < 2 * (size_ - 1);) {
      pollfd entry{c.listener, POLLIN, 0};
      if (::poll(&entry, 1, 100) <= 0) {
        if (Clock::now() < deadline) continue;
        std::vector<int> missing;
        for (int r = 1; r < size_; ++r)
          if (c.data[static_cast<size_t>(r)] < 0 || c.control[static_cast<size_t>(r)] < 0) missing.push_back(r);
        throw RuntimeError("rendezvous at " + address + ": rank" + (missing.size() > 1 ? "s " : " ") +
                           list_ranks(missing) + " of " + std::to_string(size_) + " did not arrive within " +
                           timeout_text + " s; start every rank (" + launch.source +
                           "), or raise --collective_timeout");
      }
      const int fd = ::accept(c.listener, nullptr, nullptr);
      if (fd < 0) continue;
      set_no_delay(fd);
      try {
        const auto [type, body] = receive_message(fd, [&](double waited) {
          if (waited > 10) throw RuntimeError("a connection to the rendezvous sent nothing for 10 s");
        });
        int32_t numbers[2] = {-1, -1};
        if (type != kHello || body.size() < sizeof kMagic + 1 + sizeof numbers ||
            std::memcmp(body.data(), kMagic, sizeof kMagic) != 0)
          throw RuntimeError("something that is not a dpbench rank connected to the rendezvous port");
        const auto kind = static_cast<ConnectionKind>(body[sizeof kMagic]);
        std::memcpy(numbers, body.data() + sizeof kMagic + 1, sizeof numbers);
        const int peer = numbers[0], world = numbers[1];
        if (world != size_)
          throw ConfigError("rendezvous at " + address + ": rank " + std::to_string(peer) + " was started for " +
                            std::to_string(world) + " processes, rank 0 for " + std::to_string(size_) +
                            "; start every rank with the same world size");
        std::vector<int>& slots = kind == kControlConnection ? c.control : c.data;
        if (peer < 1 || peer >= size_ || slots[static_cast<size_t>(peer)] >= 0)
          throw ConfigError("rendezvous at " + address + ": two processes say they are rank " + std::to_string(peer) +
                            "; give every process its own rank");
        slots[static_cast<size_t>(peer)] = fd;
        if (kind == kDataConnection) hostnames_[static_cast<size_t>(peer)] = body.substr(sizeof kMagic + 1 + sizeof numbers);
        ++accepted;
      } catch (const ConfigError&) {
        ::close(fd);
        throw;
      } catch (const RuntimeError&) {
        ::close(fd);  // a stray connection: not one of ours
      }
    }
    const std::string table = join_parts(hostnames_);
    for (int r = 1; r < size_; ++r) send_message(c.data[static_cast<size_t>(r)], kParts, table);
  } else {
    std::string why = "nothing answered";
    for (ConnectionKind kind : {kDataConnection, kControlConnection}) {
      const int fd = connect_until(launch.rendezvous_host, launch.rendezvous_port, deadline, &why);
      if (fd < 0)
        throw RuntimeError("rendezvous: rank " + std::to_string(rank_) + " could not reach rank 0 at " + address +
                           " within " + timeout_text + " s (" + why + "); is rank 0 running, and " + address +
                           " reachable from " + me + "? (" + launch.source + ")");
      (kind == kDataConnection ? c.data : c.control)[0] = fd;
      send_message(fd, kHello, hello(kind, rank_, size_, me));
    }
    const auto [type, body] = receive_message(c.data[0], [&](double) {
      if (Clock::now() > deadline)
        throw RuntimeError("rendezvous at " + address + ": rank 0 did not hear from every rank within " + timeout_text +
                           " s; start every rank (" + launch.source + "), or raise --collective_timeout");
    });
    hostnames_ = split_parts(body);
    if (type != kParts || hostnames_.size() != static_cast<size_t>(size_))
      throw RuntimeError("rendezvous at " + address + ": rank 0 answered with something else than the job's hosts");
  }
  watcher_ = std::thread([this] { watch_control(); });
}

TcpProcessGroup::~TcpProcessGroup() {
  stopping_ = true;
  if (connections_ && size_ > 1) {
    for (size_t r = 0; r < connections_->control.size(); ++r) {
      try {
        connections_->send_control(static_cast<int>(r), kBye, "");
      } catch (...) {
      }
    }
  }
  if (watcher_.joinable()) watcher_.join();
}

void TcpProcessGroup::end_job(int exit_code, const std::string& line) const {
  if (!line.empty()) std::fprintf(stderr, "dpbench: error: %s\n", line.c_str());
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

void TcpProcessGroup::watch_control() {
  Connections& c = *connections_;
  while (!stopping_.load()) {
    std::vector<pollfd> entries;
    std::vector<int> peers;
    for (size_t r = 0; r < c.control.size(); ++r) {
      if (c.control[r] < 0 || c.said_goodbye[r]) continue;
      entries.push_back(pollfd{c.control[r], POLLIN, 0});
      peers.push_back(static_cast<int>(r));
    }
    if (entries.empty()) return;
    if (::poll(entries.data(), entries.size(), 200) <= 0) continue;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].revents == 0) continue;
      const int peer = peers[i];
      const int peer_rank = rank_ == 0 ? peer : 0;
      const std::string who = "rank " + std::to_string(peer_rank) + " (" + hostnames_[static_cast<size_t>(peer_rank)] + ")";
      MessageType type = kBye;
      std::string body;
      bool closed = false;
      try {
        std::tie(type, body) = receive_message(entries[i].fd, nullptr);
      } catch (const std::exception&) {
        closed = true;
      }
      if (stopping_.load()) return;
      if (closed) {
        // Note [a rank that ends without finishing]: one line, from rank 0 (or, when rank 0 is
        // the one gone, from rank 1), then every process ends.
        const std::string line = who + " ended without finishing (killed, or crashed); ending the job";
        if (rank_ == 0)
          for (size_t r = 1; r < c.control.size(); ++r)
            if (static_cast<int>(r) != peer) try { c.send_control(static_cast<int>(r), kAbort, "1"); } catch (...) {}
        end_job(1, rank_ == 0 || rank_ == 1 ? line : "");
      }
      if (type == kBye) {
        c.said_goodbye[static_cast<size_t>(peer)] = true;
      } else if (type == kPing) {
        try { c.send_control(peer, kPong, ""); } catch (...) {}
      } else if (type == kPong) {
        std::lock_guard<std::mutex> lock(c.pongs_mutex);
        c.last_pong[static_cast<size_t>(peer)] = Clock::now();
      } else if (type == kAbort) {
        // A failing rank said why before it aborted: pass it on and end quietly with its code.
        if (rank_ == 0)
          for (size_t r = 1; r < c.control.size(); ++r)
            if (static_cast<int>(r) != peer) try { c.send_control(static_cast<int>(r), kAbort, body); } catch (...) {}
        end_job(std::atoi(body.c_str()) != 0 ? std::atoi(body.c_str()) : 1, "");
      }
    }
  }
}

void TcpProcessGroup::abort(int exit_code) const {
  if (size_ > 1) {
    Connections& c = *connections_;
    for (size_t r = 0; r < c.control.size(); ++r) {
      if (c.control[r] < 0) continue;
      try {
        c.send_control(static_cast<int>(r), kAbort, std::to_string(exit_code));
      } catch (...) {
      }
    }
  }
  end_job(exit_code, "");
}

std::string TcpProcessGroup::receive_from(int peer, uint8_t type, const char* what) const {
  std::deque<std::string>& early = early_[{peer, type}];
  if (!early.empty()) {
    std::string body = std::move(early.front());
    early.pop_front();
    return body;
  }
  const int fd = connections_->data.at(rank_ == 0 ? static_cast<size_t>(peer) : 0);
  auto stalled = [&](double waited) {
    if (on_stall_ && stall_timeout_seconds_ > 0 && waited > stall_timeout_seconds_) on_stall_(what);
  };
  for (;;) {
    try {
      auto [got, body] = receive_message(fd, stalled);
      if (got == type) return body;
      early_[{peer, got}].push_back(std::move(body));
    } catch (const PeerClosed&) {
      throw RuntimeError("rank " + std::to_string(peer) + " (" + hostnames_[static_cast<size_t>(peer)] +
                         ") left the job during " + what);
    }
  }
}

std::vector<std::string> TcpProcessGroup::exchange(
    const std::string& mine, const char* what,
    const std::function<std::string(const std::vector<std::string>&)>& answer) const {
  std::lock_guard<std::mutex> lock(exchange_mutex_);
  if (size_ == 1) return split_parts(answer({mine}));
  const Connections& c = *connections_;
  if (rank_ != 0) {
    send_message(c.data[0], kParts, mine);
    return split_parts(receive_from(0, kParts, what));
  }
  std::vector<std::string> parts(static_cast<size_t>(size_));
  parts[0] = mine;
  for (int r = 1; r < size_; ++r) parts[static_cast<size_t>(r)] = receive_from(r, kParts, what);
  const std::string result = answer(parts);
  for (int r = 1; r < size_; ++r) send_message(c.data[static_cast<size_t>(r)], kParts, result);
  return split_parts(result);
}

std::vector<std::string> TcpProcessGroup::all_gather_text(const std::string& text) const {
  return exchange(text, "an all-gather between ranks", join_parts);
}

void TcpProcessGroup::all_gather_bytes(const void* send, size_t bytes, void* recv) const {
  const std::vector<std::string> parts = all_gather_text(std::string(static_cast<const char*>(send), bytes));
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].size() != bytes) throw RuntimeError("all_gather_bytes: rank " + std::to_string(r) + " sent another size");
    std::memcpy(static_cast<char*>(recv) + r * bytes, parts[r].data(), bytes);
  }
}

void TcpProcessGroup::broadcast(void* data, size_t bytes, int root) const {
  const std::string mine = rank_ == root ? std::string(static_cast<const char*>(data), bytes) : std::string();
  // Rank 0 hands every rank the root's bytes only.
  const std::vector<std::string> parts = exchange(mine, "a broadcast between ranks", [root](const std::vector<std::string>& all) {
    return join_parts({all.at(static_cast<size_t>(root))});
  });
  if (parts.size() != 1 || parts[0].size() != bytes) throw RuntimeError("broadcast: the root sent another size");
  std::memcpy(data, parts[0].data(), bytes);
}

namespace {

// The OR of every rank's vote, collected by rank 0 when a rank first asks for the outcome (the
// votes travel in order on the data connections, so each rank's k-th vote meets the others' k-th).
class TcpVote final : public ProcessGroup::Vote {
 public:
  TcpVote(std::function<bool()> finish) : finish_(std::move(finish)) {}
  ~TcpVote() override {
    try {
      any_yes();
    } catch (...) {
    }
  }
  bool any_yes() override {
    if (!done_) {
      outcome_ = finish_();
      done_ = true;
    }
    return outcome_;
  }

 private:
  std::function<bool()> finish_;
  bool done_ = false, outcome_ = false;
};

}  // namespace

std::unique_ptr<ProcessGroup::Vote> TcpProcessGroup::start_vote(bool yes) const {
  if (size_ > 1 && rank_ != 0) {
    std::lock_guard<std::mutex> lock(exchange_mutex_);
    send_message(connections_->data[0], kVote, yes ? "1" : "0");
  }
  return std::make_unique<TcpVote>([this, yes] {
    if (size_ == 1) return yes;
    std::lock_guard<std::mutex> lock(exchange_mutex_);
    const Connections& c = *connections_;
    const char* what = "a vote between ranks";
    if (rank_ != 0) return receive_from(0, kVote, what) == "1";
    bool any = yes;
    for (int r = 1; r < size_; ++r) any = receive_from(r, kVote, what) == "1" || any;
    for (int r = 1; r < size_; ++r) send_message(c.data[static_cast<size_t>(r)], kVote, any ? "1" : "0");
    return any;
  });
}

void TcpProcessGroup::set_stall_handler(double timeout_seconds, std::function<void(const std::string& what)> on_stall) {
  stall_timeout_seconds_ = timeout_seconds;
  on_stall_ = std::move(on_stall);
}

ProcessGroup::StallDiagnosis TcpProcessGroup::diagnose_stall() const {
  StallDiagnosis diagnosis;
  if (size_ == 1) return diagnosis;
  Connections& c = *connections_;
  const Clock::time_point asked = Clock::now();
  for (size_t r = 0; r < c.control.size(); ++r) {
    if (c.control[r] < 0) continue;
    try {
      c.send_control(static_cast<int>(r), kPing, "");
    } catch (...) {
    }
  }
  auto answered = [&](size_t r) {
    std::lock_guard<std::mutex> lock(c.pongs_mutex);
    return c.last_pong[r] >= asked;
  };
  std::string silent;
  while (seconds_since(asked) < kProbeReplySeconds) {
    bool all = true;
    for (size_t r = 0; r < c.control.size(); ++r) all = all && (c.control[r] < 0 || answered(r));
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t r = 0; r < c.control.size(); ++r) {
    if (c.control[r] < 0 || answered(r)) continue;
    const int peer = rank_ == 0 ? static_cast<int>(r) : 0;
    silent += (silent.empty() ? "" : ", ") + std::string("rank ") + std::to_string(peer) + " (" +
              hostnames_[static_cast<size_t>(peer)] + ")";
  }
  // Rank 0 sees every rank; another rank sees rank 0 only, so it speaks when rank 0 is silent.
  diagnosis.speaker = rank_ == 0 || (!silent.empty() && rank_ == 1);
  diagnosis.message = describe_silent_ranks(silent);
  return diagnosis;
}

}  // namespace dpbench
