// TcpProcessGroup (see the header) on POSIX sockets.
#include "engine/communication/tcp_process_group.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "engine/communication/tcp_rendezvous.h"
#include "engine/communication/tcp_wire.h"
#include "engine/errors.h"
#include "engine/machine/environment.h"

namespace dpbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr double kProbeReplySeconds = 5.0;

}  // namespace

struct TcpProcessGroup::Connections {
  // Rank 0: one per rank (its own entry -1). The others: entry 0, their connection to rank 0.
  std::vector<int> data, control;
  std::vector<bool> said_goodbye;
  std::mutex control_send;
  std::mutex pongs_mutex;
  std::vector<Clock::time_point> last_pong;
  ~Connections() {
    for (int fd : data) if (fd >= 0) ::close(fd);
    for (int fd : control) if (fd >= 0) ::close(fd);
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
  // Note [what the rendezvous trusts] (engine/communication/tcp_rendezvous.h).
  MetRanks met = rank_ == 0 ? gather_ranks(launch, me, timeout_seconds) : join_rank_zero(launch, me, timeout_seconds);
  Connections& c = *connections_;
  c.data = std::move(met.data);
  c.control = std::move(met.control);
  hostnames_ = std::move(met.hostnames);
  c.said_goodbye.assign(c.data.size(), false);
  c.last_pong.assign(c.data.size(), Clock::time_point{});
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
        std::tie(type, body) = receive_message(entries[i].fd, nullptr, kMaxControlMessageBytes);
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
