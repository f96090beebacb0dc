// `dpbench comm_bench --beside_compute` on two GPUs: a GEMM timed alone and beside a collective,
// and the collective beside the GEMM, give finite, plausible figures for every size.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cli/comm_bench_command.h"
#include "engine/backends.h"

using namespace dpbench;

TEST_CASE("comm_bench --beside_compute times all_gather and a GEMM beside each other on 2 GPUs",
          "[gpu][comm_bench][multi_gpu]") {
  const int gpus = cuda_device_count();
  REQUIRE(gpus >= 2);  // [multi_gpu]: main() leaves it out where fewer than 2 GPUs are
  const CommBenchOptions options =
      parse_comm_bench_flags({"--device=gpu", "--num_gpus=2", "--op=all_gather", "--data_type=bf16",
                              "--min_bytes=1M", "--max_bytes=16M", "--iters=5", "--warmup_iters=2",
                              "--beside_compute", "--compute_shape=4096x3072x768"},
                             DeviceInventory{gpus, ""});
  REQUIRE(options.beside_compute);
  const CommBenchResult result = run_comm_bench(options);
  REQUIRE(result.rows.size() == 5);  // 1, 2, 4, 8, 16 MiB
  for (const CommBenchRow& row : result.rows) {
    INFO(row.size_bytes << " B: gemm " << row.compute_alone_us << " us alone, " << row.compute_beside_us
                        << " us beside; collective " << row.time_us << " us alone, " << row.time_beside_compute_us
                        << " us beside");
    for (double figure : {row.compute_alone_us, row.compute_beside_us, row.compute_slowdown,
                          row.time_beside_compute_us, row.busbw_beside_compute_gbps})
      CHECK(std::isfinite(figure));
    CHECK(row.compute_alone_us > 0);
    CHECK(row.compute_beside_us > 0);
    CHECK(row.time_beside_compute_us > 0);
    CHECK(row.compute_slowdown > -0.5);
    CHECK(row.compute_slowdown < 5);
    CHECK(row.busbw_beside_compute_gbps > 0);
  }
}
