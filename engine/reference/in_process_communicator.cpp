// InProcessCommunicator (see the header): the rendezvous, and each collective as plain loops over
// the ranks' host buffers.
#include "engine/reference/in_process_communicator.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "engine/errors.h"
#include "engine/reference/reference_storage.h"

namespace dpbench {
namespace {

using Call = InProcessCommunicator::Call;
using reference_detail::with_type;

std::mutex tally_mutex;
CollectiveTally tally;  // guarded by tally_mutex

// A completed call's size as nccl-tests counts it: the whole buffer, or the whole gathered
// (scattered, exchanged) buffer of every rank's chunk.
void add_to_tally(const Call& call, size_t ranks) {
  const double element_bytes = static_cast<double>(data_type_bytes(call.type));
  const double chunks = call.collective == Collective::reduce_scatter || call.collective == Collective::all_gather ||
                                call.collective == Collective::all_to_all
                            ? static_cast<double>(ranks)
                            : 1.0;
  std::lock_guard<std::mutex> lock(tally_mutex);
  tally.calls[call.collective] += 1;
  tally.bytes[call.collective] += static_cast<double>(call.count) * element_bytes * chunks;
}

bool has_reduce_op(Collective collective) {
  return collective == Collective::all_reduce || collective == Collective::reduce ||
         collective == Collective::reduce_scatter;
}

bool has_root(Collective collective) {
  return collective == Collective::reduce || collective == Collective::broadcast;
}

// "broadcast(count 8, fp16, root 1)": what a mismatch message shows of a call.
std::string describe(const Call& call) {
  std::string text = std::string(collective_name(call.collective)) + "(count " +
                     std::to_string(call.count) + ", " + data_type_name(call.type);
  if (has_reduce_op(call.collective)) text += call.op == ReduceOp::sum ? ", sum" : ", average";
  if (has_root(call.collective)) text += ", root " + std::to_string(call.root);
  return text + ")";
}

bool same_collective(const Call& a, const Call& b) {
  return a.collective == b.collective && a.count == b.count && a.type == b.type &&
         (!has_reduce_op(a.collective) || a.op == b.op) && (!has_root(a.collective) || a.root == b.root);
}

// out[i] = op over ranks of element (offset + i) of each rank's send, for i < count. Ranks are
// added in the order 0..N-1 in fp32, so the result is the same whichever thread runs this; the
// caller rounds once when it stores the result in a 16-bit type.
void reduce_in_rank_order(const std::vector<Call>& calls, size_t offset, size_t count, DataType type,
                          ReduceOp op, float* out) {
  with_type(type, [&](auto tag) {
    constexpr DataType kType = decltype(tag)::value;
    // Starting from rank 0's values (not from 0) keeps a single rank's result bit-identical, -0 included.
    for (size_t i = 0; i < count; ++i) out[i] = load_as_float(kType, calls[0].send, offset + i);
    for (size_t r = 1; r < calls.size(); ++r) {
      for (size_t i = 0; i < count; ++i) out[i] += load_as_float(kType, calls[r].send, offset + i);
    }
    if (op == ReduceOp::average) {
      const float inverse = 1.0f / static_cast<float>(calls.size());
      for (size_t i = 0; i < count; ++i) out[i] *= inverse;
    }
  });
}

void store_all(DataType type, const float* values, size_t count, void* dst) {
  with_type(type, [&](auto tag) {
    constexpr DataType kType = decltype(tag)::value;
    for (size_t i = 0; i < count; ++i) store_from_float(kType, dst, i, values[i]);
  });
}

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

unsigned char* byte_at(void* base, size_t offset) { return static_cast<unsigned char*>(base) + offset; }
const unsigned char* byte_at(const void* base, size_t offset) {
  return static_cast<const unsigned char*>(base) + offset;
}

// Runs one collective for every rank. Each case reads all the inputs it needs into a staging
// buffer before it writes any output, so in-place calls (recv aliasing send) are safe.
void run_collective(const std::vector<Call>& calls) {
  const Call& first = calls[0];
  const size_t ranks = calls.size();
  const size_t element_bytes = data_type_bytes(first.type);
  switch (first.collective) {
    case Collective::all_reduce: {
      std::vector<float> result(first.count);
      reduce_in_rank_order(calls, 0, first.count, first.type, first.op, result.data());
      for (const Call& call : calls) store_all(first.type, result.data(), first.count, call.recv);
      break;
    }
    case Collective::reduce: {
      std::vector<float> result(first.count);
      reduce_in_rank_order(calls, 0, first.count, first.type, first.op, result.data());
      store_all(first.type, result.data(), first.count, calls[first.root].recv);
      break;
    }
    case Collective::broadcast: {
      // Bytes, not values: a broadcast must not round or canonicalise anything (NaN payloads).
      const Call& root = calls[first.root];
      for (const Call& call : calls) copy_bytes(call.recv, root.send, first.count * element_bytes);
      break;
    }
    case Collective::reduce_scatter: {
      const size_t chunk = first.count;
      std::vector<float> results(ranks * chunk);
      for (size_t r = 0; r < ranks; ++r)
        reduce_in_rank_order(calls, r * chunk, chunk, first.type, first.op, results.data() + r * chunk);
      for (size_t r = 0; r < ranks; ++r) store_all(first.type, results.data() + r * chunk, chunk, calls[r].recv);
      break;
    }
    case Collective::all_gather: {
      const size_t chunk_bytes = first.count * element_bytes;
      std::vector<unsigned char> gathered(ranks * chunk_bytes);
      for (size_t r = 0; r < ranks; ++r) copy_bytes(gathered.data() + r * chunk_bytes, calls[r].send, chunk_bytes);
      for (const Call& call : calls) copy_bytes(call.recv, gathered.data(), gathered.size());
      break;
    }
    case Collective::all_to_all: {
      // The interface forbids send and recv to overlap, so chunks go straight to their places.
      const size_t chunk_bytes = first.count * element_bytes;
      for (size_t receiver = 0; receiver < ranks; ++receiver) {
        for (size_t sender = 0; sender < ranks; ++sender) {
          copy_bytes(byte_at(calls[receiver].recv, sender * chunk_bytes),
                     byte_at(calls[sender].send, receiver * chunk_bytes), chunk_bytes);
        }
      }
      break;
    }
    case Collective::peer_copy:
    case Collective::copy_to_host:
    case Collective::copy_from_host:
      throw RuntimeError(std::string("in-process communicator: ") + collective_name(first.collective) +
                         " is not a collective of the communicator");
  }
}

}  // namespace

CollectiveTally in_process_collective_tally() {
  std::lock_guard<std::mutex> lock(tally_mutex);
  return tally;
}

InProcessCommunicator::InProcessCommunicator(int num_ranks)
    : num_ranks_(num_ranks),
      calls_(static_cast<size_t>(num_ranks > 0 ? num_ranks : 0)),
      arrived_(static_cast<size_t>(num_ranks > 0 ? num_ranks : 0), false) {
  if (num_ranks < 1) {
    throw RuntimeError("in-process communicator: needs at least one rank, got " + std::to_string(num_ranks));
  }
}

// Checks what one rank can check alone, before it waits for the others.
void InProcessCommunicator::check_call(int rank, const Call& call) const {
  auto fail = [&](const std::string& why) {
    throw RuntimeError(std::string("in-process communicator: ") + collective_name(call.collective) + ": " + why);
  };
  auto out_of_range = [&](const char* name, int value) {
    fail(std::string(name) + " " + std::to_string(value) + " is out of range (communicator size " +
         std::to_string(num_ranks_) + ")");
  };
  if (rank < 0 || rank >= num_ranks_) out_of_range("rank", rank);
  if (has_root(call.collective) && (call.root < 0 || call.root >= num_ranks_)) out_of_range("root", call.root);
  // Broadcast reads send only on the root; reduce writes recv only on the root.
  const bool reads_send = call.collective != Collective::broadcast || rank == call.root;
  const bool writes_recv = call.collective != Collective::reduce || rank == call.root;
  if (call.count > 0 && ((reads_send && call.send == nullptr) || (writes_recv && call.recv == nullptr))) {
    fail("rank " + std::to_string(rank) + " passed a null buffer");
  }
}

void InProcessCommunicator::rendezvous(int rank, const Call& call) {
  check_call(rank, call);
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) throw_aborted();
  if (arrived_[rank]) {
    // Two threads acting as one rank would corrupt the rendezvous; say so instead.
    abort_locked("rank " + std::to_string(rank) + " entered " + describe(call) +
                 " while its previous call was still waiting (two threads with one rank?)");
    throw_aborted();
  }
  const uint64_t generation = generation_;
  calls_[rank] = call;
  arrived_[rank] = true;
  if (++num_arrived_ < num_ranks_) {
    released_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation) throw_aborted();
    return;
  }

  // Last to arrive: every input is published and no rank can leave (or touch its buffers) before
  // the generation advances, so this thread may read and write everyone's buffers.
  const std::string mismatch = mismatch_between_calls();
  if (!mismatch.empty()) {
    abort_locked(mismatch);
    throw_aborted();
  }
  try {
    run_collective(calls_);
    add_to_tally(calls_[0], calls_.size());
  } catch (const std::exception& error) {
    abort_locked(std::string(collective_name(call.collective)) + " failed: " + error.what());
    throw;
  }
  std::fill(arrived_.begin(), arrived_.end(), false);
  num_arrived_ = 0;
  ++generation_;
  released_.notify_all();
}

