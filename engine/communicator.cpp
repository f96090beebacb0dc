// create_communicator and enable_peer_access: pick the backend's implementation from the devices'
// kind. The CUDA and NCCL code lives in engine/cuda/ (nccl_communicator.h declares it without
// CUDA headers), as engine/device_factory.cpp reaches create_cuda_device. Whatever it picks is
// handed out wrapped, so that every collective counts itself on its rank's device.
// prepare_collectives_for_replayed_steps sets NCCL's switch for graph-replayed runs.
#include "engine/communicator.h"

#include <cstdlib>
#include <string>

#include "engine/cuda/nccl_communicator.h"
#include "engine/errors.h"
#include "engine/reference/in_process_communicator.h"
#include "engine/reference/process_communicator.h"

namespace dpbench {
namespace {

// The devices' common backend; throws RuntimeError for an empty list, a null entry or a mix.
BackendKind common_backend(const std::vector<Device*>& devices, const char* what) {
  if (devices.empty()) throw RuntimeError(std::string(what) + ": needs at least one device");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr) throw RuntimeError(std::string(what) + ": device " + std::to_string(i) + " is null");
  }
  const BackendKind kind = devices.front()->kind();
  for (const Device* device : devices) {
    if (device->kind() != kind) {
      throw RuntimeError(std::string(what) + ": devices of different backends (" + backend_name(kind) + " and " +
                         backend_name(device->kind()) + "); all must be of one kind");
    }
  }
  return kind;
}

// Forwards every call to the chosen communicator and counts each collective as work enqueued on
// the calling rank's device and stream (Note [counted launches] in engine/device.h). A collective
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

std::unique_ptr<Communicator> counting(std::unique_ptr<Communicator> inner, std::vector<Device*> devices) {
  return std::make_unique<CountingCommunicator>(std::move(inner), std::move(devices));
}

}  // namespace

std::unique_ptr<Communicator> create_communicator(const std::vector<Device*>& devices) {
  switch (common_backend(devices, "create_communicator")) {
    case BackendKind::cuda: return counting(create_nccl_communicator(devices), devices);
    case BackendKind::reference:
      return counting(create_in_process_communicator(static_cast<int>(devices.size())), devices);
  }
  throw RuntimeError("create_communicator: unknown backend");
}

std::unique_ptr<Communicator> create_process_communicator(Device& device, const ProcessGroup& group) {
  // This process's device is local rank 0 of the calls.
  if (device.kind() == BackendKind::cuda) return counting(create_nccl_process_communicator(device, group), {&device});
  return counting(create_reference_process_communicator(group), {&device});
}

void prepare_collectives_for_replayed_steps() {
  setenv("NCCL_GRAPH_MIXING_SUPPORT", "0", /*overwrite=*/0);  // Note [NCCL in replayed steps]
}

int enable_peer_access(const std::vector<Device*>& devices) {
  // Reference devices share the host's memory already; an empty list has no pairs.
  if (devices.empty() || common_backend(devices, "enable_peer_access") != BackendKind::cuda) return 0;
  std::vector<int> ordinals;
  for (const Device* device : devices) ordinals.push_back(device->index());  // CUDA: index() is the ordinal
  return enable_cuda_peer_access(ordinals);
}

}  // namespace dpbench
