// The model zoo's table. Planned models are listed (implemented = false) so that asking for one
// gives "not implemented yet" rather than "unknown model".
#include "models/model_registry.h"

#include "models/cnn_model.h"
#include "models/trivial.h"

namespace dpbench {

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> entries = {
      {"trivial", "tiny dense network (32x32x3 -> 256 -> 10) for smoke tests", true, false,
       ModelDefaults{64, "sgd", 0.05},
       [](const RunConfig& config) { return create_trivial_model(config); }},
      {"resnet50", "ResNet-50 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const RunConfig& config) { return create_resnet50_model(config); }},
      {"resnet101", "ResNet-101 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const RunConfig& config) { return create_resnet101_model(config); }},
      {"resnet152", "ResNet-152 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const RunConfig& config) { return create_resnet152_model(config); }},
      {"inception3", "Inception-v3, 299x299", true, true, {64, "momentum", 0.1},
       [](const RunConfig& config) { return create_inception3_model(config); }},
      {"vgg16", "VGG-16, 224x224", true, true, {64, "momentum", 0.01},
       [](const RunConfig& config) { return create_vgg16_model(config); }},
      {"cifar10_cnn", "Keras CIFAR-10 CNN, 32x32", true, true, {128, "momentum", 0.01},
       [](const RunConfig& config) { return create_cifar10_cnn_model(config); }},
      {"nmt", "LSTM encoder-decoder NMT", false, false, {128, "adam", 1e-3}, nullptr},
      {"rnnlm", "LSTM language model", false, false, {64, "adam", 1e-3}, nullptr},
  };
  return entries;
}

const ModelEntry* find_model(const std::string& name) {
  for (const ModelEntry& entry : model_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

}  // namespace dpbench
