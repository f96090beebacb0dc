// The Keras CIFAR-10 example CNN on 32x32x3 images: two conv-conv-pool-dropout blocks (32 then 64
// channels; the first conv of each "same", the second "valid"), dense 512 with ReLU and dropout,
// dense 10. All convolutions and dense layers have biases. Each conv-conv-pool-dropout block is
// one span in a trace and one parameter unit, as is the classifier.
#include <string>

#include "models/cnn_model.h"

namespace dpbench {
namespace {

TensorId conv_relu(Network& net, TensorId x, const std::string& name, int out_channels,
                   Padding padding) {
  Conv2dOptions o;
  o.out_channels = out_channels;
  o.kernel_h = o.kernel_w = 3;
  o.padding = padding;
  o.bias = true;
  o.relu = true;
  return net.conv(x, name, o);
}

TensorId build_cifar10_cnn(Network& net, TensorId images) {
  const PoolOptions pool_2x2{PoolMode::max, 2, 2, Padding::valid, 0};
  net.set_group("block1");
  TensorId x = conv_relu(net, images, "conv1", 32, Padding::same);  // (n, 32, 32, 32)
  x = conv_relu(net, x, "conv2", 32, Padding::valid);               // (n, 32, 30, 30)
  x = net.pool(x, "pool1", pool_2x2);                               // (n, 32, 15, 15)
  x = net.dropout(x, "dropout1", 0.25f);
  net.set_group("block2");
  x = conv_relu(net, x, "conv3", 64, Padding::same);                // (n, 64, 15, 15)
  x = conv_relu(net, x, "conv4", 64, Padding::valid);               // (n, 64, 13, 13)
  x = net.pool(x, "pool2", pool_2x2);                               // (n, 64, 6, 6)
  x = net.dropout(x, "dropout2", 0.25f);
  net.set_group("");
  x = net.fully_connected(x, "dense1", 512);                        // flattens 2304 features
  x = net.relu(x, "dense1.relu");
  x = net.dropout(x, "dropout3", 0.5f);
  return net.fully_connected(x, "dense2", 10);
}

}  // namespace

std::unique_ptr<CnnModel> create_cifar10_cnn_model(const ModelSettings& config) {
  return std::make_unique<CnnModel>("cifar10_cnn", config, ImageSpec{3, 32, 32, 10},
                                    build_cifar10_cnn);
}

}  // namespace dpbench
