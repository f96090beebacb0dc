// InProcessCommunicator: every collective on 1 to 4 reference devices (one thread per rank) in
// fp32, fp16 and bf16, out of place and in place, against exact expected values; the fixed rank
// order of its sums; reuse of the rendezvous; abort and mismatched calls ending in exceptions.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/backends.h"
#include "engine/communication/communicator.h"
#include "engine/data_type.h"
#include "engine/errors.h"
#include "engine/reference/reference_device.h"
#include "tests/rank_threads.h"

using namespace dpbench;

// What the tests allocate themselves, in the device's memory ledger.
const MemoryTag kTestBuffer{MemoryCategory::scratch, "test"};
using dpbench::testing::on_rank_threads;

namespace {

constexpr DataType kTypes[] = {DataType::f32, DataType::f16, DataType::bf16};
constexpr StreamKind kStream = StreamKind::communication;

// Reference devices and a communicator over them, as the runner builds them.
struct Ranks {
  explicit Ranks(int count) {
    for (int i = 0; i < count; ++i) devices.push_back(create_reference_device(i));
    std::vector<Device*> pointers;
    for (auto& device : devices) pointers.push_back(device.get());
    communicator = create_communicator(pointers);
  }
  std::vector<std::unique_ptr<Device>> devices;
  std::unique_ptr<Communicator> communicator;
};

// Device memory holding `count` values of `type`.
class TypedBuffer {
 public:
  TypedBuffer(Device& device, DataType type, size_t count)
      : type_(type), count_(count), buffer_(device.allocate(count * data_type_bytes(type), kTestBuffer)) {}
  void fill(const std::function<float(size_t)>& value) {
    for (size_t i = 0; i < count_; ++i) store_from_float(type_, buffer_.data(), i, value(i));
  }
  std::vector<float> values() const {
    std::vector<float> values(count_);
    for (size_t i = 0; i < count_; ++i) values[i] = load_as_float(type_, buffer_.data(), i);
    return values;
  }
  void* data() const { return buffer_.data(); }
  // The element at `index`, as a pointer (for in-place calls that pass a part of the buffer).
  void* at(size_t index) const { return static_cast<unsigned char*>(buffer_.data()) + index * data_type_bytes(type_); }

