// MpiContext (see the header) on the MPI C API.
#include "engine/communication/mpi/mpi_context.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "engine/communication/launch_environment.h"
#include "engine/errors.h"
#include "engine/machine/environment.h"

namespace dpbench {
namespace {

int g_rank_for_messages = -1;  // set once MPI is up, so a failing call can say which rank it was

[[noreturn]] void throw_mpi_error(const char* call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) text[0] = '\0';
  std::ostringstream message;
  message << "MPI error " << code << " (" << text << ") in " << call << " at " << file << ":" << line;
  if (g_rank_for_messages >= 0) message << " on rank " << g_rank_for_messages;
  throw RuntimeError(message.str());
}

#define DPB_MPI_CHECK(call)                                                   \
  do {                                                                        \
    const int dpb_status_ = (call);                                           \
    if (dpb_status_ != MPI_SUCCESS) throw_mpi_error(#call, dpb_status_, __FILE__, __LINE__); \
  } while (0)

// Note [naming the rank that stopped answering]
// A rank that is frozen (SIGSTOP, a stuck driver call, a swapped-out host) leaves every collective
// of the job waiting, and a waiting collective cannot say who is missing. So every rank runs a
// responder thread that answers probes on a communicator of its own, whatever its other threads
// are doing. A rank whose wait passes --collective_timeout probes every other rank; those that do
// not answer within kProbeReplySeconds are the ones that stopped answering. Only the lowest rank
// that answers says the line for the job (the others wait for its abort), so the user reads one
// line, naming the rank and host to look at.
constexpr int kProbeTag = 7101;
constexpr int kReplyTag = 7102;
constexpr double kProbeReplySeconds = 5.0;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Short spins first (collectives of a step finish in microseconds), then sleeps of up to 1 ms, so
// a long wait costs no core.
void back_off(int polls) {
  if (polls < 2000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 4000 ? 50 : 1000));
  }
}

}  // namespace

bool MpiContext::launched_by_mpi() { return detect_launch_environment().through_mpi; }

MpiContext::MpiContext() {
  int initialized = 0;
  DPB_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) throw RuntimeError("MpiContext: MPI is already initialised in this process");
  int provided = MPI_THREAD_SINGLE;
  DPB_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw RuntimeError("the MPI library gives threads level " + std::to_string(provided) +
                       ", and dpbench drives its devices from several threads (MPI_THREAD_MULTIPLE); "
                       "use an MPI built with thread support (Open MPI and MPICH from Debian are)");
  }
  DPB_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  DPB_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  DPB_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  g_rank_for_messages = rank_;

  // Every rank's host (DPBENCH_HOST_NAME where two hosts are simulated on one machine); a rank's
  // host-local rank is its place among the ranks of its host.
  constexpr int kNameBytes = 256;
  char name[kNameBytes] = {0};
  const std::string mine = host_name();
  std::snprintf(name, sizeof name, "%s", mine.c_str());
  std::vector<char> names(static_cast<size_t>(size_) * kNameBytes, '\0');
  DPB_MPI_CHECK(MPI_Allgather(name, kNameBytes, MPI_CHAR, names.data(), kNameBytes, MPI_CHAR, MPI_COMM_WORLD));
  for (int r = 0; r < size_; ++r) hostnames_.emplace_back(names.data() + static_cast<size_t>(r) * kNameBytes);
  local_rank_ = 0;
  local_size_ = 0;
  for (int r = 0; r < size_; ++r) {
    if (hostnames_[static_cast<size_t>(r)] != mine) continue;
    if (r < rank_) ++local_rank_;
    ++local_size_;
  }

  DPB_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &liveness_comm_));
  DPB_MPI_CHECK(MPI_Comm_set_errhandler(liveness_comm_, MPI_ERRORS_RETURN));
  DPB_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &vote_comm_));
  DPB_MPI_CHECK(MPI_Comm_set_errhandler(vote_comm_, MPI_ERRORS_RETURN));
  responder_ = std::thread([this] { answer_liveness_probes(); });
}

MpiContext::~MpiContext() {
  stop_responder_ = true;
  if (responder_.joinable()) responder_.join();
  if (liveness_comm_ != MPI_COMM_NULL) MPI_Comm_free(&liveness_comm_);
  if (vote_comm_ != MPI_COMM_NULL) MPI_Comm_free(&vote_comm_);
  g_rank_for_messages = -1;
  MPI_Finalize();
}

