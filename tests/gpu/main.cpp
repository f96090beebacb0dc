// Catch2 entry point for the [gpu] tests: exits 77 (CTest's "skipped") when no CUDA GPU is present,
// so a machine without a GPU reports these tests as skipped rather than passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "engine/device_factory.h"

int main(int argc, char* argv[]) {
  std::string why;
  if (dpbench::cuda_device_count(&why) == 0) {
    std::printf("dpbench_gpu_tests: no CUDA GPU present (%s); skipping [gpu] tests\n", why.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
