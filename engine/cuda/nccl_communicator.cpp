// NcclCommunicator: the cuda backend's Communicator, one ncclComm_t per GPU of one process (from
// ncclCommInitAll), each rank driven by its own device thread; and peer access between GPUs.
#include "engine/cuda/cuda_factory.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cuda_device_scope.h"
#include "engine/errors.h"

// Checks an NCCL call made for one rank; the message names the call, file:line, device and rank.
#define DPB_NCCL_RANK_CHECK(call, comm, device, rank)                                           \
  do {                                                                                          \
    const ncclResult_t dpb_nccl_status_ = (call);                                               \
    if (dpb_nccl_status_ != ncclSuccess)                                                        \
      ::dpbench::throw_nccl_error(#call, dpb_nccl_status_, (comm),                              \
                                  "device " + std::to_string(device) + " (rank " +              \
                                      std::to_string(rank) + ")",                               \
                                  __FILE__, __LINE__);                                          \
  } while (0)

namespace dpbench {
namespace {

const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// Like cuda_check.h's macros, it names the call and the device; a collective failing on one of
// several GPUs also needs the rank, and NCCL's own account of the last error
// (ncclGetLastError), which names the cause where the result code only says "invalid usage".
[[noreturn]] void throw_nccl_error(const char* call, ncclResult_t status, ncclComm_t comm,
                                   const std::string& where, const char* file, int line) {
  std::ostringstream text;
  text << "NCCL call `" << call << "` failed at " << basename_of(file) << ':' << line << " on "
       << where << ": " << ncclGetErrorString(status) << " (code " << static_cast<int>(status) << ')';
  const char* last_error = ncclGetLastError(comm);
  if (last_error != nullptr && last_error[0] != '\0') text << "; NCCL says: " << last_error;
  throw RuntimeError(text.str());
}

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::f16: return ncclFloat16;
    case DataType::bf16: return ncclBfloat16;
    default: return ncclFloat32;
  }
}

// ncclAvg (NCCL >= 2.10) divides inside the collective: no separate scaling kernel.
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::average ? ncclAvg : ncclSum; }

