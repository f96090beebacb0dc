// ResNet-50/101/152 v1.5 as torchvision defines them: the stride of a downsampling bottleneck
// sits in its 3x3 convolution; convolutions have no bias and are each followed by batch norm
// (eps 1e-5); 224x224x3 in, 1000 classes out. A ReLU straight after a batch norm is fused into it
// (one node, named after the batch norm); torchvision's relu modules have no parameters, so the
// parameter names and counts are unchanged.
#include <string>
#include <vector>

#include "models/cnn_model.h"

namespace dpbench {
namespace {

constexpr float kBatchNormEpsilon = 1e-5f;
constexpr int kExpansion = 4;  // a bottleneck's output has 4x its inner width

Conv2dOptions conv_options(int out_channels, int kernel, int stride, int pad) {
  Conv2dOptions o;
  o.out_channels = out_channels;
  o.kernel_h = o.kernel_w = kernel;
  o.stride = stride;
  o.padding = Padding::explicit_symmetric;
  o.pad_h = o.pad_w = pad;
  return o;
}

// conv -> batch norm, with the ReLU after it fused in where `relu`.
TensorId conv_bn(Network& net, TensorId x, const std::string& conv_name,
                 const std::string& bn_name, int out_channels, int kernel, int stride, int pad,
                 bool relu) {
  const TensorId y = net.conv(x, conv_name, conv_options(out_channels, kernel, stride, pad));
  return net.batch_norm(y, bn_name, kBatchNormEpsilon, relu);
}

// 1x1 (width) -> 3x3 (width, stride) -> 1x1 (4 * width), plus the shortcut, then ReLU.
TensorId bottleneck(Network& net, TensorId x, const std::string& name, int width, int stride) {
  net.set_group(name);  // one span per block in a trace
  const int out_channels = width * kExpansion;
  // The first block of a stage changes shape, so its shortcut is a strided 1x1 conv + BN.
  const bool downsample = stride != 1 || net.shape(x).c != out_channels;
  TensorId shortcut = x;
  if (downsample)
    shortcut = conv_bn(net, x, name + ".downsample.0", name + ".downsample.1", out_channels, 1,
                       stride, 0, /*relu=*/false);
  TensorId y = conv_bn(net, x, name + ".conv1", name + ".bn1", width, 1, 1, 0, /*relu=*/true);
  y = conv_bn(net, y, name + ".conv2", name + ".bn2", width, 3, stride, 1, /*relu=*/true);
  // The block's last ReLU comes after the shortcut is added, so it is fused into the add.
  y = conv_bn(net, y, name + ".conv3", name + ".bn3", out_channels, 1, 1, 0, /*relu=*/false);
  return net.add(y, shortcut, name + ".add", /*relu=*/true);
}

TensorId build_resnet(Network& net, TensorId images, const std::vector<int>& blocks_per_stage, int classes) {
  // (n, 3, 224, 224) -> (n, 64, 112, 112) -> (n, 64, 56, 56)
  TensorId x = conv_bn(net, images, "conv1", "bn1", 64, 7, 2, 3, /*relu=*/true);
  x = net.pool(x, "maxpool", PoolOptions{PoolMode::max, 3, 2, Padding::explicit_symmetric, 1});
  // Stages: (n, 256, 56, 56), (n, 512, 28, 28), (n, 1024, 14, 14), (n, 2048, 7, 7)
  const int widths[] = {64, 128, 256, 512};
  for (size_t stage = 0; stage < blocks_per_stage.size(); ++stage) {
    for (int block = 0; block < blocks_per_stage[stage]; ++block) {
      const int stride = (stage > 0 && block == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      x = bottleneck(net, x, name, widths[stage], stride);
    }
  }
  net.set_group("");
  x = net.global_average_pool(x, "avgpool");  // (n, 2048, 1, 1)
  return net.fully_connected(x, "fc", classes);
}

std::unique_ptr<CnnModel> create_resnet(const std::string& name, const ModelSettings& config,
                                        std::vector<int> blocks_per_stage) {
  const ImageSpec images = image_spec_for_data(config, ImageSpec{3, 224, 224, 1000});
  return std::make_unique<CnnModel>(name, config, images,
                                    [blocks_per_stage, classes = images.classes](Network& net, TensorId input) {
                                      return build_resnet(net, input, blocks_per_stage, classes);
                                    });
}

}  // namespace

std::unique_ptr<CnnModel> create_resnet50_model(const ModelSettings& config) {
  return create_resnet("resnet50", config, {3, 4, 6, 3});
}
std::unique_ptr<CnnModel> create_resnet101_model(const ModelSettings& config) {
  return create_resnet("resnet101", config, {3, 4, 23, 3});
}
std::unique_ptr<CnnModel> create_resnet152_model(const ModelSettings& config) {
  return create_resnet("resnet152", config, {3, 8, 36, 3});
}

}  // namespace dpbench
