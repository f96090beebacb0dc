// A device that fails while another is stuck where no abort reaches it (as in an NCCL wait for a
// peer that never came): the runner hands the failure to on_stuck_devices after the grace period
// instead of waiting forever, and without the callback it keeps waiting for the stuck thread.
// Building the replicas: every device's at once, and one device's failure ends the construction
// with its message.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/run_config.h"
#include "engine/backends.h"
#include "engine/errors.h"
#include "engine/training/runner.h"
#include "models/model_registry.h"

using namespace dpbench;

namespace {

// Replica 1 throws in its first update; replica 0 then blocks in its own until released and, like
// a thread inside NCCL, does not notice abort().
class StuckPeerStrategy : public Strategy {
 public:
  std::string name() const override { return "stuck_peer"; }
  void setup(const ParameterLayout&, std::vector<Replica>&) override {}
  void on_gradients_ready(int, GradientRange, const Event&) override {}
  void finish_step(int replica, int64_t) override {
    if (replica == 1) throw RuntimeError("device 1 ran out of memory");
    while (!released) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void abort() override { ++aborts; }

  std::atomic<bool> released{false};
  std::atomic<int> aborts{0};
};

// Passes everything to a model, but each create_replica first waits (up to a deadline) until every
// device's has begun, and notes whether it saw them all: built one after the other, none would.
// The device `failing` then throws instead of building.
class GatedModel : public Model {
 public:
  GatedModel(const Model& inner, int devices, int failing) : inner_(inner), devices_(devices), failing_(failing) {}
  std::string name() const override { return inner_.name(); }
  const ParameterLayout& layout() const override { return inner_.layout(); }
  std::string unit() const override { return inner_.unit(); }
  StepFlops flops_per_sample() const override { return inner_.flops_per_sample(); }
  std::vector<float> initial_parameters(uint64_t seed) const override { return inner_.initial_parameters(seed); }
  std::unique_ptr<ModelReplica> create_replica(Device& device, ParameterSet& parameters,
                                               const ReplicaShard& shard) const override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++started_;
      all_started_.notify_all();
      if (all_started_.wait_for(lock, std::chrono::seconds(5), [&] { return started_ == devices_; }))
        ++saw_every_device;
    }
    if (device.index() == failing_)
      throw RuntimeError("device " + std::to_string(failing_) + " ran out of memory");
    return inner_.create_replica(device, parameters, shard);
  }

  mutable int saw_every_device = 0;  // builders that found every device's begun

 private:
  const Model& inner_;
  const int devices_, failing_;
  mutable std::mutex mutex_;
  mutable std::condition_variable all_started_;
  mutable int started_ = 0;
};

class NoExchangeStrategy : public Strategy {
 public:
  std::string name() const override { return "no_exchange"; }
  void setup(const ParameterLayout&, std::vector<Replica>&) override {}
  void on_gradients_ready(int, GradientRange, const Event&) override {}
  void finish_step(int, int64_t) override {}
  void abort() override {}
};

std::unique_ptr<Model> trivial_model() {
  RunConfig config;
  config.model = "trivial";
  config.batch_size = 2;
  return find_model("trivial")->create(config);
}

RunnerSettings settings_for_test() {
  RunnerSettings settings;
  settings.batch_size = 2;
  settings.num_warmup_batches = 1;
  settings.num_batches = 2;
  settings.stuck_device_grace = std::chrono::milliseconds(200);
  return settings;
}

}  // namespace

TEST_CASE("a failure beside a stuck device reaches on_stuck_devices after the grace period",
          "[runner]") {
  const std::unique_ptr<Model> model = trivial_model();
  std::vector<std::unique_ptr<Device>> devices = create_devices(BackendKind::reference, {0, 1});
  StuckPeerStrategy strategy;
  RunnerSettings settings = settings_for_test();
  std::vector<std::string> reports;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration reported_after{};
  settings.on_stuck_devices = [&](const std::string& failure) {
    reported_after = std::chrono::steady_clock::now() - start;
    reports.push_back(failure);
    strategy.released = true;  // what ending the process would do to the stuck thread
  };
  Runner runner(*model, strategy, devices, settings);
  CHECK_THROWS_WITH(runner.run(nullptr, nullptr), Catch::Contains("device 1 ran out of memory"));
  REQUIRE(reports.size() == 1);
  CHECK_THAT(reports[0], Catch::Contains("device 1 ran out of memory") &&
                             Catch::Contains("1 of 2 devices were still waiting"));
  CHECK(reported_after >= std::chrono::milliseconds(200));
  CHECK(strategy.aborts > 0);
}

TEST_CASE("without on_stuck_devices the runner waits for the stuck device", "[runner]") {
  const std::unique_ptr<Model> model = trivial_model();
  std::vector<std::unique_ptr<Device>> devices = create_devices(BackendKind::reference, {0, 1});
  StuckPeerStrategy strategy;
  Runner runner(*model, strategy, devices, settings_for_test());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    strategy.released = true;
  });
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(runner.run(nullptr, nullptr), Catch::Contains("device 1 ran out of memory"));
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(500));
  releaser.join();
}

TEST_CASE("the runner builds every device's replica at once", "[runner]") {
  const std::unique_ptr<Model> model = trivial_model();
  const GatedModel gated(*model, 3, /*failing=*/-1);
  std::vector<std::unique_ptr<Device>> devices = create_devices(BackendKind::reference, {0, 1, 2});
  NoExchangeStrategy strategy;
  Runner runner(gated, strategy, devices, settings_for_test());
  CHECK(gated.saw_every_device == 3);
  const RunMeasurements measured = runner.run(nullptr, nullptr);
  CHECK(measured.step_time_ms.size() == 3);  // the warm-up step and the two measured, on replicas built apart
}

TEST_CASE("one device failing to build its replica ends the runner's construction with its message",
          "[runner]") {
  const std::unique_ptr<Model> model = trivial_model();
  const GatedModel gated(*model, 3, /*failing=*/1);
  std::vector<std::unique_ptr<Device>> devices = create_devices(BackendKind::reference, {0, 1, 2});
  NoExchangeStrategy strategy;
  CHECK_THROWS_WITH(Runner(gated, strategy, devices, settings_for_test()),
                    Catch::Contains("device 1 ran out of memory"));
  CHECK(gated.saw_every_device == 3);
}