 private:
  DataType type_;
  size_t count_;
  Buffer buffer_;
};

// Small integers: every value and every partial sum over up to 4 ranks (at most 72) is exact in
// fp32, fp16 and bf16 (integers up to 256 are), so results can be compared exactly.
float input_value(int rank, size_t index) {
  return static_cast<float>((rank + 1) * (1 + index % 4) + index % 3);
}

constexpr float kUntouched = -7.0f;  // fills buffers whose contents a call must not change

// Sum over ranks of input_value(r, index); average as the communicator defines it: that sum
// times 1/N in fp32, then rounded once to the type.
float expected_reduction(int ranks, size_t index, DataType type, ReduceOp op) {
  float sum = 0;
  for (int r = 0; r < ranks; ++r) sum += input_value(r, index);
  return round_to(type, op == ReduceOp::average ? sum * (1.0f / static_cast<float>(ranks)) : sum);
}

constexpr size_t kCount = 7;  // odd, so nothing lines up by accident
constexpr size_t kChunk = 3;

// Every collective once on `rank`, each output read back under a name.
std::map<std::string, std::vector<float>> run_every_collective(Communicator& comm, Device& device, int rank,
                                                               DataType type) {
  const int ranks = comm.size();
  const int root = ranks - 1;  // not 0, so a root that is ignored shows
  std::map<std::string, std::vector<float>> out;
  auto input = [&](size_t count) {
    TypedBuffer buffer(device, type, count);
    buffer.fill([&](size_t i) { return input_value(rank, i); });
    return buffer;
  };
  auto untouched = [&](size_t count) {
    TypedBuffer buffer(device, type, count);
    buffer.fill([](size_t) { return kUntouched; });
    return buffer;
  };

  for (ReduceOp op : {ReduceOp::sum, ReduceOp::average}) {
    const std::string suffix = op == ReduceOp::sum ? " sum" : " average";
    TypedBuffer send = input(kCount), recv = untouched(kCount);
    comm.all_reduce(rank, send.data(), recv.data(), kCount, type, op, kStream);
    out["all_reduce" + suffix] = recv.values();
    out["all_reduce" + suffix + " send"] = send.values();
    TypedBuffer in_place = input(kCount);
    comm.all_reduce(rank, in_place.data(), in_place.data(), kCount, type, op, kStream);
    out["all_reduce in place" + suffix] = in_place.values();
    TypedBuffer reduced = untouched(kCount);
    comm.reduce(rank, send.data(), reduced.data(), kCount, type, op, root, kStream);
    out["reduce" + suffix] = reduced.values();
    TypedBuffer scatter_send = input(ranks * kChunk), scattered = untouched(kChunk);
    comm.reduce_scatter(rank, scatter_send.data(), scattered.data(), kChunk, type, op, kStream);
    out["reduce_scatter" + suffix] = scattered.values();
    TypedBuffer scatter_in_place = input(ranks * kChunk);
    comm.reduce_scatter(rank, scatter_in_place.data(), scatter_in_place.at(rank * kChunk), kChunk, type, op, kStream);
    out["reduce_scatter in place" + suffix] = scatter_in_place.values();
  }
  {
    TypedBuffer send = input(kCount), recv = untouched(kCount);
    comm.broadcast(rank, send.data(), recv.data(), kCount, type, root, kStream);
    out["broadcast"] = recv.values();
    TypedBuffer in_place = rank == root ? input(kCount) : untouched(kCount);
    comm.broadcast(rank, in_place.data(), in_place.data(), kCount, type, root, kStream);
    out["broadcast in place"] = in_place.values();
  }
  {
    TypedBuffer send = input(kChunk), gathered = untouched(ranks * kChunk);
    comm.all_gather(rank, send.data(), gathered.data(), kChunk, type, kStream);
    out["all_gather"] = gathered.values();
    // In place: this rank's chunk already sits at its place in the output.
    TypedBuffer in_place = untouched(ranks * kChunk);
    in_place.fill([&](size_t i) { return i / kChunk == static_cast<size_t>(rank) ? input_value(rank, i % kChunk) : kUntouched; });
    comm.all_gather(rank, in_place.at(rank * kChunk), in_place.data(), kChunk, type, kStream);
    out["all_gather in place"] = in_place.values();
  }
  {
    TypedBuffer send = input(ranks * kChunk), recv = untouched(ranks * kChunk);
    comm.all_to_all(rank, send.data(), recv.data(), kChunk, type, kStream);
    out["all_to_all"] = recv.values();
  }
  return out;
}

// What rank `rank` must hold after run_every_collective, under the same names.
std::map<std::string, std::vector<float>> expected_outputs(int ranks, int rank, DataType type) {
  const int root = ranks - 1;
  std::map<std::string, std::vector<float>> out;
  auto input = [&](int r, size_t count) {
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = round_to(type, input_value(r, i));
    return values;
  };
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::average}) {
    const std::string suffix = op == ReduceOp::sum ? " sum" : " average";
    std::vector<float> reduced(kCount);
    for (size_t i = 0; i < kCount; ++i) reduced[i] = expected_reduction(ranks, i, type, op);
    out["all_reduce" + suffix] = reduced;
    out["all_reduce" + suffix + " send"] = input(rank, kCount);  // out of place leaves send alone
    out["all_reduce in place" + suffix] = reduced;
    out["reduce" + suffix] = rank == root ? reduced : std::vector<float>(kCount, kUntouched);
    std::vector<float> scattered(kChunk);
    for (size_t j = 0; j < kChunk; ++j) scattered[j] = expected_reduction(ranks, rank * kChunk + j, type, op);
    out["reduce_scatter" + suffix] = scattered;
    // In place: the other chunks of the send buffer keep this rank's inputs.
    std::vector<float> in_place = input(rank, ranks * kChunk);
    for (size_t j = 0; j < kChunk; ++j) in_place[rank * kChunk + j] = scattered[j];
    out["reduce_scatter in place" + suffix] = in_place;
  }
  out["broadcast"] = input(root, kCount);
  out["broadcast in place"] = input(root, kCount);
  std::vector<float> gathered;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> chunk = input(r, kChunk);
    gathered.insert(gathered.end(), chunk.begin(), chunk.end());
  }
  out["all_gather"] = gathered;
  out["all_gather in place"] = gathered;
  std::vector<float> exchanged;
  for (int sender = 0; sender < ranks; ++sender) {
    const std::vector<float> all = input(sender, ranks * kChunk);
    exchanged.insert(exchanged.end(), all.begin() + rank * kChunk, all.begin() + (rank + 1) * kChunk);
  }
  out["all_to_all"] = exchanged;
  return out;
}

}  // namespace

