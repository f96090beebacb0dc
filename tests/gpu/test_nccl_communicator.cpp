// [gpu] NcclCommunicator on 1, 2 and all GPUs (up to 4), one thread per rank as the runner drives
// them: every collective in fp32, fp16 and bf16 on small integers (exact in every type, so results
// compare exactly), an all-reduce captured into a CUDA graph and replayed, and peer access.
#include <catch2/catch.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/backends.h"
#include "engine/communication/communicator.h"
#include "engine/machine/environment.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/rank_threads.h"

using namespace dpbench;
using dpbench::gpu_test::HostTensor;
using dpbench::gpu_test::kAllTypes;

namespace {

constexpr StreamKind kStream = StreamKind::communication;

// 1, 2 and every GPU up to 4: the counts with something to exchange, without repeating one.
std::vector<int> rank_counts() {
  const int gpus = std::min(cuda_device_count(), 4);
  std::vector<int> counts = {1};
  if (gpus >= 2) counts.push_back(2);
  if (gpus > 2) counts.push_back(gpus);
  return counts;
}

// Runs body(rank) on one thread per rank, each with its GPU current, and rethrows the first
// failure here (testing::on_rank_threads).
void on_rank_threads(const std::vector<std::unique_ptr<Device>>& devices, const std::function<void(int)>& body) {
  testing::on_rank_threads(static_cast<int>(devices.size()), [&](int rank) {
    devices[rank]->make_current();
    body(rank);
  });
}

// GPUs 0..count-1 and an NCCL communicator over them (destroyed first: it is declared last).
struct GpuRanks {
  explicit GpuRanks(int count) {
    for (int i = 0; i < count; ++i) devices.push_back(create_cuda_device(i));
    for (auto& device : devices) pointers.push_back(device.get());
    communicator = create_communicator(pointers);
  }
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<Device*> pointers;
  std::unique_ptr<Communicator> communicator;
};

// Device memory holding values of `type` (no Catch2 macros inside: used on rank threads).
class DeviceValues {
 public:
  DeviceValues(Device& device, DataType type, const std::vector<float>& values)
      : device_(device), type_(type), count_(values.size()),
        buffer_(device.allocate(values.size() * data_type_bytes(type), gpu_test::kTestBuffer)) {
    const HostTensor host(type, values);
    device_.copy_from_host(buffer_.data(), host.data(), count_ * data_type_bytes(type_));
  }
  void* data() const { return buffer_.data(); }
  void* at(size_t index) const { return static_cast<unsigned char*>(buffer_.data()) + index * data_type_bytes(type_); }
  // Waits for every stream of the device, then reads the values back.
  std::vector<float> values() const {
    HostTensor host(type_, count_);
    device_.copy_to_host(host.data(), buffer_.data(), count_ * data_type_bytes(type_));
    return host.values();
  }