// The version of the library actually loaded, which can differ from the header's.
std::string loaded_nccl_version() {
  int code = 0;
  const ncclResult_t status = ncclGetVersion(&code);
  if (status != ncclSuccess) throw_nccl_error("ncclGetVersion(&code)", status, nullptr, "the host", __FILE__, __LINE__);
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older ones major*1000 + minor*100 + patch.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::string join_ordinals(const std::vector<int>& ordinals) {
  std::string text;
  for (int ordinal : ordinals) text += (text.empty() ? "" : ",") + std::to_string(ordinal);
  return text;
}

const void* byte_offset(const void* base, size_t bytes) { return static_cast<const unsigned char*>(base) + bytes; }
void* byte_offset(void* base, size_t bytes) { return static_cast<unsigned char*>(base) + bytes; }

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const std::vector<CudaDevice*>& devices);
  // One rank of a communicator across processes: this process's GPU is rank group.rank() of
  // group.size(); rank 0's ncclUniqueId reaches the others through the group (MPI, or the rendezvous of a job without it).
  NcclCommunicator(CudaDevice* device, const ProcessGroup& group);
  ~NcclCommunicator() override;

  int size() const override { return world_size_ > 0 ? world_size_ : static_cast<int>(ranks_.size()); }
  std::string description() const override { return description_; }
  // NCCL (>= 2.9) records its kernels into a CUDA graph being captured; the runner captures each
  // device's step on that device's own thread (cudaStreamCaptureModeThreadLocal).
  bool capturable() const override { return true; }

  void all_reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                  StreamKind stream) override {
    const Rank& r = rank_at(rank);
    CurrentDeviceScope current(r.ordinal);
    DPB_NCCL_RANK_CHECK(ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(op), r.comm,
                                      r.device->stream(stream)),
                        r.comm, r.ordinal, rank);
  }

  void reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              StreamKind stream) override {
    const Rank& r = rank_at(rank);
    CurrentDeviceScope current(r.ordinal);
    DPB_NCCL_RANK_CHECK(ncclReduce(send, recv, count, nccl_type(type), nccl_op(op), root, r.comm,
                                   r.device->stream(stream)),
                        r.comm, r.ordinal, rank);
  }

  void broadcast(int rank, const void* send, void* recv, size_t count, DataType type, int root,
                 StreamKind stream) override {
    const Rank& r = rank_at(rank);
    CurrentDeviceScope current(r.ordinal);
    DPB_NCCL_RANK_CHECK(
        ncclBroadcast(send, recv, count, nccl_type(type), root, r.comm, r.device->stream(stream)),
        r.comm, r.ordinal, rank);
  }

  void reduce_scatter(int rank, const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op, StreamKind stream) override {
    const Rank& r = rank_at(rank);
    CurrentDeviceScope current(r.ordinal);
    DPB_NCCL_RANK_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_type(type), nccl_op(op), r.comm,
                                          r.device->stream(stream)),
                        r.comm, r.ordinal, rank);
  }

  void all_gather(int rank, const void* send, void* recv, size_t send_count, DataType type,
                  StreamKind stream) override {
    const Rank& r = rank_at(rank);
    CurrentDeviceScope current(r.ordinal);
    DPB_NCCL_RANK_CHECK(
        ncclAllGather(send, recv, send_count, nccl_type(type), r.comm, r.device->stream(stream)),
        r.comm, r.ordinal, rank);
  }

  void all_to_all(int rank, const void* send, void* recv, size_t chunk_count, DataType type,
                  StreamKind stream) override;

  // ncclGroupStart/End act on the calling thread's NCCL group, so the rank only names the device
  // for error messages; ncclGroupEnd launches what the group collected, with the device current.
  void group_start(int rank) override {
    const Rank& r = rank_at(rank);
    DPB_NCCL_RANK_CHECK(ncclGroupStart(), r.comm, r.ordinal, rank);
  }
  void group_end(int rank) override {
    const Rank& r = rank_at(rank);
    CurrentDeviceScope current(r.ordinal);
    DPB_NCCL_RANK_CHECK(ncclGroupEnd(), r.comm, r.ordinal, rank);
  }

  // Deliberately nothing. An NCCL call enqueues its kernels and returns, so a failing device
  // thread does not leave the others blocked inside this class, as the in-process rendezvous
  // would. Two waits remain, both NCCL's own: kernels (and host stream waits) for a peer that
  // never launched its part, and the first collectives on a communicator, which connect to their
  // peers over NCCL's bootstrap network (lazily, since NCCL 2.22) and block the host until the
  // peers do the same. The only release from either is ncclCommAbort, which also frees the
  // communicator while the other device threads may still be calling into it: a use-after-free
  // worse than the hang it cures. A failed run leaves those waits to the process exit.
  void abort() override {}

 private:
  struct Rank {
    CudaDevice* device = nullptr;
    int ordinal = 0;
    ncclComm_t comm = nullptr;
  };

  const Rank& rank_at(int rank) const {
    if (rank < 0 || rank >= static_cast<int>(ranks_.size())) {
      throw RuntimeError("NCCL communicator: local rank " + std::to_string(rank) + " is out of range (" +
                         std::to_string(ranks_.size()) + " on this process)");
    }
    return ranks_[static_cast<size_t>(rank)];
  }

  void watch(const ProcessGroup& group);

  std::vector<Rank> ranks_;  // this process's ranks (all of them, or the one of a process group)
  int world_size_ = 0;       // > 0: ranks across processes
  std::string description_;
  // Across processes a peer can fail where this rank cannot see it (a lost connection, a rank
  // that died): NCCL reports it only asynchronously, while this rank may wait in a collective
  // forever. The watchdog polls ncclCommGetAsyncError and ends the job with NCCL's account.
  std::thread watchdog_;
  std::atomic<bool> stop_watchdog_{false};
};

