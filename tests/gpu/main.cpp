// Catch2 entry point for the [gpu] tests: exits 77 (CTest's "skipped") when no CUDA GPU is present,
// so a machine without a GPU reports these tests as skipped rather than passed; with one GPU the
// test cases tagged [multi_gpu] are left out, and a SKIP line says so (rather than their passing
// with nothing exchanged).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/backends.h"

namespace {

std::string without_multi_gpu(const std::string& spec) {
  const std::string exclusion = "~[multi_gpu]";
  std::string result;
  size_t start = 0;
  while (true) {
    // An escaped comma (backslash, comma: as in a test name with a comma) belongs to its alternative.
    size_t comma = spec.find(',', start);
    while (comma != std::string::npos && comma > 0 && spec[comma - 1] == '\\') comma = spec.find(',', comma + 1);
    const std::string alternative = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!result.empty()) result += ',';
    result += alternative.find(exclusion) == std::string::npos ? exclusion + alternative : alternative;
    if (comma == std::string::npos) return result;
    start = comma + 1;
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  std::string why;
  const int gpus = dpbench::cuda_device_count(&why);
  if (gpus == 0) {
    std::printf("dpbench_gpu_tests: no CUDA GPU present (%s); skipping [gpu] tests\n", why.c_str());
    return 77;
  }
  Catch::Session session;
  if (const int code = session.applyCommandLine(argc, argv); code != 0) return code;
  if (gpus < 2) {
    // Adjacent parts of a test spec are ANDed and commas OR them, so each alternative gets the
    // exclusion in front: "[gpu]" becomes "~[multi_gpu][gpu]", "*nmt*,*lstm*" becomes
    // "~[multi_gpu]*nmt*,~[multi_gpu]*lstm*". (After a name pattern, "~[...]" would be read
    // as part of the name.)
    std::vector<std::string>& specs = session.configData().testsOrTags;
    if (specs.empty()) specs.push_back("~[multi_gpu]");
    for (std::string& spec : specs) spec = without_multi_gpu(spec);
    std::printf("dpbench_gpu_tests: SKIP the test cases tagged [multi_gpu]: they need 2 GPUs, %d present\n", gpus);
  }
  return session.run();
}
