// ModelProbe: one replica of a model on one device, for tests that need its loss at chosen
// parameters and the gradients of that loss (finite differences, comparing implementations or
// backends), and the measures those tests compare gradients by. Shared by the host and [gpu]
// model tests.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/training/model.h"
#include "engine/training/parameter_set.h"

namespace dpbench::testing {

// The probe's own loss and step slots, in the device's memory ledger.
inline const MemoryTag kProbeBuffer{MemoryCategory::scratch, "model probe"};

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
    loss_ = device_->allocate(sizeof(float), kProbeBuffer);
    step_ = device_->allocate(sizeof(int32_t), kProbeBuffer);
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

// The largest |value|: the scale that tolerances on a model's gradients are relative to.
inline double largest_magnitude(const std::vector<float>& values) {
  double largest = 0;
  for (float v : values) largest = std::max(largest, static_cast<double>(std::abs(v)));
  return largest;
}

// How far `gradients` are from `reference` (the same layout): the largest |difference|, and how
// many elements differ at all.
struct GradientDifference {
  double largest = 0;
  size_t differing = 0;
};
inline GradientDifference gradient_difference(const std::vector<float>& gradients,
                                              const std::vector<float>& reference) {
  GradientDifference difference;
  for (size_t i = 0; i < gradients.size(); ++i) {
    difference.largest = std::max(difference.largest, std::abs(static_cast<double>(gradients[i]) - reference[i]));
    difference.differing += gradients[i] != reference[i];
  }
  return difference;
}

// Element `index` of tensor `tensor`: the central difference of the loss (step h) and backward's
// gradient there.
struct FiniteDifference {
  std::string tensor;
  size_t index;
  double numeric, backward;
};
// Every tensor's elements 0, 1 + count / spread, 2 (1 + count / spread), ..., at `values`, whose
// gradients (from probe.gradients()) are `gradients`.
inline std::vector<FiniteDifference> sampled_finite_differences(ModelProbe& probe, const ParameterLayout& layout,
                                                                const std::vector<float>& values,
                                                                const std::vector<float>& gradients, double h,
                                                                size_t spread) {
  std::vector<FiniteDifference> samples;
  for (const TensorView& tensor : layout.tensors()) {
    for (size_t k = 0; k < tensor.count; k += 1 + tensor.count / spread) {
      const size_t i = tensor.offset + k;
      samples.push_back({tensor.name, k, probe.central_difference(values, i, h), gradients[i]});
    }
  }
  return samples;
}

// The sampled finite differences (sampled_finite_differences, step h, `spread` per tensor) that
// backward's gradients miss by more than atol + rtol * |numeric|, each named in an unscoped INFO;
// checks that at least `at_least` were sampled and returns how many missed.
inline int missed_finite_differences(ModelProbe& probe, const ParameterLayout& layout, const std::vector<float>& values,
                                     const std::vector<float>& gradients, double h, double atol, double rtol,
                                     int at_least, int* checked) {
  int missed = 0;
  *checked = 0;
  for (const FiniteDifference& d : sampled_finite_differences(probe, layout, values, gradients, h, 5)) {
    if (!(std::abs(d.numeric - d.backward) <= atol + rtol * std::abs(d.numeric))) {
      UNSCOPED_INFO(d.tensor << "[" << d.index << "]: numeric " << d.numeric << ", backward " << d.backward);
      ++missed;
    }
    ++*checked;
  }
  CHECK(*checked >= at_least);
  return missed;
}

// Every tensor of `layout` has a gradient somewhere: no mask or branch leaves one out.
inline void check_every_tensor_has_a_gradient(const ParameterLayout& layout, const std::vector<float>& gradients) {
  for (const TensorView& tensor : layout.tensors()) {
    double sum = 0;
    for (size_t k = 0; k < tensor.count; ++k) sum += std::abs(gradients[tensor.offset + k]);
    INFO(tensor.name);
    CHECK(sum > 0);
  }
}

// A 16-bit `model` (weights stored as `type`) against the fp32 network's loss and gradients at
// `values`: the loss within tolerance / 2 (relative), every gradient within `tolerance` of the
// largest fp32 gradient, and a quarter of them at least different (the 16-bit path did run).
inline void check_16bit_matches_fp32(const Model& model, int batch, DataType type, const std::vector<float>& values,
                                     double fp32_loss, const std::vector<float>& fp32_gradients, double tolerance,
                                     std::unique_ptr<Device> device) {
  const double largest = largest_magnitude(fp32_gradients);
  REQUIRE(largest > 0);
  ModelProbe probe(model, std::move(device), batch, 42, type);
  CHECK(probe.loss_at(values) == Approx(fp32_loss).epsilon(tolerance / 2));
  const std::vector<float> gradients = probe.gradients();
  const GradientDifference difference = gradient_difference(gradients, fp32_gradients);
  INFO("largest fp32 gradient " << largest << ", largest difference " << difference.largest);
  CHECK(difference.largest <= tolerance * largest);
  CHECK(difference.differing > gradients.size() / 4);
}

// One forward and backward of `model` at `values` on a fresh `device`: the loss, the gradients,
// and the activation bytes the device holds (the replica's: the probe's own buffers are scratch).
struct ProbedStep {
  double loss = 0;
  std::vector<float> gradients;
  uint64_t activation_bytes = 0;
};
inline ProbedStep probe_one_step(const Model& model, std::unique_ptr<Device> device, int batch,
                                 DataType weight_copy_type, const std::vector<float>& values) {
  ModelProbe probe(model, std::move(device), batch, 42, weight_copy_type);
  ProbedStep step;
  step.loss = probe.loss_at(values);
  step.gradients = probe.gradients();
  step.activation_bytes =
      probe.device().memory().figures().held[static_cast<size_t>(MemoryCategory::activations)];
  return step;
}

// Whether two float vectors hold the same bits (0.0 and -0.0 differ; so would two NaNs' payloads).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           uint32_t bits_x = 0, bits_y = 0;
           std::memcpy(&bits_x, &x, sizeof(x));
           std::memcpy(&bits_y, &y, sizeof(y));
           return bits_x == bits_y;
         });
}

}  // namespace dpbench::testing