NcclCommunicator::NcclCommunicator(const std::vector<CudaDevice*>& devices) {
  std::vector<int> ordinals;
  for (const CudaDevice* device : devices) {
    for (int seen : ordinals) {
      // NCCL does not support one GPU as two ranks of a communicator (it may hang).
      if (seen == device->ordinal()) {
        throw RuntimeError("NCCL communicator: GPU " + std::to_string(seen) +
                           " appears twice; NCCL needs one rank per GPU");
      }
    }
    ordinals.push_back(device->ordinal());
  }
  description_ = "nccl " + loaded_nccl_version();

  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  ranks_.reserve(devices.size());  // nothing may throw between ncclCommInitAll and owning the comms
  // ncclCommInitAll switches devices while it sets each GPU up; the caller's is restored after.
  ncclResult_t status = ncclSuccess;
  {
    const CallerDeviceRestorer restore;
    status = ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data());
  }
  if (status != ncclSuccess) {
    throw_nccl_error("ncclCommInitAll(comms, n, ordinals)", status, nullptr, "devices " + join_ordinals(ordinals),
                     __FILE__, __LINE__);
  }
  for (size_t r = 0; r < devices.size(); ++r) ranks_.push_back(Rank{devices[r], ordinals[r], comms[r]});
}

NcclCommunicator::NcclCommunicator(CudaDevice* device, const ProcessGroup& group) : world_size_(group.size()) {
  description_ = "nccl " + loaded_nccl_version() + ", " + std::to_string(group.size()) + " processes";
  ncclUniqueId id{};
  if (group.rank() == 0) {
    const ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess) throw_nccl_error("ncclGetUniqueId(&id)", status, nullptr, "rank 0", __FILE__, __LINE__);
  }
  group.broadcast(&id, sizeof(id), 0);
  ranks_.reserve(1);
  CurrentDeviceScope current(device->ordinal());
  ncclComm_t comm = nullptr;
  const ncclResult_t status = ncclCommInitRank(&comm, group.size(), id, group.rank());
  if (status != ncclSuccess)
    throw_nccl_error("ncclCommInitRank(&comm, size, id, rank)", status, nullptr,
                     "device " + std::to_string(device->ordinal()) + " (rank " + std::to_string(group.rank()) + " of " +
                         std::to_string(group.size()) + ")",
                     __FILE__, __LINE__);
  ranks_.push_back(Rank{device, device->ordinal(), comm});
  watchdog_ = std::thread([this, &group] { watch(group); });
}