TEST_CASE("the in-process communicator computes every collective exactly on 1 to 4 ranks", "[communicator]") {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (DataType type : kTypes) {
      Ranks setup(ranks);
      std::vector<std::map<std::string, std::vector<float>>> outputs(ranks);
      on_rank_threads(ranks, [&](int rank) {
        outputs[rank] = run_every_collective(*setup.communicator, *setup.devices[rank], rank, type);
      });
      for (int rank = 0; rank < ranks; ++rank) {
        const auto expected = expected_outputs(ranks, rank, type);
        REQUIRE(outputs[rank].size() == expected.size());
        for (const auto& [name, values] : expected) {
          INFO(ranks << " ranks, " << data_type_name(type) << ", rank " << rank << ": " << name);
          CHECK(outputs[rank].at(name) == values);
        }
      }
    }
  }
}

TEST_CASE("every collective counts as work on its rank's device and stream", "[communicator]") {
  Ranks ranks(2);
  on_rank_threads(2, [&](int rank) {
    std::vector<float> send(4, 1.0f), recv(4, 0.0f);
    ranks.communicator->all_reduce(rank, send.data(), recv.data(), 4, DataType::f32, ReduceOp::sum, kStream);
    ranks.communicator->group_start(rank);
    ranks.communicator->broadcast(rank, send.data(), recv.data(), 4, DataType::f32, 0, kStream);
    ranks.communicator->group_end(rank);
    ranks.communicator->all_gather(rank, send.data(), recv.data(), 2, DataType::f32, kStream);
  });
  for (const auto& device : ranks.devices) {
    CHECK(device->enqueued(kStream) == 3);  // groups count the collectives inside them
    CHECK(device->enqueued(StreamKind::compute) == 0);
  }
}

TEST_CASE("the in-process communicator sums ranks in order 0..N-1 in fp32 and rounds once", "[communicator]") {
  // fp32: (1e8 + 1) rounds back to 1e8 (spacing 8), so rank order gives 0 where any other order
  // gives 1. fp16: 2048 + 1 + 1 kept in 16 bits each step stays 2048 (spacing 2, ties to even);
  // accumulated in fp32 it is 2050, which fp16 holds. bf16: the same at 256.
  struct Case {
    DataType type;
    std::vector<float> per_rank;
    float expected;
  };
  const std::vector<Case> cases = {{DataType::f32, {1e8f, 1.0f, -1e8f}, 0.0f},
                                   {DataType::f16, {2048.0f, 1.0f, 1.0f}, 2050.0f},
                                   {DataType::bf16, {256.0f, 1.0f, 1.0f}, 258.0f}};
  for (const Case& c : cases) {
    Ranks setup(3);
    std::vector<std::vector<float>> results(3);
    constexpr int kRounds = 20;
    on_rank_threads(3, [&](int rank) {
      TypedBuffer buffer(*setup.devices[rank], c.type, 1);
      for (int round = 0; round < kRounds; ++round) {
        // Vary who arrives last (and so who computes) from round to round.
        std::this_thread::sleep_for(std::chrono::microseconds(((round + rank) % 3) * 200));
        buffer.fill([&](size_t) { return c.per_rank[rank]; });
        setup.communicator->all_reduce(rank, buffer.data(), buffer.data(), 1, c.type, ReduceOp::sum, kStream);
        results[rank].push_back(buffer.values()[0]);
      }
    });
    for (int rank = 0; rank < 3; ++rank) {
      INFO(data_type_name(c.type) << " rank " << rank);
      CHECK(results[rank] == std::vector<float>(kRounds, c.expected));
    }
  }
}

TEST_CASE("successive calls reuse the rendezvous, each with its own inputs", "[communicator]") {
  for (int ranks : {2, 3}) {
    Ranks setup(ranks);
    constexpr int kRounds = 200;
    std::vector<std::vector<float>> results(ranks);
    on_rank_threads(ranks, [&](int rank) {
      TypedBuffer send(*setup.devices[rank], DataType::f32, 2), recv(*setup.devices[rank], DataType::f32, 2);
      for (int round = 0; round < kRounds; ++round) {
        send.fill([&](size_t i) { return static_cast<float>(rank + round + 1000 * static_cast<int>(i)); });
        setup.communicator->all_reduce(rank, send.data(), recv.data(), 2, DataType::f32, ReduceOp::sum, kStream);
        const std::vector<float> values = recv.values();
        results[rank].insert(results[rank].end(), values.begin(), values.end());
      }
    });
    std::vector<float> expected;
    for (int round = 0; round < kRounds; ++round) {
      const float base = static_cast<float>(ranks * round + ranks * (ranks - 1) / 2);
      expected.push_back(base);
      expected.push_back(base + 1000.0f * ranks);
    }
    for (int rank = 0; rank < ranks; ++rank) {
      INFO(ranks << " ranks, rank " << rank);
      CHECK(results[rank] == expected);
    }
  }
}

