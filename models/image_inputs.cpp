// Image batches built on the host (see image_inputs.h).
#include "models/image_inputs.h"

#include <cmath>
#include <cstring>

#include "engine/backend/counter_random.h"
#include "engine/data/cifar10.h"
#include "engine/errors.h"
#include "models/batch_source_support.h"

namespace dpbench {
namespace {

void store_values(const std::vector<float>& values, DataType type, void* out) {
  if (type == DataType::f32) {
    std::memcpy(out, values.data(), values.size() * sizeof(float));
    return;
  }
  uint16_t* half = static_cast<uint16_t*>(out);
  for (size_t i = 0; i < values.size(); ++i)
    half[i] = type == DataType::f16 ? float_to_f16_bits(values[i]) : float_to_bf16_bits(values[i]);
}

class ImageBatchSource final : public ShardedBatchSource {
 public:
  ImageBatchSource(const ImageInputLayout& layout, const Sharding& sharding, std::unique_ptr<Cifar10Dataset> data,
                   std::string origin)
      : ShardedBatchSource(sharding), spec_(layout.spec), format_(layout.format), type_(layout.type),
        data_(std::move(data)), origin_(std::move(origin)) {
    if (data_) read_epochs(data_->size());
  }

  std::string description() const override {
    if (!data_)
      return "synthetic " + std::to_string(spec_.width) + "x" + std::to_string(spec_.height) + "x" +
             std::to_string(spec_.channels) + " images, built on the host";
    return "cifar10 train: " + std::to_string(data_->size()) + " images from " + origin_;
  }
  std::vector<InputSpec> inputs() const override {
    return {{"images", static_cast<size_t>(sharding_.batch) * pixels() * data_type_bytes(type_)},
            {"labels", sizeof(int32_t) * sharding_.batch}};
  }

  int64_t build(int64_t step, int replica, const std::vector<void*>& into) const override {
    thread_local std::vector<float> values;
    values.resize(static_cast<size_t>(sharding_.batch) * pixels());
    int32_t* labels = static_cast<int32_t*>(into[1]);
    if (data_) {
      const std::vector<int64_t> indices = replica_examples(step, replica);
      data_->write_images(indices, format_, values.data());
      data_->write_labels(indices, labels);
    } else {
      synthetic(replica, values.data(), labels);
    }
    store_values(values, type_, into[0]);
    return sharding_.batch;
  }

 private:
  size_t pixels() const { return static_cast<size_t>(spec_.channels) * spec_.height * spec_.width; }

  // Value of logical NCHW element i of the global batch = fma(2, u(i), -1), whatever the layout
  // it is stored in.
  void synthetic(int replica, float* values, int32_t* labels) const {
    const int B = sharding_.batch, C = spec_.channels, H = spec_.height, W = spec_.width;
    const uint64_t first_sample = static_cast<uint64_t>(replica) * B;
    const uint64_t first_index = first_sample * pixels();
    size_t logical = 0;
    for (int n = 0; n < B; ++n)
      for (int c = 0; c < C; ++c)
        for (int y = 0; y < H; ++y)
          for (int x = 0; x < W; ++x, ++logical) {
            const size_t stored = format_ == DataFormat::nchw
                                      ? logical
                                      : ((static_cast<size_t>(n) * H + y) * W + x) * C + c;
            values[stored] =
                std::fma(2.0f, counter_uniform(sharding_.seed, kRandomStreamInputs, first_index + logical), -1.0f);
          }
    for (int b = 0; b < B; ++b)
      labels[b] = static_cast<int32_t>(counter_uint(sharding_.seed, kRandomStreamLabels, first_sample + b) %
                                       static_cast<uint32_t>(spec_.classes));
  }

  ImageSpec spec_;
  DataFormat format_;
  DataType type_;
  std::unique_ptr<Cifar10Dataset> data_;
  std::string origin_;
};

}  // namespace

std::unique_ptr<BatchSource> synthetic_image_batches(const ModelSettings& config, const ImageInputLayout& layout) {
  return std::make_unique<ImageBatchSource>(layout, sharding_of(config), nullptr, "");
}

std::unique_ptr<BatchSource> cifar10_image_batches(const ModelSettings& config, const ImageInputLayout& layout) {
  const ImageSpec& spec = layout.spec;
  if (spec.channels != kCifar10Channels || spec.height != kCifar10Side || spec.width != kCifar10Side ||
      spec.classes != kCifar10Classes)
    throw ConfigError("--data_name=cifar10: --model=" + config.model + " is built for " + std::to_string(spec.width) +
                      "x" + std::to_string(spec.height) + " images and " + std::to_string(spec.classes) +
                      " classes; CIFAR-10 has 32x32 images and 10 classes");
  const std::string& folder = config.data.data_dir;
  auto dataset = std::make_unique<Cifar10Dataset>(Cifar10Dataset::load(folder, Cifar10Split::train));
  return std::make_unique<ImageBatchSource>(layout, sharding_of(config), std::move(dataset), folder);
}

}  // namespace dpbench
