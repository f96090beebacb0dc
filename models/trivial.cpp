// The trivial model and its per-device replica.
#include "models/trivial.h"

#include "engine/backend/counter_random.h"
#include "models/image_inputs.h"
#include "models/layers/dense.h"
#include "models/layers/softmax_cross_entropy.h"
#include "models/model_flops.h"

namespace dpbench {
namespace {

constexpr int kImageSize = 32, kChannels = 3, kHidden = 256, kClasses = 10;
constexpr int kInputs = kImageSize * kImageSize * kChannels;

class TrivialModel;

class TrivialReplica : public ModelReplica {
 public:
  TrivialReplica(const TrivialModel& model, Device& device, ParameterSet& params,
                 const ReplicaShard& shard);
  void forward(const StepContext& context) override;
  void backward(GradientAnnouncer& announcer) override;
  std::vector<InputBuffer> inputs() const override {
    return {{"images", images_.data(), images_.bytes()}, {"labels", labels_.data(), labels_.bytes()}};
  }

 private:
  const TrivialModel& model_;
  Device& device_;
  ParameterSet& params_;
  int batch_;
  Buffer images_;    // (B, kInputs), generated once: synthetic data stays on the device
  Buffer labels_;    // (B)
  Buffer hidden_;    // (B, kHidden) after ReLU
  Buffer logits_;    // (B, kClasses), overwritten by dlogits
  Buffer dhidden_;   // (B, kHidden)
  SoftmaxCrossEntropy loss_;
};

class TrivialModel : public Model {
 public:
  TrivialModel()
      : hidden_layer_(layout_, "dense1", kInputs, kHidden),
        output_layer_(layout_, "dense2", kHidden, kClasses) {
    layout_.finalize();
  }
  std::string name() const override { return "trivial"; }
  const ParameterLayout& layout() const override { return layout_; }
  std::string unit() const override { return "images"; }
  // Two dense layers; the first needs no input gradient (its input is the images).
  StepFlops flops_per_sample() const override {
    StepFlops flops = matmul_flops(1, kInputs, kHidden, false);
    flops += matmul_flops(1, kHidden, kClasses, true);
    return flops;
  }

  std::vector<float> initial_parameters(uint64_t seed) const override {
    std::vector<float> values(layout_.total_count());
    initialize_dense(hidden_layer_, layout_, seed, values);
    initialize_dense(output_layer_, layout_, seed, values);
    return values;
  }

  std::unique_ptr<ModelReplica> create_replica(Device& device, ParameterSet& params,
                                               const ReplicaShard& shard) const override {
    return std::make_unique<TrivialReplica>(*this, device, params, shard);
  }

  // Each dense layer is a unit; the output layer, declared last, comes first in the layout.
  ParameterUnits parameter_units() const override {
    ParameterUnits units;
    units.units.push_back({"dense2", output_layer_.gradient_range(layout_)});
    units.units.push_back({"dense1", hidden_layer_.gradient_range(layout_)});
    units.uses = {{kHiddenUnit, UnitPass::forward, false},
                  {kOutputUnit, UnitPass::forward, false},
                  {kOutputUnit, UnitPass::backward, true},
                  {kHiddenUnit, UnitPass::backward, true}};
    return units;
  }
  static constexpr int kOutputUnit = 0, kHiddenUnit = 1;

  const DenseLayer& hidden_layer() const { return hidden_layer_; }
  const DenseLayer& output_layer() const { return output_layer_; }

 private:
  ParameterLayout layout_;
  DenseLayer hidden_layer_;
  DenseLayer output_layer_;
};

TrivialReplica::TrivialReplica(const TrivialModel& model, Device& device, ParameterSet& params,
                               const ReplicaShard& shard)
    : model_(model),
      device_(device),
      params_(params),
      batch_(shard.batch_size),
      images_(device.allocate(sizeof(float) * batch_ * kInputs, MemoryTag{MemoryCategory::data, "input"})),
      labels_(device.allocate(sizeof(int32_t) * batch_, MemoryTag{MemoryCategory::data, "labels"})),
      hidden_(device.allocate(sizeof(float) * batch_ * kHidden, MemoryTag{MemoryCategory::activations, "hidden"})),
      logits_(device.allocate(sizeof(float) * batch_ * kClasses, MemoryTag{MemoryCategory::activations, "logits"})),
      dhidden_(device.allocate(sizeof(float) * batch_ * kHidden, MemoryTag{MemoryCategory::scratch, "hidden"})),
      loss_(device, batch_, kClasses) {
  // Sample s of the global batch is the same wherever it lands, so any sharding sees the same data.
  Backend& ops = device.ops();
  const uint64_t first_sample = shard.first_global_sample();
  ops.fill_uniform_by_index(images_.as<float>(), static_cast<size_t>(batch_) * kInputs, shard.seed,
                            kRandomStreamInputs, first_sample * kInputs, -1.0f, 1.0f);
  ops.fill_labels_by_index(labels_.as<int32_t>(), batch_, shard.seed, kRandomStreamLabels,
                           first_sample, kClasses);
}

void TrivialReplica::forward(const StepContext& context) {
  Backend& ops = device_.ops();
  {
    UnitScope unit(context.units, TrivialModel::kHiddenUnit, UnitPass::forward);
    model_.hidden_layer().forward(ops, params_, images_.as<float>(), hidden_.as<float>(), batch_);
  }
  ops.relu_forward(hidden_.as<float>(), hidden_.as<float>(), static_cast<size_t>(batch_) * kHidden);
  {
    UnitScope unit(context.units, TrivialModel::kOutputUnit, UnitPass::forward);
    model_.output_layer().forward(ops, params_, hidden_.as<float>(), logits_.as<float>(), batch_);
  }
  loss_.forward_backward(ops, logits_.as<float>(), labels_.as<int32_t>(), context.loss_out);
}

void TrivialReplica::backward(GradientAnnouncer& announcer) {
  Backend& ops = device_.ops();
  const float* dlogits = logits_.as<float>();
  {
    UnitScope unit(announcer.unit_hooks(), TrivialModel::kOutputUnit, UnitPass::backward);
    model_.output_layer().backward(ops, params_, hidden_.as<float>(), dlogits, dhidden_.as<float>(),
                                   batch_);
    announcer.announce(model_.output_layer().gradient_range(params_.layout()));
  }
  ops.relu_backward(hidden_.as<float>(), dhidden_.as<float>(), dhidden_.as<float>(),
                    static_cast<size_t>(batch_) * kHidden);
  // The input layer needs no dx: images are data.
  UnitScope unit(announcer.unit_hooks(), TrivialModel::kHiddenUnit, UnitPass::backward);
  model_.hidden_layer().backward(ops, params_, images_.as<float>(), dhidden_.as<float>(), nullptr,
                                 batch_);
  announcer.announce(model_.hidden_layer().gradient_range(params_.layout()));
}

}  // namespace

std::unique_ptr<Model> create_trivial_model(const ModelSettings&) { return std::make_unique<TrivialModel>(); }

ModelInputs trivial_inputs() {
  // Its dense input layer reads fp32 pixels in NCHW order whatever --data_format and --precision say.
  const ImageInputLayout layout{ImageSpec{kChannels, kImageSize, kImageSize, kClasses}, DataFormat::nchw,
                                DataType::f32};
  auto synthetic = [layout](const ModelSettings& config, const Model&) { return synthetic_image_batches(config, layout); };
  auto cifar10 = [layout](const ModelSettings& config, const Model&) { return cifar10_image_batches(config, layout); };
  return ModelInputs{synthetic, {{"cifar10", cifar10}}};
}

}  // namespace dpbench