 private:
  Device& device_;
  DataType type_;
  size_t count_;
  Buffer buffer_;
};

// Small integers: every value and partial sum over up to 4 ranks (at most 72) is exact in fp32,
// fp16 and bf16, whatever order NCCL's rings and trees add them in.
float input_value(int rank, size_t index) { return static_cast<float>((rank + 1) * (1 + index % 4) + index % 3); }

std::vector<float> inputs(int rank, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = input_value(rank, i);
  return values;
}

constexpr float kUntouched = -7.0f;
constexpr size_t kCount = 1001;  // odd and past one warp, so NCCL's tail handling runs too
constexpr size_t kChunk = 257;

float sum_over_ranks(int ranks, size_t index) {
  float sum = 0;
  for (int r = 0; r < ranks; ++r) sum += input_value(r, index);
  return sum;
}

// Every collective once on `rank` in `type`; outputs by name. Average is left to its own check.
std::map<std::string, std::vector<float>> run_every_collective(Communicator& comm, Device& device, int rank,
                                                               DataType type) {
  const int ranks = comm.size();
  const int root = ranks - 1;
  std::map<std::string, std::vector<float>> out;
  const std::vector<float> untouched_count(kCount, kUntouched);

  DeviceValues send(device, type, inputs(rank, kCount)), recv(device, type, untouched_count);
  comm.all_reduce(rank, send.data(), recv.data(), kCount, type, ReduceOp::sum, kStream);
  out["all_reduce"] = recv.values();
  DeviceValues in_place(device, type, inputs(rank, kCount));
  comm.all_reduce(rank, in_place.data(), in_place.data(), kCount, type, ReduceOp::sum, kStream);
  out["all_reduce in place"] = in_place.values();
  DeviceValues averaged(device, type, untouched_count);
  comm.all_reduce(rank, send.data(), averaged.data(), kCount, type, ReduceOp::average, kStream);
  out["all_reduce average"] = averaged.values();

  DeviceValues reduced(device, type, untouched_count);
  comm.reduce(rank, send.data(), reduced.data(), kCount, type, ReduceOp::sum, root, kStream);
  if (rank == root) out["reduce"] = reduced.values();  // NCCL leaves recv of other ranks undefined

  DeviceValues broadcast_recv(device, type, untouched_count);
  comm.broadcast(rank, send.data(), broadcast_recv.data(), kCount, type, root, kStream);
  out["broadcast"] = broadcast_recv.values();
  DeviceValues broadcast_in_place(device, type, rank == root ? inputs(rank, kCount) : untouched_count);
  comm.broadcast(rank, broadcast_in_place.data(), broadcast_in_place.data(), kCount, type, root, kStream);
  out["broadcast in place"] = broadcast_in_place.values();

  DeviceValues scatter_send(device, type, inputs(rank, ranks * kChunk));
  DeviceValues scattered(device, type, std::vector<float>(kChunk, kUntouched));
  comm.reduce_scatter(rank, scatter_send.data(), scattered.data(), kChunk, type, ReduceOp::sum, kStream);
  out["reduce_scatter"] = scattered.values();
  comm.reduce_scatter(rank, scatter_send.data(), scatter_send.at(rank * kChunk), kChunk, type, ReduceOp::sum, kStream);
  out["reduce_scatter in place"] = scatter_send.values();

  DeviceValues gather_send(device, type, inputs(rank, kChunk));
  DeviceValues gathered(device, type, std::vector<float>(ranks * kChunk, kUntouched));
  comm.all_gather(rank, gather_send.data(), gathered.data(), kChunk, type, kStream);
  out["all_gather"] = gathered.values();
  std::vector<float> own_chunk_in_place(ranks * kChunk, kUntouched);
  for (size_t j = 0; j < kChunk; ++j) own_chunk_in_place[rank * kChunk + j] = input_value(rank, j);
  DeviceValues gathered_in_place(device, type, own_chunk_in_place);
  comm.all_gather(rank, gathered_in_place.at(rank * kChunk), gathered_in_place.data(), kChunk, type, kStream);
  out["all_gather in place"] = gathered_in_place.values();

  DeviceValues exchange_send(device, type, inputs(rank, ranks * kChunk));
  DeviceValues exchanged(device, type, std::vector<float>(ranks * kChunk, kUntouched));
  comm.all_to_all(rank, exchange_send.data(), exchanged.data(), kChunk, type, kStream);
  out["all_to_all"] = exchanged.values();
  return out;
}

std::map<std::string, std::vector<float>> expected_outputs(int ranks, int rank) {
  const int root = ranks - 1;
  std::map<std::string, std::vector<float>> out;
  std::vector<float> sums(kCount), averages(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    sums[i] = sum_over_ranks(ranks, i);
    averages[i] = sums[i] / static_cast<float>(ranks);  // exact: only checked where ranks is a power of 2
  }
  out["all_reduce"] = sums;
  out["all_reduce in place"] = sums;
  out["all_reduce average"] = averages;
  if (rank == root) out["reduce"] = sums;
  out["broadcast"] = inputs(root, kCount);
  out["broadcast in place"] = inputs(root, kCount);
  std::vector<float> scattered(kChunk);
  for (size_t j = 0; j < kChunk; ++j) scattered[j] = sum_over_ranks(ranks, rank * kChunk + j);
  out["reduce_scatter"] = scattered;
  std::vector<float> scattered_in_place = inputs(rank, ranks * kChunk);
  std::copy(scattered.begin(), scattered.end(), scattered_in_place.begin() + rank * kChunk);
  out["reduce_scatter in place"] = scattered_in_place;
  std::vector<float> gathered, exchanged;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> chunk = inputs(r, kChunk);
    gathered.insert(gathered.end(), chunk.begin(), chunk.end());
    const std::vector<float> all = inputs(r, ranks * kChunk);
    exchanged.insert(exchanged.end(), all.begin() + rank * kChunk, all.begin() + (rank + 1) * kChunk);
  }
  out["all_gather"] = gathered;
  out["all_gather in place"] = gathered;
  out["all_to_all"] = exchanged;
  return out;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

TEST_CASE("NCCL computes every collective exactly on 1, 2 and all GPUs", "[gpu][communicator]") {
  for (int ranks : rank_counts()) {
    GpuRanks setup(ranks);
    REQUIRE(setup.communicator->size() == ranks);
    for (DataType type : kAllTypes) {
      std::vector<std::map<std::string, std::vector<float>>> outputs(ranks);
      on_rank_threads(setup.devices, [&](int rank) {
        outputs[rank] = run_every_collective(*setup.communicator, *setup.devices[rank], rank, type);
      });
      for (int rank = 0; rank < ranks; ++rank) {
        const auto expected = expected_outputs(ranks, rank);
        for (const auto& [name, values] : expected) {
          INFO(ranks << " GPUs, " << data_type_name(type) << ", rank " << rank << ": " << name);
          REQUIRE(outputs[rank].count(name) == 1);
          if (name == "all_reduce average" && !is_power_of_two(ranks)) {
            // 1/N is inexact: NCCL may scale before or after adding, so allow one rounding of
            // the type per rank on values below 72.
            gpu_test::check_close(outputs[rank].at(name), values, 0.0,
                                  ranks * 2 * gpu_test::unit_in_last_place(type), name);
          } else {
            CHECK(outputs[rank].at(name) == values);
          }
        }
      }
    }
  }
}

TEST_CASE("an NCCL all-reduce captured into a CUDA graph replays on every GPU", "[gpu][communicator]") {
  for (int ranks : rank_counts()) {
    GpuRanks setup(ranks);
    REQUIRE(setup.communicator->capturable());
    constexpr size_t kValues = 4096;
    std::vector<std::vector<float>> after_first(ranks), after_second(ranks);
    std::vector<char> captured_something(ranks, 0);  // not vector<bool>: threads write neighbouring elements
    on_rank_threads(setup.devices, [&](int rank) {
      Device& device = *setup.devices[rank];
      Communicator& comm = *setup.communicator;
      DeviceValues buffer(device, DataType::f32, inputs(rank, kValues));
      // One eager call first, as the runner's step 0: NCCL connects to the peers outside the capture.
      comm.all_reduce(rank, buffer.data(), buffer.data(), kValues, DataType::f32, ReduceOp::sum, StreamKind::compute);
      device.synchronize();
      const HostTensor fresh(DataType::f32, inputs(rank, kValues));
      device.copy_from_host(buffer.data(), fresh.data(), kValues * sizeof(float));
      // Device::capture records the compute stream, so the collective goes there.
      std::unique_ptr<CapturedWork> graph = device.capture([&] {
        comm.all_reduce(rank, buffer.data(), buffer.data(), kValues, DataType::f32, ReduceOp::sum, StreamKind::compute);
      });
      captured_something[rank] = graph != nullptr ? 1 : 0;
      if (!graph) return;
      // In place, so each replay sums again: S after the first, N * S after the second.
      graph->launch();
      after_first[rank] = buffer.values();
      graph->launch();
      after_second[rank] = buffer.values();
    });  // the graphs die on their threads, before the communicator they use
    std::vector<float> sums(kValues), twice(kValues);
    for (size_t i = 0; i < kValues; ++i) {
      sums[i] = sum_over_ranks(ranks, i);
      twice[i] = sums[i] * static_cast<float>(ranks);
    }
    for (int rank = 0; rank < ranks; ++rank) {
      INFO(ranks << " GPUs, rank " << rank);
      REQUIRE(captured_something[rank] == 1);
      CHECK(after_first[rank] == sums);
      CHECK(after_second[rank] == twice);
    }
  }
}

TEST_CASE("the NCCL communicator describes the loaded library and rejects bad ranks", "[gpu][communicator]") {
  GpuRanks setup(1);
  const std::string loaded = loaded_library_versions().nccl;
  CHECK(setup.communicator->description() == "nccl " + loaded);
  CHECK_FALSE(loaded.empty());
  DeviceValues buffer(*setup.devices[0], DataType::f32, {1.0f});
  CHECK_THROWS_WITH(setup.communicator->all_reduce(1, buffer.data(), buffer.data(), 1, DataType::f32,
                                                   ReduceOp::sum, kStream),
                    Catch::Contains("rank 1 is out of range"));
  // A root outside the communicator is NCCL's own argument check, reported with the call.
  CHECK_THROWS_WITH(setup.communicator->broadcast(0, buffer.data(), buffer.data(), 1, DataType::f32, 5, kStream),
                    Catch::Contains("ncclBroadcast") && Catch::Contains("rank 0"));
  // One GPU twice would be two ranks on one device, which NCCL does not support.
  CHECK_THROWS_WITH(create_communicator({setup.pointers[0], setup.pointers[0]}), Catch::Contains("appears twice"));
}

TEST_CASE("peer access can be enabled among all GPUs, twice", "[gpu][communicator]") {
  const int gpus = cuda_device_count();
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<Device*> pointers;
  for (int i = 0; i < gpus; ++i) devices.push_back(create_cuda_device(i));
  for (auto& device : devices) pointers.push_back(device.get());
  const int without_access = enable_peer_access(pointers);
  CHECK(without_access >= 0);
  CHECK(without_access <= gpus * (gpus - 1));
  // The second time every pair is already enabled: tolerated, same answer.
  CHECK(enable_peer_access(pointers) == without_access);
}
