// The counting wrapper every communicator is handed out in, so that each collective counts itself
// on its rank's device; prepare_collectives_for_replayed_steps sets NCCL's switch for
// graph-replayed runs. Which communicator a run gets is chosen in engine/backends.cpp.
#include "engine/communication/communicator.h"

#include <cstdlib>
#include <utility>

#include "engine/errors.h"

namespace dpbench {
namespace {

// Forwards every call to the chosen communicator and counts each collective as work enqueued on
// the calling rank's device and stream (Note [counted launches] in engine/backend/device.h). A collective
// inside a group counts too: it is work the caller issued, however NCCL fuses the group's launch.
class CountingCommunicator final : public Communicator {
 public:
  CountingCommunicator(std::unique_ptr<Communicator> inner, std::vector<Device*> devices)
      : inner_(std::move(inner)), devices_(std::move(devices)) {}

  int size() const override { return inner_->size(); }
  std::string description() const override { return inner_->description(); }
  bool capturable() const override { return inner_->capturable(); }

  void all_reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                  StreamKind stream) override {
    counted(rank, stream);
    inner_->all_reduce(rank, send, recv, count, type, op, stream);
  }
  void reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              StreamKind stream) override {
    counted(rank, stream);
    inner_->reduce(rank, send, recv, count, type, op, root, stream);
  }
  void broadcast(int rank, const void* send, void* recv, size_t count, DataType type, int root,
                 StreamKind stream) override {
    counted(rank, stream);
    inner_->broadcast(rank, send, recv, count, type, root, stream);
  }
  void reduce_scatter(int rank, const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                      StreamKind stream) override {
    counted(rank, stream);
    inner_->reduce_scatter(rank, send, recv, recv_count, type, op, stream);
  }
  void all_gather(int rank, const void* send, void* recv, size_t send_count, DataType type,
                  StreamKind stream) override {
    counted(rank, stream);
    inner_->all_gather(rank, send, recv, send_count, type, stream);
  }
  void all_to_all(int rank, const void* send, void* recv, size_t chunk_count, DataType type,
                  StreamKind stream) override {
    counted(rank, stream);
    inner_->all_to_all(rank, send, recv, chunk_count, type, stream);
  }
  void group_start(int rank) override { inner_->group_start(rank); }
  void group_end(int rank) override { inner_->group_end(rank); }
  void abort() override { inner_->abort(); }

 private:
  // The inner communicator checks the rank; an unknown one is left to it to reject.
  void counted(int rank, StreamKind stream) {
    if (rank >= 0 && rank < static_cast<int>(devices_.size())) devices_[rank]->count_enqueued(stream);
  }

  std::unique_ptr<Communicator> inner_;
  std::vector<Device*> devices_;  // indexed by the rank a caller passes
};

}  // namespace

std::unique_ptr<Communicator> counting_communicator(std::unique_ptr<Communicator> inner, std::vector<Device*> devices) {
  return std::make_unique<CountingCommunicator>(std::move(inner), std::move(devices));
}

void prepare_collectives_for_replayed_steps() {
  setenv("NCCL_GRAPH_MIXING_SUPPORT", "0", /*overwrite=*/0);  // Note [NCCL in replayed steps]
}


}  // namespace dpbench
