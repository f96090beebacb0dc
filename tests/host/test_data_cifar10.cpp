// CIFAR-10 binary reader: known pixels and labels decoded and normalised in both layouts, the
// unpacked-tarball folder, and every file error.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "data_test_support.h"
#include "engine/data/cifar10.h"

using namespace dpbench;
using dpbench::testing::config_error_of;
using dpbench::testing::DataTempDir;
using dpbench::testing::write_bytes;
using Catch::Matchers::Contains;

namespace {

// Pixel byte of image `image` (numbered over the whole split), channel c, position p = y * 32 + x.
uint8_t known_pixel(int image, int c, int p) { return static_cast<uint8_t>((image * 37 + c * 101 + p * 7) % 256); }
int known_label(int image) { return (image * 3 + 1) % 10; }

// Records for images first .. first + count - 1 with the known pixels and labels.
std::vector<uint8_t> cifar_records(int first, int count) {
  std::vector<uint8_t> bytes;
  for (int image = first; image < first + count; ++image) {
    bytes.push_back(static_cast<uint8_t>(known_label(image)));
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p) bytes.push_back(known_pixel(image, c, p));
  }
  return bytes;
}

// Training files of 2 images each (10 in all) and a test file of 3, in `folder`.
void write_cifar(const std::string& folder) {
  for (int f = 0; f < 5; ++f)
    write_bytes(folder + "/data_batch_" + std::to_string(f + 1) + ".bin", cifar_records(2 * f, 2));
  write_bytes(folder + "/test_batch.bin", cifar_records(100, 3));
}

float normalised(uint8_t pixel, int c) {
  return (static_cast<float>(pixel) / 255.0f - kCifar10ChannelMean[c]) / kCifar10ChannelStd[c];
}

}  // namespace

TEST_CASE("data: cifar10 reads both splits with their labels in file order", "[data]") {
  DataTempDir dir;
  write_cifar(dir.path());
  const Cifar10Dataset train = Cifar10Dataset::load(dir.path(), Cifar10Split::train);
  REQUIRE(train.size() == 10);
  for (int i = 0; i < 10; ++i) CHECK(train.label(i) == known_label(i));
  const Cifar10Dataset test = Cifar10Dataset::load(dir.path(), Cifar10Split::test);
  REQUIRE(test.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(test.label(i) == known_label(100 + i));

  std::vector<int32_t> labels(3, -1);
  train.write_labels({9, 0, 4}, labels.data());
  CHECK(labels == std::vector<int32_t>{known_label(9), known_label(0), known_label(4)});
  CHECK_THROWS_AS(train.label(10), RuntimeError);
}

TEST_CASE("data: cifar10 writes normalised images in NCHW and NHWC", "[data]") {
  DataTempDir dir;
  write_cifar(dir.path());
  const Cifar10Dataset train = Cifar10Dataset::load(dir.path(), Cifar10Split::train);
  const std::vector<int64_t> indices = {7, 0, 3};
  std::vector<float> nchw(indices.size() * 3072), nhwc(indices.size() * 3072);
  train.write_images(indices, DataFormat::nchw, nchw.data());
  train.write_images(indices, DataFormat::nhwc, nhwc.data());
  for (size_t b = 0; b < indices.size(); ++b)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) {
          const int p = y * 32 + x;
          const float expected = normalised(known_pixel(static_cast<int>(indices[b]), c, p), c);
          const size_t at_nchw = ((b * 3 + c) * 32 + y) * 32 + x;
          const size_t at_nhwc = ((b * 32 + y) * 32 + x) * 3 + c;
          REQUIRE(nchw[at_nchw] == Approx(expected).margin(1e-5));
          REQUIRE(nhwc[at_nhwc] == Approx(expected).margin(1e-5));
        }
  // The constants themselves: pixel 0 of red maps to -mean / std, 255 to (1 - mean) / std.
  CHECK(normalised(0, 0) == Approx(-0.4914f / 0.2470f));
  CHECK(normalised(255, 2) == Approx((1.0f - 0.4465f) / 0.2616f));
}

TEST_CASE("data: cifar10 finds the files in the unpacked cifar-10-batches-bin folder", "[data]") {
  DataTempDir dir;
  write_cifar(dir.file("cifar-10-batches-bin"));
  CHECK(Cifar10Dataset::load(dir.path(), Cifar10Split::train).size() == 10);
  CHECK(Cifar10Dataset::load(dir.path(), Cifar10Split::test).size() == 3);
}

TEST_CASE("data: cifar10 missing files name the file, the binary version and --data_dir", "[data]") {
  DataTempDir dir;
  const std::string empty_folder =
      config_error_of([&] { Cifar10Dataset::load(dir.path(), Cifar10Split::train); });
  CHECK_THAT(empty_folder, Contains("data_batch_1.bin") && Contains("CIFAR-10 binary version") &&
                               Contains("--data_dir"));

  write_cifar(dir.path());
  std::filesystem::remove(dir.file("data_batch_3.bin"));
  CHECK_THAT(config_error_of([&] { Cifar10Dataset::load(dir.path(), Cifar10Split::train); }),
             Contains("data_batch_3.bin") && Contains("--data_dir"));
  std::filesystem::remove(dir.file("test_batch.bin"));
  CHECK_THAT(config_error_of([&] { Cifar10Dataset::load(dir.path(), Cifar10Split::test); }),
             Contains("test_batch.bin"));
}

TEST_CASE("data: cifar10 rejects a file that is not a whole number of records", "[data]") {
  DataTempDir dir;
  write_cifar(dir.path());
  std::vector<uint8_t> truncated = cifar_records(4, 2);
  truncated.resize(truncated.size() - 5);  // 6141 bytes
  write_bytes(dir.file("data_batch_3.bin"), truncated);
  CHECK_THAT(config_error_of([&] { Cifar10Dataset::load(dir.path(), Cifar10Split::train); }),
             Contains("data_batch_3.bin") && Contains("6141 bytes") && Contains("3073"));

  write_bytes(dir.file("test_batch.bin"), {});
  CHECK_THAT(config_error_of([&] { Cifar10Dataset::load(dir.path(), Cifar10Split::test); }),
             Contains("test_batch.bin") && Contains("0 bytes"));
}

TEST_CASE("data: cifar10 rejects a label above 9 naming the file and record", "[data]") {
  DataTempDir dir;
  write_cifar(dir.path());
  std::vector<uint8_t> corrupt = cifar_records(2, 2);
  corrupt[kCifar10RecordBytes] = 10;  // record 1's label byte
  write_bytes(dir.file("data_batch_2.bin"), corrupt);
  CHECK_THAT(config_error_of([&] { Cifar10Dataset::load(dir.path(), Cifar10Split::train); }),
             Contains("data_batch_2.bin") && Contains("record 1") && Contains("label 10"));
}
