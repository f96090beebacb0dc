// Host memory is counted against what the machine can give: a run that cannot fit stops at set-up
// with one line naming the fix, instead of being killed by the out-of-memory killer.
#include <catch2/catch.hpp>

#include "engine/errors.h"
#include "engine/machine/host_memory.h"
#include "test_support.h"

using Catch::Contains;

TEST_CASE("the machine's free memory is read", "[host_memory]") {
  CHECK(dpbench::available_host_memory_bytes() > (64ull << 20));
}

TEST_CASE("an allocation past the allowance is refused with the fix named", "[host_memory]") {
  const uint64_t before = dpbench::counted_host_bytes();
  CHECK_THROWS_AS(dpbench::check_host_allocation(size_t{1} << 60, "reference device 0"), dpbench::RuntimeError);
  CHECK_THROWS_WITH(dpbench::check_host_allocation(size_t{1} << 60, "reference device 0"),
                    Contains("out of host memory: ") && Contains(" more for reference device 0, on top of") &&
                        Contains("--batch_size"));
  dpbench::check_host_allocation(1 << 20, "reference device 0");  // small: fine
  int marker = 0;
  dpbench::count_host_allocation(&marker, 4096);
  CHECK(dpbench::counted_host_bytes() == before + 4096);
  dpbench::uncount_host_allocation(&marker);
  dpbench::uncount_host_allocation(&marker);  // twice: a no-op
  CHECK(dpbench::counted_host_bytes() == before);
}

TEST_CASE("a run far too large for the host stops at set-up with exit code 1 and no result", "[host_memory]") {
  dpbench::testing::TempDir dir;
  const std::string result = dir.file("result.json");
  CHECK(dpbench::testing::run_cli({"--device=cpu", "--model=resnet50", "--batch_size=100000", "--num_batches=1",
                                   "--num_warmup_batches=0", "--result_file=" + result}) == 1);
  CHECK_FALSE(std::filesystem::exists(result));
}

TEST_CASE("an allocation's remedy names what sizes it", "[host_memory]") {
  CHECK_THROWS_WITH(dpbench::check_host_allocation(size_t{1} << 60, "the model's initial parameters",
                                                   "lower its size flags"),
                    Contains("; lower its size flags, or free memory") && !Contains("--batch_size"));
}
