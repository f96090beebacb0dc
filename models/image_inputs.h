// The image models' inputs: the images a model is built for, and its host batches (engine/data/
// batch_source.h): synthetic images identical to those the model makes on the device, or
// CIFAR-10's training images for the models built at 32x32.
#pragma once

#include <memory>

#include "engine/backend/cnn_geometry.h"
#include "engine/data/batch_source.h"
#include "engine/data_type.h"
#include "models/model_settings.h"

namespace dpbench {

struct ImageSpec {
  int channels = 3, height = 224, width = 224;
  int classes = 1000;
};

// How a model stores a batch of images in its input buffer, and the labels' range.
struct ImageInputLayout {
  ImageSpec spec;
  DataFormat format = DataFormat::nchw;
  DataType type = DataType::f32;
};

// Synthetic images and labels: logical NCHW element i of the global batch = fma(2, u(i), -1), as
// the models draw them on the device (fill_uniform_by_index, fill_labels_by_index).
std::unique_ptr<BatchSource> synthetic_image_batches(const ModelSettings& config, const ImageInputLayout& layout);

// CIFAR-10's training images from --data_dir. ConfigError where the model is built for another
// image size or class count, or the files are missing or corrupt.
std::unique_ptr<BatchSource> cifar10_image_batches(const ModelSettings& config, const ImageInputLayout& layout);

}  // namespace dpbench
