// Console lines: the progress line's rates are per-step (items per step / step time) as in
// tf_cnn_benchmarks, and the summary shows what the result holds.
#include <catch2/catch.hpp>

#include <vector>

#include "cli/console.h"

using namespace dpbench;

TEST_CASE("a progress line shows step, mean per-step rate, its standard error, jitter and loss", "[console]") {
  // 100 items per step at 10, 20 and 40 ms: rates 10000, 5000, 2500 items/s.
  const std::vector<double> step_ms = {10.0, 20.0, 40.0};
  const std::string line = format_progress_line(ProgressSnapshot{3, step_ms, 1.25}, 100, "images");
  // mean 5833.3; sample stddev 3818.813 / sqrt(3) = 2204.8; median 5000, |dev| {5000, 0, 2500} -> MAD 2500.
  CHECK(line == "     3  images/s: 5833.3 +/- 2204.8 (jitter = 3706.5)  loss 1.2500");
}

TEST_CASE("a progress line from a single step has no spread", "[console]") {
  const std::vector<double> step_ms = {50.0};
  CHECK(format_progress_line(ProgressSnapshot{1, step_ms, 0.5}, 10, "words") ==
        "     1  words/s: 200.0  loss 0.5000");
}

TEST_CASE("the summary reports totals, distribution, execution mode and final state", "[console]") {
  Result result;
  result.summary.unit = "images/s";
  result.summary.items_per_sec = 1234.5;
  result.summary.measured_steps = 10;
  result.summary.total_time_s = 0.5;
  result.summary.num_devices = 2;
  result.summary.items_per_step = 64;
  result.summary.warmup_steps = 3;
  result.summary.step_time_ms = DistributionStats{10, 50, 49, 1, 48, 53, 48.5, 52};
  result.summary.jitter = 7.0;
  result.summary.cuda_graph = true;
  result.summary.final_loss = 0.25;
  result.summary.param_norm = 3.5;
  result.summary.num_parameters = 42;
  const std::string text = format_summary(result);
  CHECK_THAT(text, Catch::Contains("total images/s: 1234.5\n"));
  CHECK_THAT(text, Catch::Contains("\nMeasured:     10 steps in 0.500 s (2 devices, 64 items per step); 3 warm-up steps skipped\n"));
  // The statistics in columns under their names.
  CHECK_THAT(text, Catch::Contains("\nStep time ms:       mean    median    stddev       min       max        p5       p95\n"
                                   "                  50.000    49.000     1.000    48.000    53.000    48.500    52.000\n"));
  CHECK_THAT(text, Catch::Contains("\nExecution:    each step replayed as one CUDA graph per device\n"));
  CHECK_THAT(text, Catch::Contains("\nFinal state:  loss 0.250000, param_norm 3.500000, 42 parameters\n"));
  CHECK_THAT(text, !Catch::Contains("Interrupted"));

  result.summary.measured_steps = 1;  // singular where there is one
  result.summary.num_devices = 1;
  result.summary.warmup_steps = 1;
  CHECK_THAT(format_summary(result),
             Catch::Contains("Measured:     1 step in 0.500 s (1 device, 64 items per step); 1 warm-up step skipped"));
}

TEST_CASE("the summary of an interrupted run says how many of the asked-for steps it covers", "[console]") {
  Result result;
  result.summary.unit = "images/s";
  result.summary.measured_steps = 7;
  result.summary.interrupted = true;
  result.config = {{"num_batches", 100}};
  CHECK_THAT(format_summary(result),
             Catch::Contains("\nInterrupted:  stopped early, after 7 of 100 measured steps; the figures cover those\n"));
}

namespace {

// The header's "Strategy:" line, without its label.
std::string strategy_line(const RunConfig& config) {
  const std::string header = format_run_header(config, "images", 42, {DeviceDescription{0, "host", 0, ""}});
  const std::string label = "Strategy:";
  const size_t start = header.find(label);
  if (start == std::string::npos) return "(no strategy line)";
  const size_t end = header.find('\n', start);
  std::string line = header.substr(start + label.size(), end - start - label.size());
  return line.substr(line.find_first_not_of(' '));
}

}  // namespace