void NcclCommunicator::watch(const ProcessGroup& group) {
  const ncclComm_t comm = ranks_.front().comm;
  while (!stop_watchdog_.load()) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
      const char* last = ncclGetLastError(comm);
      std::fprintf(stderr, "dpbench: error: rank %d of %d: NCCL reports %s%s%s; ending the job\n", group.rank(),
                   group.size(), ncclGetErrorString(state), last != nullptr && last[0] != '\0' ? ": " : "",
                   last != nullptr ? last : "");
      (void)ncclCommAbort(comm);  // releases this rank's waits; the job ends right after
      group.abort(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

NcclCommunicator::~NcclCommunicator() {
  stop_watchdog_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  // Each comm is destroyed with its own GPU current (NCCL frees that GPU's resources), one after
  // the other from this thread, as nccl-tests does after ncclCommInitAll. A destructor cannot
  // throw, so failures are ignored, and cleared so the next kernel launch check does not report them.
  {
    const CallerDeviceRestorer restore;
    for (const Rank& rank : ranks_) {
      if (rank.comm == nullptr) continue;
      (void)cudaSetDevice(rank.ordinal);
      (void)ncclCommDestroy(rank.comm);
    }
  }
  (void)cudaGetLastError();
}

// Keeps the thread's NCCL group depth balanced when a call inside the group throws: ncclGroupEnd
// after an error inside the group releases the collected operations without launching them.
class NcclGroupScope {
 public:
  NcclGroupScope(ncclComm_t comm, int ordinal, int rank) : comm_(comm), ordinal_(ordinal), rank_(rank) {
    DPB_NCCL_RANK_CHECK(ncclGroupStart(), comm_, ordinal_, rank_);
  }
  ~NcclGroupScope() {
    if (open_) (void)ncclGroupEnd();
  }
  void end() {
    open_ = false;
    DPB_NCCL_RANK_CHECK(ncclGroupEnd(), comm_, ordinal_, rank_);
  }
  NcclGroupScope(const NcclGroupScope&) = delete;
  NcclGroupScope& operator=(const NcclGroupScope&) = delete;

 private:
  ncclComm_t comm_;
  int ordinal_;
  int rank_;
  bool open_ = true;
};

void NcclCommunicator::all_to_all(int rank, const void* send, void* recv, size_t chunk_count, DataType type,
                                  StreamKind stream) {
  const Rank& r = rank_at(rank);
  CurrentDeviceScope current(r.ordinal);
  const cudaStream_t cuda_stream = r.device->stream(stream);
  const size_t chunk_bytes = chunk_count * data_type_bytes(type);
  // Every send and receive in one group: NCCL matches them up and runs them concurrently, so no
  // order of peers can deadlock. The chunk for this rank itself is a send to self, which NCCL
  // supports inside a group.
  NcclGroupScope group(r.comm, r.ordinal, rank);
  for (int peer = 0; peer < size(); ++peer) {
    const size_t offset = static_cast<size_t>(peer) * chunk_bytes;
    DPB_NCCL_RANK_CHECK(ncclSend(byte_offset(send, offset), chunk_count, nccl_type(type), peer, r.comm, cuda_stream),
                        r.comm, r.ordinal, rank);
    DPB_NCCL_RANK_CHECK(ncclRecv(byte_offset(recv, offset), chunk_count, nccl_type(type), peer, r.comm, cuda_stream),
                        r.comm, r.ordinal, rank);
  }
  group.end();
}

}  // namespace

std::unique_ptr<Communicator> create_nccl_communicator(const std::vector<Device*>& devices) {
  std::vector<CudaDevice*> cuda_devices;
  for (Device* device : devices) {
    auto* cuda_device = dynamic_cast<CudaDevice*>(device);
    if (cuda_device == nullptr) {
      throw RuntimeError("NCCL communicator: device " + (device ? std::to_string(device->index()) : std::string("(null)")) +
                         " is not a CUDA device");
    }
    cuda_devices.push_back(cuda_device);
  }
  return std::make_unique<NcclCommunicator>(cuda_devices);
}

std::unique_ptr<Communicator> create_nccl_process_communicator(Device& device, const ProcessGroup& group) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  if (cuda_device == nullptr) throw RuntimeError("NCCL communicator: the process's device is not a CUDA device");
  return std::make_unique<NcclCommunicator>(cuda_device, group);
}

int enable_cuda_peer_access(const std::vector<int>& ordinals) {
  int pairs_without_access = 0;
  for (int from : ordinals) {
    for (int to : ordinals) {
      if (from == to) continue;  // the same GPU (listed twice, or i == j): nothing to enable
      int can_access = 0;
      DPB_CUDA_CHECK(cudaDeviceCanAccessPeer(&can_access, from, to));
      if (!can_access) {
        ++pairs_without_access;
        continue;
      }
      // Peer access is granted by the device that reads and writes: `from` current, `to` the peer.
      CurrentDeviceScope current(from);
      const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // an earlier call (or another library) did it: not an error
      } else if (status == cudaErrorTooManyPeers) {
        (void)cudaGetLastError();  // the hardware's peer limit: copies between these go through the host
        ++pairs_without_access;
      } else {
        DPB_CUDA_CHECK(status);
      }
    }
  }
  return pairs_without_access;
}

}  // namespace dpbench