void MpiContext::answer_liveness_probes() {
  int probe = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  while (!stop_responder_.load()) {
    if (request == MPI_REQUEST_NULL && MPI_Irecv(&probe, 1, MPI_INT, MPI_ANY_SOURCE, kProbeTag, liveness_comm_,
                                                 &request) != MPI_SUCCESS)
      return;
    int done = 0;
    MPI_Status status;
    if (MPI_Test(&request, &done, &status) != MPI_SUCCESS) return;
    if (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const int reply = rank_;
    // One int: sent eagerly, so a prober that is already gone cannot block this thread.
    MPI_Send(&reply, 1, MPI_INT, status.MPI_SOURCE, kReplyTag, liveness_comm_);
    request = MPI_REQUEST_NULL;
  }
  if (request != MPI_REQUEST_NULL) {
    MPI_Cancel(&request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
}

void MpiContext::set_stall_handler(double timeout_seconds, std::function<void(const std::string& what)> on_stall) {
  stall_timeout_seconds_ = timeout_seconds;
  on_stall_ = std::move(on_stall);
}

void MpiContext::wait(MPI_Request* request, const char* what) const {
  const Clock::time_point start = Clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    DPB_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (on_stall_ && stall_timeout_seconds_ > 0 && (polls & 63) == 0 && seconds_since(start) > stall_timeout_seconds_)
      on_stall_(what);
    back_off(polls);
  }
}

ProcessGroup::StallDiagnosis MpiContext::diagnose_stall() const {
  // Static: the sends are never waited for (a frozen rank may never take them), so their buffer
  // must outlive this call.
  static int token = 0;
  token = rank_;
  std::vector<int> replies(static_cast<size_t>(size_), -1);
  std::vector<MPI_Request> received(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request sent = MPI_REQUEST_NULL;
    MPI_Isend(&token, 1, MPI_INT, r, kProbeTag, liveness_comm_, &sent);
    MPI_Request_free(&sent);  // never waited for: a frozen rank may never take it
    MPI_Irecv(&replies[static_cast<size_t>(r)], 1, MPI_INT, r, kReplyTag, liveness_comm_, &received[static_cast<size_t>(r)]);
  }
  std::vector<bool> answered(static_cast<size_t>(size_), false);
  answered[static_cast<size_t>(rank_)] = true;
  const Clock::time_point start = Clock::now();
  for (int pending = size_ - 1; pending > 0 && seconds_since(start) < kProbeReplySeconds;) {
    pending = 0;
    for (int r = 0; r < size_; ++r) {
      if (answered[static_cast<size_t>(r)]) continue;
      int done = 0;
      MPI_Test(&received[static_cast<size_t>(r)], &done, MPI_STATUS_IGNORE);
      if (done) answered[static_cast<size_t>(r)] = true;
      else ++pending;
    }
    if (pending > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  StallDiagnosis diagnosis;
  std::string silent;
  int lowest_answering = size_;
  for (int r = 0; r < size_; ++r) {
    if (answered[static_cast<size_t>(r)]) {
      lowest_answering = std::min(lowest_answering, r);
      continue;
    }
    silent += (silent.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " (" +
              hostnames_[static_cast<size_t>(r)] + ")";
  }
  diagnosis.speaker = lowest_answering == rank_;
  diagnosis.message = describe_silent_ranks(silent);
  return diagnosis;
}

namespace {

// The vote's buffers live in the object, which outlives the non-blocking reduction.
class MpiVote final : public ProcessGroup::Vote {
 public:
  explicit MpiVote(std::function<void(MPI_Request*)> wait) : wait_(std::move(wait)) {}
  ~MpiVote() override {
    try {
      if (request_ != MPI_REQUEST_NULL) wait_(&request_);
    } catch (...) {
    }
  }
  bool any_yes() override {
    if (request_ != MPI_REQUEST_NULL) wait_(&request_);
    return outcome_ != 0;
  }
  int mine_ = 0, outcome_ = 0;
  MPI_Request request_ = MPI_REQUEST_NULL;

 private:
  std::function<void(MPI_Request*)> wait_;
};

}  // namespace

std::unique_ptr<ProcessGroup::Vote> MpiContext::start_vote(bool yes) const {
  auto vote = std::make_unique<MpiVote>([this](MPI_Request* request) { wait(request, "a vote between ranks"); });
  vote->mine_ = yes ? 1 : 0;
  DPB_MPI_CHECK(MPI_Iallreduce(&vote->mine_, &vote->outcome_, 1, MPI_INT, MPI_LOR, vote_comm_, &vote->request_));
  return vote;
}

void MpiContext::broadcast(void* data, size_t bytes, int root) const {
  if (bytes > static_cast<size_t>(INT32_MAX)) throw RuntimeError("MpiContext::broadcast: more than 2 GiB");
  MPI_Request request = MPI_REQUEST_NULL;
  DPB_MPI_CHECK(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &request));
  wait(&request, "a broadcast between ranks");
}

void MpiContext::all_gather_bytes(const void* send, size_t bytes, void* recv) const {
  if (bytes > static_cast<size_t>(INT32_MAX)) throw RuntimeError("MpiContext::all_gather_bytes: more than 2 GiB");
  MPI_Request request = MPI_REQUEST_NULL;
  DPB_MPI_CHECK(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                               MPI_COMM_WORLD, &request));
  wait(&request, "an all-gather between ranks");
}

std::vector<std::string> MpiContext::all_gather_text(const std::string& text) const {
  const int length = static_cast<int>(text.size());
  std::vector<int> lengths(size_), displacements(size_);
  all_gather_bytes(&length, sizeof length, lengths.data());
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    displacements[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Request request = MPI_REQUEST_NULL;
  DPB_MPI_CHECK(MPI_Iallgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), displacements.data(),
                                MPI_CHAR, MPI_COMM_WORLD, &request));
  wait(&request, "an all-gather between ranks");
  std::vector<std::string> texts;
  for (int r = 0; r < size_; ++r) texts.push_back(all.substr(displacements[r], lengths[r]));
  return texts;
}

std::vector<double> MpiContext::all_gather(double value) const {
  std::vector<double> values(size_);
  all_gather_bytes(&value, sizeof value, values.data());
  return values;
}

std::string MpiContext::launcher() const { return launcher_name(detect_launch_environment().launcher); }

void MpiContext::abort(int exit_code) const {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for a library that does
}

}  // namespace dpbench