TEST_CASE("the header's strategy line says how the gradients travel", "[console]") {
  RunConfig config;
  config.gpu_indices = {0, 1};
  CHECK(strategy_line(config) == "independent");

  config.variable_update = "replicated";
  config.all_reduce_spec = "nccl";
  CHECK(strategy_line(config) == "replicated (all-reduce nccl, buckets of 25 MB, overlapped)");
  config.all_reduce_spec = "xring#2";
  config.bucket_cap_mb = 2.5;
  config.overlap_comm = false;
  CHECK(strategy_line(config) == "replicated (all-reduce xring#2, buckets of 2.5 MB, after backward)");
  config.all_reduce_spec = "psgpu";
  config.bucket_cap_mb = 0;
  config.overlap_comm = true;
  config.compact_gradient_transfer = TransferWidth::bf16;
  config.sparse_embedding_grads = true;
  CHECK(strategy_line(config) ==
        "replicated (all-reduce psgpu, per tensor, overlapped, bf16 transfer, sparse embedding gradients)");

  RunConfig server;
  server.gpu_indices = {0, 1};
  server.variable_update = "parameter_server";
  CHECK(strategy_line(server) == "parameter_server (on gpu, buckets of 25 MB, overlapped)");
  server.local_parameter_device = "cpu";
  server.gradient_repacking = 4;
  CHECK(strategy_line(server) == "parameter_server (on cpu, repacked into 4 pieces, overlapped)");
  server.gradient_repacking = 0;
  server.bucket_cap_mb = 0;
  server.agg_small_grads_max_bytes = 4096;
  server.agg_small_grads_max_group = 8;
  CHECK(strategy_line(server) ==
        "parameter_server (on cpu, per tensor, small ones batched (up to 4096 bytes, 8 per batch), overlapped)");
}

TEST_CASE("the summary's math line says which kernels ran the convolutions, LSTMs and attention", "[console]") {
  Result result;
  result.summary.unit = "images/s";
  result.summary.math = "bf16";
  CHECK_THAT(format_summary(result),
             Catch::Contains("Math:         bf16 activations and weight copy, fp32 accumulation and master weights\n"));
  result.summary.math_paths = {
      {"convolutions",
       {{"shapes", 13}, {"graph_api_forward", 2}, {"fused_bias_relu", 11}, {"fused_batch_norm_statistics", 4},
        {"graph_api_backward_data", 9},
        {"graph_api_backward_data_accumulating", 3}, {"graph_api_backward_filter", 7}}},
      {"pooling", {{"shapes", 2}, {"own_forward", 2}, {"own_backward", 1}, {"two_pass_backward", 1}}},
      {"lstm", {{"shapes", 2}, {"algorithms", {{"standard", 1}, {"persist_static_small_h", 1}}}}}};
  const std::string text = format_summary(result);
  CHECK_THAT(text, Catch::Contains("master weights; convolutions (13 shapes): fused bias + ReLU 11, batch norm's "
                                   "statistics fused 4, graph API forward 2, backward data 9 (accumulating 3), "
                                   "backward filter 7, the rest cuDNN's classic API; "
                                   "pooling (2 shapes) on dpbench's kernels: forward 2, backward 1 (two-pass 1), "
                                   "the rest cuDNN's; cuDNN LSTM (2 shapes): persist_static_small_h 1, standard 1\n"));
  result.summary.math_paths["convolutions"]["classic_algorithms"] = {
      {"forward", {{"implicit_precomp_gemm", 2}, {"winograd_nonfused", 6}}},
      {"backward_data", nlohmann::json::object()},
      {"backward_filter", {{"algo_1", 9}}}};
  CHECK_THAT(format_summary(result),
             Catch::Contains("backward filter 7, the rest cuDNN's classic API (forward: implicit_precomp_gemm 2, "
                             "winograd_nonfused 6; backward filter: algo_1 9); pooling"));
  result.summary.math_paths = {{"lstm", {{"shapes", 1}, {"algorithms", {{"standard", 1}}}}}};
  CHECK_THAT(format_summary(result), Catch::Contains("; cuDNN LSTM (1 shape): standard 1\n"));
  result.summary.math_paths = {{"attention", {{"shapes", 2}, {"cudnn_fused", 1}}}};
  CHECK_THAT(format_summary(result),
             Catch::Contains("; attention (2 shapes): cuDNN's fused 1, the rest dpbench's kernels\n"));
}

TEST_CASE("the summary's FLOPs line gives MFU and says when it passes the peak", "[console]") {
  Result result;
  result.summary.unit = "images/s";
  result.summary.flops = {{"tflops_per_sec_per_device", 81.6},
                          {"model_flops_per_step_per_device", 5.93e12},
                          {"mfu", 1.218},
                          {"peak_tflops_per_device", 67.0}};
  const std::string above = format_summary(result);
  CHECK_THAT(above, Catch::Contains("81.6 TFLOP/s per device (5.93e+12 FLOPs per device step), MFU 121.8% of 67 "
                                    "(above the peak: the count is the direct method's;"));
  result.summary.flops["mfu"] = 0.385;
  result.summary.flops["tflops_per_sec_per_device"] = 25.8;
  const std::string below = format_summary(result);
  CHECK_THAT(below, Catch::Contains("MFU 38.5% of 67\n"));
  CHECK_THAT(below, !Catch::Contains("above the peak"));
}
