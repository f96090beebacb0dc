// CIFAR-10 binary reader: validation of every file and record, and batches written in either
// image layout.
#include "engine/data/cifar10.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/data/text_file.h"
#include "engine/errors.h"

namespace dpbench {

namespace fs = std::filesystem;

std::vector<std::string> cifar10_file_names(Cifar10Split split) {
  if (split == Cifar10Split::test) return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
          "data_batch_5.bin"};
}

Cifar10Dataset Cifar10Dataset::load(const std::string& directory, Cifar10Split split) {
  const std::vector<std::string> names = cifar10_file_names(split);
  fs::path folder(directory);
  // The tarball unpacks into cifar-10-batches-bin/: accept its parent folder too.
  const fs::path unpacked = folder / "cifar-10-batches-bin";
  std::error_code ignored;  // a path that cannot be examined is reported by append_file
  if (!fs::exists(folder / names.front(), ignored) && fs::exists(unpacked / names.front(), ignored))
    folder = unpacked;

  Cifar10Dataset data;
  for (const std::string& name : names) data.append_file((folder / name).string());
  return data;
}

namespace {

const char* const kCifar10Hint =
    "expects the CIFAR-10 binary version (data_batch_1.bin .. data_batch_5.bin, test_batch.bin from "
    "cifar-10-binary.tar.gz) in the folder given by --data_dir";

// Closes the descriptor on every way out of append_file.
struct ClosedOnExit {
  int fd;
  ~ClosedOnExit() { ::close(fd); }
};

}  // namespace

void Cifar10Dataset::append_file(const std::string& path) {
  const ClosedOnExit file{open_data_file(path, kCifar10Hint, "CIFAR-10: ")};
  struct stat status {};
  if (::fstat(file.fd, &status) != 0)
    throw RuntimeError("CIFAR-10: cannot examine " + path + ": " + std::strerror(errno));
  // The size is checked before anything is read: a wrong file may be large.
  const auto bytes = static_cast<uint64_t>(status.st_size);
  if (bytes == 0)
    throw ConfigError("CIFAR-10: " + path + " is empty (0 bytes): expects 3073-byte records (1 label + 3072 "
                      "pixels); download the CIFAR-10 binary version again");
  if (bytes % kCifar10RecordBytes != 0)
    throw ConfigError("CIFAR-10: " + path + " has " + std::to_string(bytes) +
                      " bytes, not a whole number of 3073-byte records (1 label + 3072 pixels): "
                      "the file is truncated or not the CIFAR-10 binary version; download it again");
  const size_t records = static_cast<size_t>(bytes / kCifar10RecordBytes);

  std::vector<uint8_t> raw(static_cast<size_t>(bytes));
  for (size_t done = 0; done < raw.size();) {
    const ssize_t got = ::read(file.fd, raw.data() + done, raw.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw RuntimeError("CIFAR-10: error while reading " + path + ": " + std::strerror(errno));
    if (got == 0) throw RuntimeError("CIFAR-10: " + path + " became shorter while it was read");
    done += static_cast<size_t>(got);
  }

  const size_t first = labels_.size();
  labels_.resize(first + records);
  pixels_.resize((first + records) * kCifar10PixelsPerImage);
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* record = raw.data() + r * kCifar10RecordBytes;
    if (record[0] >= kCifar10Classes)
      throw ConfigError("CIFAR-10: " + path + " record " + std::to_string(r) + " (byte offset " +
                        std::to_string(r * kCifar10RecordBytes) + ") has label " +
                        std::to_string(record[0]) +
                        ", not 0..9: the file is corrupt; download the CIFAR-10 binary version again");
    labels_[first + r] = record[0];
    std::copy(record + 1, record + kCifar10RecordBytes,
              pixels_.begin() + static_cast<std::ptrdiff_t>((first + r) * kCifar10PixelsPerImage));
  }
}

void Cifar10Dataset::check_index(int64_t index) const {
  if (index < 0 || index >= size())
    throw RuntimeError("CIFAR-10: image " + std::to_string(index) + " asked of a split of " +
                       std::to_string(size()) + " images");
}

int Cifar10Dataset::label(int64_t index) const {
  check_index(index);
  return labels_[static_cast<size_t>(index)];
}

void Cifar10Dataset::write_images(const std::vector<int64_t>& indices, DataFormat format, float* out) const {
  constexpr int plane = kCifar10Side * kCifar10Side;
  // (x / 255 - mean) / std as one multiply-add per pixel: x * scale[c] + shift[c].
  float scale[kCifar10Channels], shift[kCifar10Channels];
  for (int c = 0; c < kCifar10Channels; ++c) {
    scale[c] = 1.0f / (255.0f * kCifar10ChannelStd[c]);
    shift[c] = -kCifar10ChannelMean[c] / kCifar10ChannelStd[c];
  }
  for (size_t b = 0; b < indices.size(); ++b) {
    check_index(indices[b]);
    const uint8_t* image = pixels_.data() + static_cast<size_t>(indices[b]) * kCifar10PixelsPerImage;
    float* dst = out + b * kCifar10PixelsPerImage;
    for (int c = 0; c < kCifar10Channels; ++c) {
      for (int p = 0; p < plane; ++p) {
        const float value = static_cast<float>(image[c * plane + p]) * scale[c] + shift[c];
        // NCHW keeps the file's planes; NHWC interleaves the channels of each pixel.
        if (format == DataFormat::nchw) dst[c * plane + p] = value;
        else dst[p * kCifar10Channels + c] = value;
      }
    }
  }
}

void Cifar10Dataset::write_labels(const std::vector<int64_t>& indices, int32_t* out) const {
  for (size_t b = 0; b < indices.size(); ++b) out[b] = label(indices[b]);
}

}  // namespace dpbench
