// ModelProbe: one replica of a model on one device, for tests that need its loss at chosen
// parameters and the gradients of that loss (finite differences, comparing implementations or
// backends). Shared by the host and [gpu] model tests.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "engine/backend/device.h"
#include "engine/training/model.h"
#include "engine/training/parameter_set.h"

namespace dpbench::testing {

class RecordingAnnouncer final : public GradientAnnouncer {
 public:
  void announce(GradientRange range) override { ranges.push_back(range); }
  std::vector<GradientRange> ranges;
};

class ModelProbe {
 public:
  // weight_copy_type: the 16-bit weight copy a mixed-precision model reads (f32: none).
  ModelProbe(const Model& model, std::unique_ptr<Device> device, int batch, uint64_t data_seed = 42,
             DataType weight_copy_type = DataType::f32)
      : device_((device->make_current(), std::move(device))), params_(*device_, model.layout(), weight_copy_type) {
    loss_ = device_->allocate(sizeof(float));
    step_ = device_->allocate(sizeof(int32_t));
    const int32_t zero = 0;
    device_->copy_from_host(step_.data(), &zero, sizeof(zero));
    replica_ = model.create_replica(*device_, params_, ReplicaShard{0, 1, batch, data_seed});
  }

  Device& device() { return *device_; }

  // Each call makes the probe's device current first: the thread may have run another device
  // (a multi-GPU run leaves its last one current), and a GPU's handles work on their own only.
  double loss_at(const std::vector<float>& values) {
    device_->make_current();
    params_.upload(values);
    replica_->forward(StepContext{loss_.as<float>(), step_.as<int32_t>()});
    float value = 0;
    device_->copy_to_host(&value, loss_.data(), sizeof(value));
    return value;
  }

  // The loss's derivative in parameter i at `values`, by central differences of step h.
  double central_difference(const std::vector<float>& values, size_t i, double h) {
    std::vector<float> plus = values, minus = values;
    plus[i] += static_cast<float>(h);
    minus[i] -= static_cast<float>(h);
    return (loss_at(plus) - loss_at(minus)) / (2 * h);
  }

  // Backward after loss_at; checks that the announcements cover the layout once, ascending.
  std::vector<float> gradients() {
    device_->make_current();
    RecordingAnnouncer announcer;
    replica_->backward(announcer);
    announced_ = announcer.ranges;
    size_t next = 0;
    for (const GradientRange& range : announcer.ranges) {
      CHECK(range.offset == next);
      next = range.end();
    }
    CHECK(next == params_.count());
    std::vector<float> values(params_.count());
    device_->copy_to_host(values.data(), params_.gradients(), sizeof(float) * values.size());
    return values;
  }
  // The ranges the last gradients() call's backward announced, in order.
  const std::vector<GradientRange>& announced() const { return announced_; }

 private:
  std::unique_ptr<Device> device_;
  ParameterSet params_;
  Buffer loss_, step_;
  std::unique_ptr<ModelReplica> replica_;
  std::vector<GradientRange> announced_;
};

}  // namespace dpbench::testing
