// VGG-16 as torchvision's vgg16 (no batch norm): 13 3x3 convolutions with bias in five blocks,
// each block closed by a 2x2/2 max pool, then the classifier 25088 -> 4096 -> 4096 -> 1000 with
// ReLU and dropout 0.5. At 224x224 torchvision's adaptive average pool to 7x7 is the identity.
// Each block of convolutions is one span in a trace and one parameter unit, as is the classifier.
#include <string>

#include "models/cnn_model.h"

namespace dpbench {
namespace {

TensorId build_vgg16(Network& net, TensorId images) {
  // Output channels per block; 224 -> 112 -> 56 -> 28 -> 14 -> 7 after the pools.
  const int block_channels[] = {64, 128, 256, 512, 512};
  const int convs_per_block[] = {2, 2, 3, 3, 3};
  TensorId x = images;
  int conv_number = 0;
  for (int block = 0; block < 5; ++block) {
    net.set_group("features.block" + std::to_string(block + 1));
    for (int i = 0; i < convs_per_block[block]; ++i) {
      const std::string name = "features.conv" + std::to_string(++conv_number);
      Conv2dOptions o;
      o.out_channels = block_channels[block];
      o.kernel_h = o.kernel_w = 3;
      o.padding = Padding::explicit_symmetric;
      o.pad_h = o.pad_w = 1;
      o.bias = true;
      o.relu = true;
      x = net.conv(x, name, o);
    }
    x = net.pool(x, "features.pool" + std::to_string(block + 1),
                 PoolOptions{PoolMode::max, 2, 2, Padding::valid, 0});
  }
  net.set_group("");
  // (n, 512, 7, 7), flattened by the first dense layer
  x = net.fully_connected(x, "classifier.fc1", 4096);
  x = net.relu(x, "classifier.relu1");
  x = net.dropout(x, "classifier.dropout1", 0.5f);
  x = net.fully_connected(x, "classifier.fc2", 4096);
  x = net.relu(x, "classifier.relu2");
  x = net.dropout(x, "classifier.dropout2", 0.5f);
  return net.fully_connected(x, "classifier.fc3", 1000);
}

}  // namespace

std::unique_ptr<CnnModel> create_vgg16_model(const ModelSettings& config) {
  return std::make_unique<CnnModel>("vgg16", config, ImageSpec{3, 224, 224, 1000}, build_vgg16);
}

}  // namespace dpbench