TEST_CASE("abort releases a rank waiting for a partner that never comes", "[communicator]") {
  Ranks setup(2);
  std::atomic<bool> threw{false};
  std::string message;
  std::thread waiting([&] {
    TypedBuffer buffer(*setup.devices[0], DataType::f32, 4);
    buffer.fill([](size_t i) { return static_cast<float>(i); });
    try {
      setup.communicator->all_reduce(0, buffer.data(), buffer.data(), 4, DataType::f32, ReduceOp::sum, kStream);
    } catch (const RuntimeError& error) {
      message = error.what();
      threw = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 is waiting by now
  setup.communicator->abort();
  waiting.join();
  CHECK(threw.load());
  CHECK_THAT(message, Catch::Contains("aborted"));
  // Later calls fail at once rather than wait.
  TypedBuffer buffer(*setup.devices[1], DataType::f32, 4);
  CHECK_THROWS_WITH(setup.communicator->broadcast(1, buffer.data(), buffer.data(), 4, DataType::f32, 0, kStream),
                    Catch::Contains("aborted"));
}

TEST_CASE("ranks calling different collectives both fail instead of mixing data", "[communicator]") {
  Ranks setup(2);
  std::vector<std::string> messages(2);
  on_rank_threads(2, [&](int rank) {
    TypedBuffer buffer(*setup.devices[rank], DataType::f32, 4);
    buffer.fill([](size_t) { return 1.0f; });
    try {
      if (rank == 0) {
        setup.communicator->all_reduce(0, buffer.data(), buffer.data(), 4, DataType::f32, ReduceOp::sum, kStream);
      } else {
        setup.communicator->broadcast(1, buffer.data(), buffer.data(), 4, DataType::f32, 0, kStream);
      }
    } catch (const RuntimeError& error) {
      messages[rank] = error.what();
    }
  });
  for (const std::string& message : messages) {
    CHECK_THAT(message, Catch::Contains("aborted") && Catch::Contains("broadcast") && Catch::Contains("all_reduce"));
  }
}

TEST_CASE("create_communicator picks the in-process one for reference devices", "[communicator]") {
  Ranks setup(3);
  CHECK(setup.communicator->size() == 3);
  CHECK(setup.communicator->description() == "in-process");
  CHECK_FALSE(setup.communicator->capturable());
  std::vector<Device*> pointers;
  for (auto& device : setup.devices) pointers.push_back(device.get());
  CHECK(enable_peer_access(pointers) == 0);
  CHECK(enable_peer_access({}) == 0);
  CHECK_THROWS_AS(create_communicator({}), RuntimeError);
  CHECK_THROWS_AS(create_communicator({pointers[0], nullptr}), RuntimeError);
  // A rank or root outside the communicator is refused before anyone waits.
  TypedBuffer buffer(*setup.devices[0], DataType::f32, 1);
  CHECK_THROWS_WITH(setup.communicator->all_reduce(3, buffer.data(), buffer.data(), 1, DataType::f32,
                                                   ReduceOp::sum, kStream),
                    Catch::Contains("rank 3 is out of range"));
  CHECK_THROWS_WITH(setup.communicator->broadcast(0, buffer.data(), buffer.data(), 1, DataType::f32, -1, kStream),
                    Catch::Contains("root -1 is out of range"));
}

TEST_CASE("replayed steps turn NCCL's graph mixing off unless the user set it", "[communicator]") {
  const char* before = std::getenv("NCCL_GRAPH_MIXING_SUPPORT");
  const std::string saved = before ? before : "";
  unsetenv("NCCL_GRAPH_MIXING_SUPPORT");
  prepare_collectives_for_replayed_steps();
  REQUIRE(std::getenv("NCCL_GRAPH_MIXING_SUPPORT") != nullptr);
  CHECK(std::string(std::getenv("NCCL_GRAPH_MIXING_SUPPORT")) == "0");
  setenv("NCCL_GRAPH_MIXING_SUPPORT", "1", 1);  // the user's choice stands
  prepare_collectives_for_replayed_steps();
  CHECK(std::string(std::getenv("NCCL_GRAPH_MIXING_SUPPORT")) == "1");
  if (before) {
    setenv("NCCL_GRAPH_MIXING_SUPPORT", saved.c_str(), 1);
  } else {
    unsetenv("NCCL_GRAPH_MIXING_SUPPORT");
  }
}
