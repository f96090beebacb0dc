// CnnModel: an image classifier built as a Network (models/network.h) trained on synthetic
// images with softmax cross-entropy. Every model of the CNN zoo is one of these plus a function
// that builds its graph; the factories below are what the model registry calls.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/training/model.h"
#include "models/image_inputs.h"
#include "models/model_inputs.h"
#include "models/model_settings.h"
#include "models/network.h"

namespace dpbench {

// "NCHW" | "NHWC" -> DataFormat; throws ConfigError otherwise.
DataFormat parse_data_format(const std::string& text);

// The images a model is built for: its own size, or the data set's (--data_name=cifar10: 32x32x3,
// 10 classes) for the models that can be built at that size (the ResNets, whose global pooling
// takes any final grid).
ImageSpec image_spec_for_data(const ModelSettings& config, const ImageSpec& model_default);

class CnnModel : public Model {
 public:
  // Builds the graph from `images` (n, c, h, w) and returns the logits (n, classes, 1, 1).
  using BuildGraph = std::function<TensorId(Network& network, TensorId images)>;

  // The per-device batch and the data format come from the config (they fix every shape).
  CnnModel(std::string name, const ModelSettings& config, const ImageSpec& images,
           const BuildGraph& build);

  std::string name() const override { return name_; }
  const ParameterLayout& layout() const override { return layout_; }
  std::string unit() const override { return "images"; }
  std::vector<float> initial_parameters(uint64_t seed) const override;
  StepFlops flops_per_sample() const override;
  std::string flops_counted() const override;
  // Its blocks, stem and classifier (Note [network units] in models/network.h).
  ParameterUnits parameter_units() const override { return network_->parameter_units(); }
  std::unique_ptr<ModelReplica> create_replica(Device& device, ParameterSet& parameters,
                                               const ReplicaShard& shard) const override;

  const Network& network() const { return *network_; }
  const ImageSpec& images() const { return images_; }
  bool forward_only() const { return forward_only_; }  // replicas run inference passes

 private:
  std::string name_;
  ImageSpec images_;
  int batch_size_;
  bool forward_only_;
  ParameterLayout layout_;
  std::unique_ptr<Network> network_;
};

// The zoo (models/resnet.cpp, inception3.cpp, vgg16.cpp, cifar10_cnn.cpp).
std::unique_ptr<CnnModel> create_resnet50_model(const ModelSettings& config);
std::unique_ptr<CnnModel> create_resnet101_model(const ModelSettings& config);
std::unique_ptr<CnnModel> create_resnet152_model(const ModelSettings& config);
std::unique_ptr<CnnModel> create_inception3_model(const ModelSettings& config);
std::unique_ptr<CnnModel> create_vgg16_model(const ModelSettings& config);
std::unique_ptr<CnnModel> create_cifar10_cnn_model(const ModelSettings& config);

// The inputs of a CnnModel (what the factories above make): its synthetic images, and CIFAR-10
// for the models that can be built at 32x32.
enum class CnnDataSets { synthetic_only, cifar10 };
ModelInputs cnn_inputs(CnnDataSets data_sets);

}  // namespace dpbench
