// CnnModel and its replica: synthetic images and labels made once on the device, the network's
// passes, and the fused softmax cross-entropy between them.
#include "models/cnn_model.h"

#include <algorithm>

#include "engine/backend/counter_random.h"
#include "engine/backend/step_trace.h"
#include "engine/errors.h"
#include "models/layers/softmax_cross_entropy.h"
#include "models/model_flops.h"

namespace dpbench {

DataFormat parse_data_format(const std::string& text) {
  if (text == "NCHW") return DataFormat::nchw;
  if (text == "NHWC") return DataFormat::nhwc;
  throw ConfigError("--data_format=" + text + ": expected NCHW or NHWC");
}

ImageSpec image_spec_for_data(const ModelSettings& config, const ImageSpec& model_default) {
  if (config.data.data_name == "cifar10") return ImageSpec{3, 32, 32, 10};
  return model_default;
}

ModelInputs cnn_inputs(CnnDataSets data_sets) {
  // The registry pairs these with a CnnModel factory, so the model handed in is a CnnModel.
  auto layout_of = [](const ModelSettings& config, const Model& model) {
    return ImageInputLayout{static_cast<const CnnModel&>(model).images(), parse_data_format(config.data_format),
                            config.activation_type()};
  };
  auto synthetic = [layout_of](const ModelSettings& config, const Model& model) {
    return synthetic_image_batches(config, layout_of(config, model));
  };
  auto cifar10 = [layout_of](const ModelSettings& config, const Model& model) {
    return cifar10_image_batches(config, layout_of(config, model));
  };
  ModelInputs inputs{synthetic};
  if (data_sets == CnnDataSets::cifar10) inputs.data_sets.push_back({"cifar10", cifar10});
  return inputs;
}

namespace {

class CnnReplica : public ModelReplica {
 public:
  CnnReplica(const CnnModel& model, Device& device, ParameterSet& params, const ReplicaShard& shard)
      : model_(model),
        device_(device),
        network_(model.network(), device, params, shard, !model.forward_only()),
        labels_(device.allocate(sizeof(int32_t) * shard.batch_size, MemoryTag{MemoryCategory::data, "labels"})),
        loss_(device, shard.batch_size, model.images().classes) {
    fill_synthetic_images(shard);
    device.ops().fill_labels_by_index(labels_.as<int32_t>(), shard.batch_size, shard.seed,
                                      kRandomStreamLabels, shard.first_global_sample(),
                                      model.images().classes);
  }

  void forward(const StepContext& context) override {
    step_ = context.step;
    network_.forward(step_, context.units);
    // The logits' gradient buffer is the logits buffer: dlogits replace them here.
    const TensorId logits = model_.network().logits();
    TracedSpan span(device_, StreamKind::compute, "loss", "forward");
    loss_.forward_backward(device_.ops(), static_cast<float*>(network_.gradients(logits)),
                           labels_.as<int32_t>(), context.loss_out, context.loss_scale);
  }

  void backward(GradientAnnouncer& announcer) override { network_.backward(step_, announcer); }

  std::vector<InputBuffer> inputs() const override {
    const TensorId input = model_.network().input();
    return {{"images", network_.values(input), model_.network().shape(input).bytes()},
            {"labels", labels_.data(), labels_.bytes()}};
  }

 private:
  // Image values are defined per global logical (sample, channel, y, x) index, as an NCHW tensor,
  // so every sharding and both data formats train on the same images. 16-bit images are the
  // fp32 ones rounded. They are made a few samples at a time: the temporaries come after the
  // network's arena, so whatever they take beside it would be the set-up's peak.
  void fill_synthetic_images(const ReplicaShard& shard) {
    constexpr size_t kChunkBytes = size_t{4} << 20;  // fp32 values drawn at a time, at least one sample
    const TensorId input = model_.network().input();
    const Tensor4 stored = model_.network().shape(input);
    const size_t sample_count = stored.count() / static_cast<size_t>(stored.n);
    Tensor4 chunk = stored;
    chunk.type = DataType::f32;
    chunk.n = static_cast<int>(std::clamp<size_t>(kChunkBytes / (sample_count * sizeof(float)), 1,
                                                  static_cast<size_t>(stored.n)));
    const bool nhwc = stored.format != DataFormat::nchw;
    Buffer staging, drawn, plane;
    if (stored.type != DataType::f32) staging = device_.allocate(chunk.bytes(), kSyntheticImages);
    if (nhwc) {
      drawn = device_.allocate(chunk.bytes(), kSyntheticImages);
      plane = device_.allocate(chunk.bytes() / static_cast<size_t>(chunk.c), kSyntheticImages);
    }
    char* images = static_cast<char*>(network_.values(input));
    for (int first = 0; first < stored.n; first += chunk.n) {
      Tensor4 part = chunk;
      part.n = std::min(chunk.n, stored.n - first);
      void* out = images + static_cast<size_t>(first) * sample_count * data_type_bytes(stored.type);
      float* values = stored.type == DataType::f32 ? static_cast<float*>(out) : staging.as<float>();
      fill_fp32_images(shard.seed, shard.first_global_sample() + static_cast<uint64_t>(first), part, values, drawn,
                       plane);
      if (stored.type != DataType::f32)
        device_.ops().convert(DataType::f32, staging.data(), stored.type, out, part.count());
    }
    device_.synchronize();  // the temporaries must outlive the copies
  }

