// Inception-v3 as torchvision's inception_v3(aux_logits=False) at 299x299: every convolution is a
// BasicConv2d (conv without bias, batch norm eps 0.001, ReLU); the Mixed_* modules are
// InceptionA..E with their factorised 1x7/7x1 and 1x3/3x1 convolutions. Branch average pools
// count the padding (PyTorch's default count_include_pad=True).
#include <string>
#include <vector>

#include "models/cnn_model.h"

namespace dpbench {
namespace {

constexpr float kBatchNormEpsilon = 1e-3f;

// conv (kernel_h x kernel_w, stride, symmetric pads) -> BN -> ReLU, named like torchvision's module;
// the ReLU is fused into the batch-norm node "<name>.bn" (it has no parameters to name).
TensorId basic_conv(Network& net, TensorId x, const std::string& name, int out_channels,
                    int kernel_h, int kernel_w, int stride = 1, int pad_h = 0, int pad_w = 0) {
  Conv2dOptions o;
  o.out_channels = out_channels;
  o.kernel_h = kernel_h;
  o.kernel_w = kernel_w;
  o.stride = stride;
  o.padding = Padding::explicit_symmetric;
  o.pad_h = pad_h;
  o.pad_w = pad_w;
  const TensorId y = net.conv(x, name + ".conv", o);
  return net.batch_norm(y, name + ".bn", kBatchNormEpsilon, /*relu=*/true);
}

TensorId average_pool_3x3_same(Network& net, TensorId x, const std::string& name) {
  return net.pool(x, name, PoolOptions{PoolMode::average_include_padding, 3, 1,
                                       Padding::explicit_symmetric, 1});
}

TensorId max_pool_3x3_stride_2(Network& net, TensorId x, const std::string& name) {
  return net.pool(x, name, PoolOptions{PoolMode::max, 3, 2, Padding::valid, 0});
}

// 35x35: 64 + 64 + 96 + pool_features channels.
TensorId inception_a(Network& net, TensorId x, const std::string& name, int pool_features) {
  net.set_group(name);  // a module is one span in a trace
  const TensorId b1 = basic_conv(net, x, name + ".branch1x1", 64, 1, 1);
  TensorId b5 = basic_conv(net, x, name + ".branch5x5_1", 48, 1, 1);
  b5 = basic_conv(net, b5, name + ".branch5x5_2", 64, 5, 5, 1, 2, 2);
  TensorId b3 = basic_conv(net, x, name + ".branch3x3dbl_1", 64, 1, 1);
  b3 = basic_conv(net, b3, name + ".branch3x3dbl_2", 96, 3, 3, 1, 1, 1);
  b3 = basic_conv(net, b3, name + ".branch3x3dbl_3", 96, 3, 3, 1, 1, 1);
  TensorId pool = average_pool_3x3_same(net, x, name + ".avg_pool");
  pool = basic_conv(net, pool, name + ".branch_pool", pool_features, 1, 1);
  return net.concat({b1, b5, b3, pool}, name);
}

// 35x35 -> 17x17: 384 + 96 + input channels.
TensorId inception_b(Network& net, TensorId x, const std::string& name) {
  net.set_group(name);  // a module is one span in a trace
  const TensorId b3 = basic_conv(net, x, name + ".branch3x3", 384, 3, 3, 2);
  TensorId dbl = basic_conv(net, x, name + ".branch3x3dbl_1", 64, 1, 1);
  dbl = basic_conv(net, dbl, name + ".branch3x3dbl_2", 96, 3, 3, 1, 1, 1);
  dbl = basic_conv(net, dbl, name + ".branch3x3dbl_3", 96, 3, 3, 2);
  const TensorId pool = max_pool_3x3_stride_2(net, x, name + ".max_pool");
  return net.concat({b3, dbl, pool}, name);
}

// 17x17: 4 x 192 channels; 7x7 convolutions factorised into 1x7 and 7x1.
TensorId inception_c(Network& net, TensorId x, const std::string& name, int channels_7x7) {
  net.set_group(name);  // a module is one span in a trace
  const int c7 = channels_7x7;
  const TensorId b1 = basic_conv(net, x, name + ".branch1x1", 192, 1, 1);
  TensorId b7 = basic_conv(net, x, name + ".branch7x7_1", c7, 1, 1);
  b7 = basic_conv(net, b7, name + ".branch7x7_2", c7, 1, 7, 1, 0, 3);
  b7 = basic_conv(net, b7, name + ".branch7x7_3", 192, 7, 1, 1, 3, 0);
  TensorId dbl = basic_conv(net, x, name + ".branch7x7dbl_1", c7, 1, 1);
  dbl = basic_conv(net, dbl, name + ".branch7x7dbl_2", c7, 7, 1, 1, 3, 0);
  dbl = basic_conv(net, dbl, name + ".branch7x7dbl_3", c7, 1, 7, 1, 0, 3);
  dbl = basic_conv(net, dbl, name + ".branch7x7dbl_4", c7, 7, 1, 1, 3, 0);
  dbl = basic_conv(net, dbl, name + ".branch7x7dbl_5", 192, 1, 7, 1, 0, 3);
  TensorId pool = average_pool_3x3_same(net, x, name + ".avg_pool");
  pool = basic_conv(net, pool, name + ".branch_pool", 192, 1, 1);
  return net.concat({b1, b7, dbl, pool}, name);
}

// 17x17 -> 8x8: 320 + 192 + input channels.
TensorId inception_d(Network& net, TensorId x, const std::string& name) {
  net.set_group(name);  // a module is one span in a trace
  TensorId b3 = basic_conv(net, x, name + ".branch3x3_1", 192, 1, 1);
  b3 = basic_conv(net, b3, name + ".branch3x3_2", 320, 3, 3, 2);
  TensorId b7 = basic_conv(net, x, name + ".branch7x7x3_1", 192, 1, 1);
  b7 = basic_conv(net, b7, name + ".branch7x7x3_2", 192, 1, 7, 1, 0, 3);
  b7 = basic_conv(net, b7, name + ".branch7x7x3_3", 192, 7, 1, 1, 3, 0);
  b7 = basic_conv(net, b7, name + ".branch7x7x3_4", 192, 3, 3, 2);
  const TensorId pool = max_pool_3x3_stride_2(net, x, name + ".max_pool");
  return net.concat({b3, b7, pool}, name);
}

// 8x8: 320 + 2 x 384 + 2 x 384 + 192 = 2048 channels. The 3x3 branches split into parallel 1x3
// and 3x1 convolutions of one tensor; concatenating all six pieces at once equals torchvision's
// nested concatenation.
TensorId inception_e(Network& net, TensorId x, const std::string& name) {
  net.set_group(name);  // a module is one span in a trace
  const TensorId b1 = basic_conv(net, x, name + ".branch1x1", 320, 1, 1);
  const TensorId b3 = basic_conv(net, x, name + ".branch3x3_1", 384, 1, 1);
  const TensorId b3a = basic_conv(net, b3, name + ".branch3x3_2a", 384, 1, 3, 1, 0, 1);
  const TensorId b3b = basic_conv(net, b3, name + ".branch3x3_2b", 384, 3, 1, 1, 1, 0);
  TensorId dbl = basic_conv(net, x, name + ".branch3x3dbl_1", 448, 1, 1);
  dbl = basic_conv(net, dbl, name + ".branch3x3dbl_2", 384, 3, 3, 1, 1, 1);
  const TensorId dbl_a = basic_conv(net, dbl, name + ".branch3x3dbl_3a", 384, 1, 3, 1, 0, 1);
  const TensorId dbl_b = basic_conv(net, dbl, name + ".branch3x3dbl_3b", 384, 3, 1, 1, 1, 0);
  TensorId pool = average_pool_3x3_same(net, x, name + ".avg_pool");
  pool = basic_conv(net, pool, name + ".branch_pool", 192, 1, 1);
  return net.concat({b1, b3a, b3b, dbl_a, dbl_b, pool}, name);
}

TensorId build_inception3(Network& net, TensorId images) {
  TensorId x = basic_conv(net, images, "Conv2d_1a_3x3", 32, 3, 3, 2);  // (n, 32, 149, 149)
  x = basic_conv(net, x, "Conv2d_2a_3x3", 32, 3, 3);                   // (n, 32, 147, 147)
  x = basic_conv(net, x, "Conv2d_2b_3x3", 64, 3, 3, 1, 1, 1);          // (n, 64, 147, 147)
  x = max_pool_3x3_stride_2(net, x, "maxpool1");                        // (n, 64, 73, 73)
  x = basic_conv(net, x, "Conv2d_3b_1x1", 80, 1, 1);                   // (n, 80, 73, 73)
  x = basic_conv(net, x, "Conv2d_4a_3x3", 192, 3, 3);                  // (n, 192, 71, 71)
  x = max_pool_3x3_stride_2(net, x, "maxpool2");                        // (n, 192, 35, 35)
  x = inception_a(net, x, "Mixed_5b", 32);                              // (n, 256, 35, 35)
  x = inception_a(net, x, "Mixed_5c", 64);                              // (n, 288, 35, 35)
  x = inception_a(net, x, "Mixed_5d", 64);                              // (n, 288, 35, 35)
  x = inception_b(net, x, "Mixed_6a");                                  // (n, 768, 17, 17)
  x = inception_c(net, x, "Mixed_6b", 128);
  x = inception_c(net, x, "Mixed_6c", 160);
  x = inception_c(net, x, "Mixed_6d", 160);
  x = inception_c(net, x, "Mixed_6e", 192);                             // (n, 768, 17, 17)
  x = inception_d(net, x, "Mixed_7a");                                  // (n, 1280, 8, 8)
  x = inception_e(net, x, "Mixed_7b");                                  // (n, 2048, 8, 8)
  x = inception_e(net, x, "Mixed_7c");                                  // (n, 2048, 8, 8)
  net.set_group("");
  x = net.global_average_pool(x, "avgpool");                            // (n, 2048, 1, 1)
  x = net.dropout(x, "dropout", 0.5f);
  return net.fully_connected(x, "fc", 1000);
}

}  // namespace

std::unique_ptr<CnnModel> create_inception3_model(const ModelSettings& config) {
  return std::make_unique<CnnModel>("inception3", config, ImageSpec{3, 299, 299, 1000},
                                    build_inception3);
}

}  // namespace dpbench
