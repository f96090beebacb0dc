// The CIFAR-10 data set in its binary distribution (cifar-10-binary.tar.gz): data_batch_1.bin ..
// data_batch_5.bin hold the 50000 training images, test_batch.bin the 10000 test images. Each
// record is 1 label byte (0..9) followed by 3072 pixel bytes: three 32x32 planes, R then G then
// B, each row-major. The whole split is read into host memory once (150 MB for training) and
// batches are written from there as normalised float images for the CNN models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cnn_geometry.h"

namespace dpbench {

enum class Cifar10Split { train, test };

constexpr int kCifar10Classes = 10;
constexpr int kCifar10Channels = 3;
constexpr int kCifar10Side = 32;  // height and width
constexpr int kCifar10PixelsPerImage = kCifar10Channels * kCifar10Side * kCifar10Side;  // 3072
constexpr int kCifar10RecordBytes = 1 + kCifar10PixelsPerImage;                          // 3073

// Per-channel (R, G, B) mean and standard deviation of the 50000 training images, pixels scaled
// to [0, 1]: the values the usual CIFAR-10 training recipes normalise with.
constexpr float kCifar10ChannelMean[kCifar10Channels] = {0.4914f, 0.4822f, 0.4465f};
constexpr float kCifar10ChannelStd[kCifar10Channels] = {0.2470f, 0.2435f, 0.2616f};

// The file names of a split, in reading order (image i of the split is record i of their
// concatenation).
std::vector<std::string> cifar10_file_names(Cifar10Split split);

class Cifar10Dataset {
 public:
  // Reads the split's files from `directory`, or from `directory`/cifar-10-batches-bin (the
  // folder the tarball unpacks to) when the files are there instead. Throws ConfigError for a
  // missing file, a size that is not a whole number of records, or a label byte above 9.
  static Cifar10Dataset load(const std::string& directory, Cifar10Split split);

  int64_t size() const { return static_cast<int64_t>(labels_.size()); }
  int label(int64_t index) const;

  // Images `indices` as floats, (x / 255 - kCifar10ChannelMean[c]) / kCifar10ChannelStd[c]:
  // NCHW writes (B, 3, 32, 32), NHWC writes (B, 32, 32, 3); `out` holds B * 3072 floats.
  void write_images(const std::vector<int64_t>& indices, DataFormat format, float* out) const;
  // Labels `indices` as int32 class numbers 0..9; `out` holds B values.
  void write_labels(const std::vector<int64_t>& indices, int32_t* out) const;

 private:
  void append_file(const std::string& path);
  void check_index(int64_t index) const;

  std::vector<uint8_t> labels_;  // (N)
  std::vector<uint8_t> pixels_;  // (N, 3, 32, 32) as stored in the files
};

}  // namespace dpbench