  // `shape.n` samples from global sample `first_sample` on, fp32, in `shape`'s format; an NHWC
  // shape is drawn NCHW into `drawn` and moved one channel at a time through `plane`.
  void fill_fp32_images(uint64_t seed, uint64_t first_sample, const Tensor4& shape, float* images,
                        const Buffer& drawn, const Buffer& plane) {
    Backend& ops = device_.ops();
    const uint64_t first_index = first_sample * (shape.count() / static_cast<size_t>(shape.n));
    if (shape.format == DataFormat::nchw) {
      ops.fill_uniform_by_index(images, shape.count(), seed, kRandomStreamInputs,
                                first_index, -1.0f, 1.0f);
      return;
    }
    // A one-channel tensor has the same memory in both layouts, so it can be copied out of one
    // and into the other.
    const Tensor4 nchw{shape.n, shape.c, shape.h, shape.w, DataFormat::nchw};
    const Tensor4 plane_nchw{shape.n, 1, shape.h, shape.w, DataFormat::nchw};
    const Tensor4 plane_nhwc{shape.n, 1, shape.h, shape.w, DataFormat::nhwc};
    ops.fill_uniform_by_index(drawn.as<float>(), nchw.count(), seed, kRandomStreamInputs,
                              first_index, -1.0f, 1.0f);
    for (int c = 0; c < shape.c; ++c) {
      ops.copy_from_channels(nchw, drawn.as<float>(), c, plane_nchw, plane.as<float>());
      ops.copy_into_channels(plane_nhwc, plane.as<float>(), shape, images, c);
    }
  }

  // The temporaries of making the images, gone before the first step.
  inline static const MemoryTag kSyntheticImages{MemoryCategory::scratch, "synthetic images"};
  const CnnModel& model_;
  Device& device_;
  NetworkReplica network_;
  Buffer labels_;  // (n)
  SoftmaxCrossEntropy loss_;
  const int32_t* step_ = nullptr;  // the runner's step counter: the same pointer every step
};

}  // namespace

CnnModel::CnnModel(std::string name, const ModelSettings& config, const ImageSpec& images,
                   const BuildGraph& build)
    : name_(std::move(name)), images_(images), batch_size_(config.batch_size), forward_only_(config.forward_only) {
  if (batch_size_ <= 0) throw ConfigError(name_ + ": the batch size must be positive");
  const Tensor4 input{batch_size_, images.channels, images.height, images.width,
                      parse_data_format(config.data_format), config.activation_type()};
  network_ = std::make_unique<Network>(layout_, input);
  const TensorId logits = build(*network_, network_->input());
  const Tensor4& out = network_->shape(logits);
  if (out.c != images.classes || out.h != 1 || out.w != 1 || out.type != DataType::f32)
    throw RuntimeError(name_ + ": the network ends in " + describe(out) + ", not " +
                       std::to_string(images.classes) + " fp32 logits per sample");
  layout_.finalize();
  if (forward_only_) network_->prepare_for_inference();
  network_->set_fuse_batch_norm_statistics(config.fuse_batch_norm_statistics);
  network_->set_recompute_blocks(config.recomputes_blocks());
  network_->finalize(logits);
}

StepFlops CnnModel::flops_per_sample() const { return per_sample(network_->flops(), batch_size_); }

std::string CnnModel::flops_counted() const {
  std::string counted = Model::flops_counted();
  if (network_->recomputes_blocks())
    counted += "; with --activation_checkpointing=blocks, the forward of every block's layers whose outputs only the "
               "block reads once more in backward (recompute)";
  return counted;
}

std::vector<float> CnnModel::initial_parameters(uint64_t seed) const {
  std::vector<float> values(layout_.total_count());
  network_->initialize(seed, values);
  return values;
}

std::unique_ptr<ModelReplica> CnnModel::create_replica(Device& device, ParameterSet& parameters,
                                                       const ReplicaShard& shard) const {
  if (shard.batch_size != batch_size_)
    throw RuntimeError(name_ + " was built for a batch of " + std::to_string(batch_size_) +
                       " per device, not " + std::to_string(shard.batch_size));
  return std::make_unique<CnnReplica>(*this, device, parameters, shard);
}

}  // namespace dpbench
