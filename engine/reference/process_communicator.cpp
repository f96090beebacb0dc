// ProcessCommunicator (see the header): each collective is an all-gather of the ranks' send
// buffers, then the same loops as the in-process communicator over the gathered copies.
#include "engine/reference/process_communicator.h"

#include <cstring>
#include <vector>

#include "engine/errors.h"

namespace dpbench {
namespace {

class ProcessCommunicator final : public Communicator {
 public:
  explicit ProcessCommunicator(const ProcessGroup& group) : group_(group) {}

  int size() const override { return group_.size(); }
  std::string description() const override { return "reference, " + std::to_string(size()) + " processes (through the " + group_.launcher() + " job's host exchanges)"; }
  bool capturable() const override { return false; }

  void all_reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                  StreamKind) override {
    check_local(rank);
    const std::vector<unsigned char> all = gather(send, count, type);
    std::vector<float> sum(count);
    reduce_in_rank_order(all, count, 0, count, type, op, sum.data());
    store_all(type, sum.data(), count, recv);
  }
  void reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              StreamKind) override {
    check_local(rank);
    const std::vector<unsigned char> all = gather(send, count, type);
    if (group_.rank() != root) return;
    std::vector<float> sum(count);
    reduce_in_rank_order(all, count, 0, count, type, op, sum.data());
    store_all(type, sum.data(), count, recv);
  }
  void broadcast(int rank, const void* send, void* recv, size_t count, DataType type, int root,
                 StreamKind) override {
    check_local(rank);
    const size_t bytes = count * data_type_bytes(type);
    if (group_.rank() == root && recv != send) std::memmove(recv, send, bytes);
    group_.broadcast(recv, bytes, root);
  }
  void reduce_scatter(int rank, const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                      StreamKind) override {
    check_local(rank);
    const size_t total = recv_count * static_cast<size_t>(size());
    const std::vector<unsigned char> all = gather(send, total, type);
    std::vector<float> sum(recv_count);
    reduce_in_rank_order(all, total, recv_count * static_cast<size_t>(group_.rank()), recv_count, type, op, sum.data());
    store_all(type, sum.data(), recv_count, recv);
  }
  void all_gather(int rank, const void* send, void* recv, size_t send_count, DataType type, StreamKind) override {
    check_local(rank);
    group_.all_gather_bytes(send, send_count * data_type_bytes(type), recv);
  }
  void all_to_all(int rank, const void* send, void* recv, size_t chunk_count, DataType type, StreamKind) override {
    check_local(rank);
    const size_t element = data_type_bytes(type), chunk = chunk_count * element;
    const size_t n = static_cast<size_t>(size()), me = static_cast<size_t>(group_.rank());
    const std::vector<unsigned char> all = gather(send, chunk_count * n, type);
    for (size_t r = 0; r < n; ++r) std::memcpy(static_cast<unsigned char*>(recv) + r * chunk, all.data() + r * n * chunk + me * chunk, chunk);
  }

 private:
  // The process has one device, local rank 0.
  static void check_local(int rank) {
    if (rank != 0) throw RuntimeError("process communicator: local rank " + std::to_string(rank) + " (one device per process)");
  }

  std::vector<unsigned char> gather(const void* send, size_t count, DataType type) const {
    const size_t bytes = count * data_type_bytes(type);
    std::vector<unsigned char> all(bytes * static_cast<size_t>(size()));
    group_.all_gather_bytes(send, bytes, all.data());
    return all;
  }

  // out[i] = op over ranks of element (offset + i) of each rank's `count`-element block, ranks
  // added in order 0..N-1 in fp32 (as InProcessCommunicator), starting from rank 0's value.
  void reduce_in_rank_order(const std::vector<unsigned char>& all, size_t count, size_t offset, size_t n_out,
                            DataType type, ReduceOp op, float* out) const {
    const size_t block = count * data_type_bytes(type);
    for (size_t i = 0; i < n_out; ++i) out[i] = load_as_float(type, all.data(), offset + i);
    for (int r = 1; r < size(); ++r) {
      const unsigned char* base = all.data() + static_cast<size_t>(r) * block;
      for (size_t i = 0; i < n_out; ++i) out[i] += load_as_float(type, base, offset + i);
    }
    if (op == ReduceOp::average) {
      const float inverse = 1.0f / static_cast<float>(size());
      for (size_t i = 0; i < n_out; ++i) out[i] *= inverse;
    }
  }

  static void store_all(DataType type, const float* values, size_t count, void* dst) {
    for (size_t i = 0; i < count; ++i) store_from_float(type, dst, i, values[i]);
  }

  const ProcessGroup& group_;
};

}  // namespace

std::unique_ptr<Communicator> create_reference_process_communicator(const ProcessGroup& group) {
  return std::make_unique<ProcessCommunicator>(group);
}

}  // namespace dpbench