std::string InProcessCommunicator::mismatch_between_calls() const {
  for (int r = 1; r < num_ranks_; ++r) {
    if (!same_collective(calls_[0], calls_[r])) {
      return "rank " + std::to_string(r) + " called " + describe(calls_[r]) + " while rank 0 called " +
             describe(calls_[0]) + "; every rank must issue the same collectives in the same order";
    }
  }
  return "";
}

void InProcessCommunicator::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_) abort_locked("a failure on another device");
}

void InProcessCommunicator::abort_locked(const std::string& reason) {
  aborted_ = true;
  abort_reason_ = reason;
  released_.notify_all();
}

void InProcessCommunicator::throw_aborted() const {
  throw RuntimeError("in-process communicator aborted: " + abort_reason_);
}

void InProcessCommunicator::all_reduce(int rank, const void* send, void* recv, size_t count,
                                       DataType type, ReduceOp op, StreamKind /*stream*/) {
  rendezvous(rank, Call{Collective::all_reduce, count, type, op, 0, send, recv});
}

void InProcessCommunicator::reduce(int rank, const void* send, void* recv, size_t count, DataType type,
                                   ReduceOp op, int root, StreamKind /*stream*/) {
  rendezvous(rank, Call{Collective::reduce, count, type, op, root, send, recv});
}

void InProcessCommunicator::broadcast(int rank, const void* send, void* recv, size_t count,
                                      DataType type, int root, StreamKind /*stream*/) {
  rendezvous(rank, Call{Collective::broadcast, count, type, ReduceOp::sum, root, send, recv});
}

void InProcessCommunicator::reduce_scatter(int rank, const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op, StreamKind /*stream*/) {
  rendezvous(rank, Call{Collective::reduce_scatter, recv_count, type, op, 0, send, recv});
}

void InProcessCommunicator::all_gather(int rank, const void* send, void* recv, size_t send_count,
                                       DataType type, StreamKind /*stream*/) {
  rendezvous(rank, Call{Collective::all_gather, send_count, type, ReduceOp::sum, 0, send, recv});
}

void InProcessCommunicator::all_to_all(int rank, const void* send, void* recv, size_t chunk_count,
                                       DataType type, StreamKind /*stream*/) {
  rendezvous(rank, Call{Collective::all_to_all, chunk_count, type, ReduceOp::sum, 0, send, recv});
}

std::unique_ptr<Communicator> create_in_process_communicator(int num_ranks) {
  return std::make_unique<InProcessCommunicator>(num_ranks);
}

}  // namespace dpbench
