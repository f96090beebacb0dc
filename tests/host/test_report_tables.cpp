// `dpbench report` tables: golden markdown, CSV and JSON from fixture results written by the real
// result writer; speedup and efficiency arithmetic, series grouping, comparison tables, strong vs
// weak scaling, the median of repeated runs, a missing 1-GPU run, and runs that must not mix.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "reports/prediction_tables.h"
#include "reports/report_tables.h"
#include "tests/host/report_test_support.h"

using namespace dpbench;
using namespace dpbench::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const std::vector<std::string> kReplicated = {"--model=resnet50", "--variable_update=replicated"};
const std::vector<std::string> kIndependent = {"--model=resnet50", "--variable_update=independent"};
const std::vector<std::string> kServerCpu = {"--model=resnet50", "--variable_update=parameter_server",
                                             "--local_parameter_device=cpu"};

std::vector<std::string> with(std::vector<std::string> flags, const std::string& extra) {
  flags.push_back(extra);
  return flags;
}

// Speeds picked so the arithmetic is easy to check by hand: replicated scales 1.90x and 3.60x
// (95 % and 90 %), independent ideally, the parameter server lacks its 1-GPU run, and the strong
// scaling series (total batch 256) scales 2000/1100 = 1.818x and 3520/1100 = 3.2x.
void write_sweep(const TempDir& dir) {
  write_fixture(dir, "independent_1.json", run_of(kIndependent, 1, 1000));
  write_fixture(dir, "independent_2.json", run_of(kIndependent, 2, 2000));
  write_fixture(dir, "independent_4.json", run_of(kIndependent, 4, 4000));
  write_fixture(dir, "replicated_1.json", run_of(kReplicated, 1, 1000));
  write_fixture(dir, "replicated_2_a.json", run_of(kReplicated, 2, 1950));
  write_fixture(dir, "replicated_2_b.json", run_of(kReplicated, 2, 1850));
  write_fixture(dir, "replicated_2_c.json", run_of(kReplicated, 2, 1900));
  write_fixture(dir, "replicated_4.json", run_of(kReplicated, 4, 3600));
  write_fixture(dir, "ps_cpu_2.json", run_of(kServerCpu, 2, 1500));
  write_fixture(dir, "ps_cpu_4.json", run_of(kServerCpu, 4, 2500));
  const std::vector<std::string> strong = with(kReplicated, "--total_batch_size=256");
  write_fixture(dir, "strong/replicated_1.json", run_of(strong, 1, 1100));
  write_fixture(dir, "strong/replicated_2.json", run_of(strong, 2, 2000));
  write_fixture(dir, "strong/replicated_4.json", run_of(strong, 4, 3520));
}

const char* const kSweepMarkdown = R"(# dpbench report

13 results from 13 files in 4 series.
Speedup ratio = processing speed on N GPUs / processing speed on 1 GPU of the same series; efficiency % = 100 x speedup / N; jitter = 1.4826 x median absolute deviation of the per-step processing speeds (same unit as the speed).

## Weak scaling (fixed batch per GPU)

### resnet50, independent, fp32, NCHW, batch 64 per GPU (weak scaling)

| GPU number | Batch size per GPU | Total batch | Total time to process 100 batches (s) | Processing speed (images/s) | Speedup ratio | Efficiency % | Jitter |
|---:|---:|---:|---:|---:|---:|---:|---:|
| 1 | 64 | 64 | 6.400 | 1000.0 | 1.00 | 100.0 | 10.0 |
| 2 | 64 | 128 | 6.400 | 2000.0 | 2.00 | 100.0 | 10.0 |
| 4 | 64 | 256 | 6.400 | 4000.0 | 4.00 | 100.0 | 10.0 |

### resnet50, parameter_server (cpu), fp32, NCHW, batch 64 per GPU (weak scaling)

| GPU number | Batch size per GPU | Total batch | Total time to process 100 batches (s) | Processing speed (images/s) | Speedup ratio | Efficiency % | Jitter |
|---:|---:|---:|---:|---:|---:|---:|---:|
| 2 | 64 | 128 | 8.533 | 1500.0 | n/a | n/a | 10.0 |
| 4 | 64 | 256 | 10.240 | 2500.0 | n/a | n/a | 10.0 |

- The 1-GPU run is missing: speedup and efficiency are n/a (both are relative to the 1-GPU run of the same series).

### resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)

| GPU number | Batch size per GPU | Total batch | Total time to process 100 batches (s) | Processing speed (images/s) | Speedup ratio | Efficiency % | Jitter |
|---:|---:|---:|---:|---:|---:|---:|---:|
| 1 | 64 | 64 | 6.400 | 1000.0 | 1.00 | 100.0 | 10.0 |
| 2 | 64 | 128 | 6.737 | 1900.0 | 1.90 | 95.0 | 10.0 |
| 4 | 64 | 256 | 7.111 | 3600.0 | 3.60 | 90.0 | 10.0 |

- 2 GPUs: 3 runs (1850.0, 1900.0, 1950.0 images/s); the row shows the median run by processing speed.

### Comparison: resnet50, fp32, NCHW, batch 64 per GPU (weak scaling)

Processing speed in images/s (speedup over the same strategy's 1-GPU run); - where a strategy has no run.

| GPU number | independent | parameter_server (cpu) | replicated (nccl) |
|---:|---:|---:|---:|
| 1 | 1000.0 (1.00x) | - | 1000.0 (1.00x) |
| 2 | 2000.0 (2.00x) | 1500.0 (n/a) | 1900.0 (1.90x) |
| 4 | 4000.0 (4.00x) | 2500.0 (n/a) | 3600.0 (3.60x) |

## Strong scaling (fixed total batch)

### resnet50, replicated (nccl), fp32, NCHW, total batch 256 (strong scaling)

| GPU number | Batch size per GPU | Total batch | Total time to process 100 batches (s) | Processing speed (images/s) | Speedup ratio | Efficiency % | Jitter |
|---:|---:|---:|---:|---:|---:|---:|---:|
| 1 | 256 | 256 | 23.273 | 1100.0 | 1.00 | 100.0 | 10.0 |
| 2 | 128 | 256 | 12.800 | 2000.0 | 1.82 | 90.9 | 10.0 |
| 4 | 64 | 256 | 7.273 | 3520.0 | 3.20 | 80.0 | 10.0 |

### Comparison: resnet50, fp32, NCHW, total batch 256 (strong scaling)

Processing speed in images/s (speedup over the same strategy's 1-GPU run); - where a strategy has no run.

| GPU number | replicated (nccl) |
|---:|---:|
| 1 | 1100.0 (1.00x) |
| 2 | 2000.0 (1.82x) |
| 4 | 3520.0 (3.20x) |
)";

}  // namespace

TEST_CASE("report markdown of a weak and strong scaling sweep matches the expected text", "[report]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "strong");
  write_sweep(dir);
  const Report report = report_of({dir.path().string()});
  CHECK(render_markdown(report) == kSweepMarkdown);
}

TEST_CASE("report speedup and efficiency are relative to the series' own 1-GPU run", "[report]") {
  TempDir dir;
  write_fixture(dir, "a.json", run_of(kReplicated, 1, 800));
  write_fixture(dir, "b.json", run_of(kReplicated, 2, 1400));
  write_fixture(dir, "c.json", run_of(kReplicated, 8, 5600));
  write_fixture(dir, "d.json", run_of(kIndependent, 1, 1000));  // another series: not the baseline
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 2);
  const Series& replicated = report.series[1];
  CHECK(replicated.title == "resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)");
  REQUIRE(replicated.rows.size() == 3);
  CHECK(*replicated.rows[1].speedup == Approx(1.75));        // 1400 / 800
  CHECK(*replicated.rows[1].efficiency_pct == Approx(87.5));  // 100 x 1.75 / 2
  CHECK(*replicated.rows[2].speedup == Approx(7.0));
  CHECK(*replicated.rows[2].efficiency_pct == Approx(87.5));
  CHECK_THAT(render_markdown(report), Contains("| 8 | 64 | 512 | 9.143 | 5600.0 | 7.00 | 87.5 | 10.0 |\n"));
}

TEST_CASE("report groups series by strategy options, precision, layout and model variant", "[report]") {
  TempDir dir;
  const std::vector<std::vector<std::string>> variants = {
      kReplicated,
      with(kReplicated, "--all_reduce_spec=xring"),
      {"--model=resnet50", "--variable_update=replicated", "--gradient_repacking=4", "--overlap_comm=false",
       "--compact_gradient_transfer=fp16"},
      with(kReplicated, "--bucket_cap_mb=10"),
      {"--model=resnet50", "--variable_update=parameter_server", "--local_parameter_device=gpu"},
      with(kReplicated, "--precision=fp16"),
      with(kReplicated, "--data_format=NHWC"),
      with(kIndependent, "--batch_size=32"),
  };
  for (size_t i = 0; i < variants.size(); ++i) write_fixture(dir, "r" + std::to_string(i) + ".json", run_of(variants[i], 1, 100));
  FixtureRun nmt = run_of({"--model=nmt", "--variable_update=replicated", "--encoder_type=cudnn_lstm", "--direction=bi"}, 1, 50000);
  nmt.unit = "words/s";
  write_fixture(dir, "nmt.json", nmt);
  FixtureRun transformer = run_of({"--model=nmt", "--variable_update=replicated", "--encoder_type=transformer"}, 1, 40000);
  transformer.unit = "words/s";
  write_fixture(dir, "transformer.json", transformer);
  FixtureRun rnnlm = run_of({"--model=rnnlm", "--variable_update=replicated", "--sparse_embedding_grads=true"}, 1, 90000);
  rnnlm.unit = "tokens/s";
  write_fixture(dir, "rnnlm.json", rnnlm);

  const Report report = report_of({dir.path().string()});
  std::vector<std::string> titles;
  for (const Series& series : report.series) titles.push_back(series.title);
  // Workloads in order of scaling, model, variant, precision, layout, batch; strategies within one
  // workload from the baseline on, options by value.
  CHECK(titles == std::vector<std::string>{
                      "nmt (cudnn_lstm, bi), replicated (nccl), fp32, batch 384 per GPU (weak scaling)",
                      "nmt (transformer), replicated (nccl), fp32, batch 128 per GPU (weak scaling)",
                      "resnet50, replicated (nccl), fp16, NCHW, batch 64 per GPU (weak scaling)",
                      "resnet50, independent, fp32, NCHW, batch 32 per GPU (weak scaling)",
                      "resnet50, parameter_server (gpu), fp32, NCHW, batch 64 per GPU (weak scaling)",
                      "resnet50, replicated (nccl, bucket 10 MB), fp32, NCHW, batch 64 per GPU (weak scaling)",
                      "resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)",
                      "resnet50, replicated (nccl, repacking 4, no overlap, fp16 transfer), fp32, NCHW, batch 64 per GPU (weak scaling)",
                      "resnet50, replicated (xring), fp32, NCHW, batch 64 per GPU (weak scaling)",
                      "resnet50, replicated (nccl), fp32, NHWC, batch 64 per GPU (weak scaling)",
                      "rnnlm (cudnn_lstm), replicated (nccl, sparse embeddings), fp32, batch 512 per GPU (weak scaling)",
                  });
  // One comparison per workload: the batch-64 fp32 NCHW resnet50 one holds five strategies.
  REQUIRE(report.comparisons.size() == 7);
  CHECK(report.comparisons[4].title == "resnet50, fp32, NCHW, batch 64 per GPU (weak scaling)");
  CHECK(report.comparisons[4].series.size() == 5);
  CHECK_THAT(render_markdown(report),
             Contains("| GPU number | parameter_server (gpu) | replicated (nccl, bucket 10 MB) | replicated (nccl) | "
                      "replicated (nccl, repacking 4, no overlap, fp16 transfer) | replicated (xring) |\n"));
}

TEST_CASE("report keeps inference runs apart from training runs and says which they are", "[report]") {
  TempDir dir;
  write_fixture(dir, "train_1.json", run_of(kIndependent, 1, 1000));
  write_fixture(dir, "infer_1.json", run_of(with(kIndependent, "--forward_only"), 1, 3000));
  write_fixture(dir, "infer_2.json", run_of(with(kIndependent, "--forward_only"), 2, 6000));
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 2);
  CHECK(report.series[0].title == "resnet50, independent, fp32, NCHW, batch 64 per GPU (weak scaling)");
  CHECK(report.series[1].title ==
        "resnet50, independent, inference (forward only), fp32, NCHW, batch 64 per GPU (weak scaling)");
  REQUIRE(report.series[1].rows.size() == 2);
  CHECK(*report.series[1].rows[1].speedup == Approx(2.0));  // against the inference run on 1 GPU
  REQUIRE(report.comparisons.size() == 2);
  CHECK(report.comparisons[1].title == "resnet50, inference (forward only), fp32, NCHW, batch 64 per GPU (weak scaling)");
}

TEST_CASE("report keeps fully_sharded's one-process and one-process-per-GPU runs apart", "[report]") {
  // One process drove both GPUs, or a launcher started one process per GPU (each recording
  // --num_gpus=1 in a job of 2 devices): two series, each with its own baseline.
  TempDir dir;
  const std::vector<std::string> sharded = flags_of({"--model=resnet50", "--variable_update=fully_sharded"});
  write_fixture(dir, "one_process_1.json", run_of(sharded, 1, 1000));
  write_fixture(dir, "one_process_2.json", run_of(sharded, 2, 1900));
  auto per_gpu = [&](int ranks, double speed, const std::string& name) {
    Result result = make_fixture_result(run_of(sharded, 1, speed));
    result.environment.launcher = "torchrun";
    result.summary.num_devices = ranks;
    write_result_atomically(result, dir.file(name));
  };
  per_gpu(1, 990, "per_gpu_1.json");
  per_gpu(2, 1800, "per_gpu_2.json");
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 2);
  CHECK(report.series[0].title == "resnet50, fully_sharded, fp32, NCHW, batch 64 per GPU (weak scaling)");
  CHECK(report.series[1].title ==
        "resnet50, fully_sharded (one process per GPU), fp32, NCHW, batch 64 per GPU (weak scaling)");
  REQUIRE(report.series[0].rows.size() == 2);
  REQUIRE(report.series[1].rows.size() == 2);
  CHECK(*report.series[0].rows[1].speedup == Approx(1.9));
  CHECK(*report.series[1].rows[1].speedup == Approx(1800.0 / 990.0));
  // replicated runs only as one process: no such split, nothing added to its label.
  CHECK(series_key_of(make_fixture_result(run_of(kReplicated, 2, 1900)), strategy_catalog_for_reports()).processes == "");
}

TEST_CASE("report keeps strong and weak scaling apart even at equal batches", "[report]") {
  TempDir dir;
  // Weak at 64 per GPU and strong at total 64 agree on the 1-GPU run's batch, but not beyond.
  write_fixture(dir, "weak_1.json", run_of(kReplicated, 1, 1000));
  write_fixture(dir, "weak_2.json", run_of(kReplicated, 2, 1900));
  write_fixture(dir, "strong_1.json", run_of(with(kReplicated, "--total_batch_size=64"), 1, 1000));
  write_fixture(dir, "strong_2.json", run_of(with(kReplicated, "--total_batch_size=64"), 2, 1500));
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 2);
  CHECK(report.series[0].key.scaling == Scaling::weak);
  CHECK(report.series[1].key.scaling == Scaling::strong);
  CHECK(report.series[1].title == "resnet50, replicated (nccl), fp32, NCHW, total batch 64 (strong scaling)");
  CHECK(*report.series[1].rows[1].speedup == Approx(1.5));
  const std::string markdown = render_markdown(report);
  const size_t weak = markdown.find("## Weak scaling (fixed batch per GPU)");
  const size_t strong = markdown.find("## Strong scaling (fixed total batch)");
  REQUIRE(weak != std::string::npos);
  REQUIRE(strong != std::string::npos);
  CHECK(markdown.find("| 2 | 64 | 128 | 6.737 | 1900.0 | 1.90 | 95.0 | 10.0 |") < strong);
  CHECK(markdown.find("| 2 | 32 | 64 | 4.267 | 1500.0 | 1.50 | 75.0 | 10.0 |") > strong);
}

TEST_CASE("report shows the median of repeated runs and says how many there were", "[report]") {
  TempDir dir;
  write_fixture(dir, "base.json", run_of(kReplicated, 1, 1000));
  for (double speed : {1700.0, 1900.0, 1800.0, 1600.0, 1750.0})
    write_fixture(dir, "odd_" + std::to_string(int(speed)) + ".json", run_of(kReplicated, 2, speed));
  for (double speed : {3000.0, 3400.0})
    write_fixture(dir, "even_" + std::to_string(int(speed)) + ".json", run_of(kReplicated, 4, speed));
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 1);
  const Series& series = report.series[0];
  CHECK(series.rows[1].runs.size() == 5);
  CHECK(series.rows[1].run().result.summary.items_per_sec == 1750.0);
  CHECK(series.rows[2].run().result.summary.items_per_sec == 3000.0);  // the slower middle one
  const std::string markdown = render_markdown(report);
  CHECK_THAT(markdown, Contains("| 2 | 64 | 128 | 7.314 | 1750.0 | 1.75 | 87.5 | 10.0 |\n"));
  CHECK_THAT(markdown, Contains("| 4 | 64 | 256 | 8.533 | 3000.0 | 3.00 | 75.0 | 10.0 |\n"));
  CHECK_THAT(markdown, Contains("- 2 GPUs: 5 runs (1600.0, 1700.0, 1750.0, 1800.0, 1900.0 images/s); the row shows "
                                "the median run by processing speed.\n"));
  CHECK_THAT(markdown, Contains("- 4 GPUs: 2 runs (3000.0, 3400.0 images/s); the row shows the slower of the two "
                                "middle runs (median of an even count) by processing speed.\n"));
}

TEST_CASE("report without a 1-GPU run says n/a and notes the missing baseline", "[report]") {
  TempDir dir;
  write_fixture(dir, "two.json", run_of(kReplicated, 2, 1900));
  write_fixture(dir, "four.json", run_of(kReplicated, 4, 3600));
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 1);
  CHECK(report.series[0].baseline_missing);
  CHECK_FALSE(report.series[0].rows[0].speedup.has_value());
  const std::string markdown = render_markdown(report);
  CHECK_THAT(markdown, Contains("| 2 | 64 | 128 | 6.737 | 1900.0 | n/a | n/a | 10.0 |\n"
                                "| 4 | 64 | 256 | 7.111 | 3600.0 | n/a | n/a | 10.0 |\n\n"
                                "- The 1-GPU run is missing: speedup and efficiency are n/a"));
  CHECK_THAT(markdown, Contains("| 2 | 1900.0 (n/a) |\n"));
}

TEST_CASE("report tells backends, GPU types and units apart", "[report]") {
  TempDir dir;
  write_fixture(dir, "cuda.json", run_of(kReplicated, 1, 1000));
  FixtureRun reference = run_of(kReplicated, 1, 12);
  reference.backend = "reference";
  write_fixture(dir, "reference.json", reference);
  FixtureRun h200 = run_of(kReplicated, 1, 1300);
  h200.gpu_name = "NVIDIA H200";
  write_fixture(dir, "h200.json", h200);
  FixtureRun other_unit = run_of(kReplicated, 1, 7);
  other_unit.unit = "samples/s";
  other_unit.gpu_name = "NVIDIA H200";
  write_fixture(dir, "samples.json", other_unit);

  const Report report = report_of({dir.path().string()});
  std::vector<std::string> titles;
  for (const Series& series : report.series) titles.push_back(series.title);
  const std::string base = "resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)";
  CHECK(titles == std::vector<std::string>{
                      base + " [device_name=NVIDIA H100 80GB HBM3, unit=images/s]",
                      base + " [device_name=NVIDIA H200, unit=images/s]",
                      base + " [device_name=NVIDIA H200, unit=samples/s]",
                      "resnet50, replicated (nccl), fp32, NCHW, reference backend, batch 64 per device (weak scaling)",
                  });
  for (const Series& series : report.series) CHECK(series.rows.size() == 1);
}

TEST_CASE("report notes config that differs between the runs of one series", "[report]") {
  TempDir dir;
  write_fixture(dir, "one.json", run_of(kReplicated, 1, 1000));
  write_fixture(dir, "two.json", run_of(with(kReplicated, "--cuda_graph=false"), 2, 1800));
  FixtureRun shorter = run_of(kReplicated, 4, 3600);
  shorter.measured_steps = 50;  // a different length is expected and shown, not warned about
  write_fixture(dir, "four.json", shorter);
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 1);
  CHECK(report.series[0].notes ==
        std::vector<std::string>{"The runs differ in cuda_graph (false, true): the rows are not like for like."});
  const std::string markdown = render_markdown(report);
  CHECK_THAT(markdown, Contains("| Total time to process the measured batches (s) |"));
  CHECK_THAT(markdown, Contains("| 4 | 64 | 256 | 3.556 (50 batches) | 3600.0 | 3.60 | 90.0 | 10.0 |\n"));
}

TEST_CASE("report csv has one row per series and GPU count with the key fields", "[report]") {
  TempDir dir;
  write_fixture(dir, "one.json", run_of(kReplicated, 1, 1000));
  write_fixture(dir, "two.json", run_of(kReplicated, 2, 1900));
  write_fixture(dir, "ps.json", run_of(kServerCpu, 2, 1500));
  const std::string csv = with_placeholder(render_csv(report_of({dir.path().string()})), dir);
  CHECK(csv ==
        "series,scaling,mode,model,encoder_type,direction,precision,data_format,data,fixed_batch,backend,device_name,unit,"
        "activation_checkpointing,variable_update,processes,all_reduce_spec,local_parameter_device,gradient_repacking,bucket_cap_mb,tail_bucket_mb,"
        "agg_small_grads_max_bytes,agg_small_grads_max_group,overlap_comm,compact_gradient_transfer,"
        "sparse_embedding_grads,sharded_update,hierarchical_all_reduce,prefetch_units,reshard_after_forward,"
        "shard_weight_copy,reduce_precision,shard_group_size,gpu_number,batch_size_per_gpu,total_batch,"
        "measured_batches,total_time_s,"
        "items_per_sec,speedup,efficiency_pct,jitter,tflops_per_gpu,mfu_pct,loss_exposed_comm_pts,loss_straggler_pts,loss_clock_pts,"
        "loss_data_pts,loss_host_pts,loss_other_pts,runs,file\n"
        "\"resnet50, parameter_server (cpu), fp32, NCHW, batch 64 per GPU (weak scaling)\",weak,training,resnet50,,,fp32,NCHW,"
        ",64,cuda,NVIDIA H100 80GB HBM3,images/s,none,parameter_server,,,cpu,0,25.0,0.0,0,10,true,,,,,,,,,,"
        "2,64,128,100,8.533333333333333,1500.0,,,10.0,,,,,,,,,1,<dir>/ps.json\n"
        "\"resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)\",weak,training,resnet50,,,fp32,NCHW,"
        ",64,cuda,NVIDIA H100 80GB HBM3,images/s,none,replicated,,nccl,,0,25.0,0.0,0,10,true,none,false,false,,,,,,,"
        "1,64,64,100,6.4,1000.0,1.0,100.0,10.0,,,,,,,,,1,<dir>/one.json\n"
        "\"resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)\",weak,training,resnet50,,,fp32,NCHW,"
        ",64,cuda,NVIDIA H100 80GB HBM3,images/s,none,replicated,,nccl,,0,25.0,0.0,0,10,true,none,false,false,,,,,,,"
        "2,64,128,100,6.7368421052631575,1900.0,1.9,95.0,10.0,,,,,,,,,1,<dir>/two.json\n");
}

TEST_CASE("report json is an array of series objects with their rows", "[report]") {
  TempDir dir;
  write_fixture(dir, "two.json", run_of(kReplicated, 2, 1900));
  write_fixture(dir, "one.json", run_of(kReplicated, 1, 1000));
  const nlohmann::json document = nlohmann::json::parse(render_json(report_of({dir.path().string()})));
  REQUIRE(document.is_array());
  REQUIRE(document.size() == 1);
  const nlohmann::json& series = document[0];
  CHECK(series["title"] == "resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)");
  CHECK(series["scaling"] == "weak");
  CHECK(series["key"]["mode"] == "training");
  CHECK(series["unit"] == "images/s");
  CHECK(series["baseline_missing"] == false);
  CHECK(series["key"]["variable_update"] == "replicated");
  CHECK(series["key"]["all_reduce_spec"] == "nccl");
  CHECK(series["key"]["fixed_batch"] == 64);
  REQUIRE(series["rows"].size() == 2);
  const nlohmann::json& row = series["rows"][1];
  CHECK(row["gpu_number"] == 2);
  CHECK(row["batch_size_per_gpu"] == 64);
  CHECK(row["total_batch"] == 128);
  CHECK(row["measured_batches"] == 100);
  CHECK(row["items_per_sec"] == 1900.0);
  CHECK(row["speedup"].get<double>() == Approx(1.9));
  CHECK(row["efficiency_pct"].get<double>() == Approx(95.0));
  CHECK(row["jitter"] == 10.0);
  CHECK(row["runs"] == 1);
  CHECK(with_placeholder(row["file"].get<std::string>(), dir) == "<dir>/two.json");
}

TEST_CASE("report tells apart strategies whose labels read alike", "[report]") {
  TempDir dir;
  write_fixture(dir, "a.json", run_of(kReplicated, 1, 1000));
  // agg_small_grads_max_group only matters with agg_small_grads_max_bytes, so the label omits it,
  // yet the runs must not share a row.
  nlohmann::json other = result_to_json(make_fixture_result(run_of(kReplicated, 1, 900)));
  other["config"]["agg_small_grads_max_group"] = 5;
  std::ofstream(dir.file("b.json")) << other.dump();
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 2);
  CHECK(report.series[0].title ==
        "resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling) [agg_small_grads_max_group=5]");
  REQUIRE(report.comparisons.size() == 1);
  CHECK(report.comparisons[0].column_labels ==
        std::vector<std::string>{"replicated (nccl) [agg_small_grads_max_group=5]",
                                 "replicated (nccl) [agg_small_grads_max_group=10]"});
  CHECK_THAT(render_markdown(report),
             Contains("| 1 | 900.0 (1.00x) | 1000.0 (1.00x) |\n"));
}

TEST_CASE("report takes the spellings of one setting as the same series", "[report]") {
  TempDir dir;
  // tf_cnn_benchmarks' spelling of independent, and --use_fp16 for --precision=fp16.
  write_fixture(dir, "a.json", run_of(kIndependent, 1, 1000));
  write_fixture(dir, "b.json", run_of({"--model=resnet50", "--variable_update=replicated", "--independent_replica=true"}, 2, 2000));
  write_fixture(dir, "c.json", run_of(with(kIndependent, "--precision=fp16"), 1, 1500));
  write_fixture(dir, "d.json", run_of(with(kIndependent, "--use_fp16=true"), 2, 3000));
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 2);
  for (const Series& series : report.series) {
    CHECK(series.rows.size() == 2);
    CHECK(series.notes.empty());
    CHECK(*series.rows[1].speedup == Approx(2.0));
  }
  CHECK(report.series[0].title == "resnet50, independent, fp16, NCHW, batch 64 per GPU (weak scaling)");
}

TEST_CASE("report keeps data sets and feeds apart and names them", "[report]") {
  TempDir dir;
  write_fixture(dir, "device.json", run_of(kReplicated, 1, 100));
  write_fixture(dir, "prefetch.json", run_of(with(kReplicated, "--data_feed=host"), 1, 99));
  write_fixture(dir, "sync.json",
                run_of({"--model=resnet50", "--variable_update=replicated", "--data_feed=host",
                        "--prefetch_data_to_device=false"}, 1, 70));
  write_fixture(dir, "cifar_shape.json", run_of(with(kReplicated, "--data_name=cifar10"), 1, 500));
  const Report report = report_of({dir.path().string()});
  std::vector<std::string> titles;
  for (const Series& series : report.series) titles.push_back(series.title);
  CHECK(titles == std::vector<std::string>{
                      "resnet50, replicated (nccl), fp32, NCHW, batch 64 per GPU (weak scaling)",
                      "resnet50, replicated (nccl), fp32, NCHW, cifar10 shape (synthetic), batch 64 per GPU (weak scaling)",
                      "resnet50, replicated (nccl), fp32, NCHW, synthetic, host feed (prefetch 2), batch 64 per GPU (weak scaling)",
                      "resnet50, replicated (nccl), fp32, NCHW, synthetic, host feed (synchronous), batch 64 per GPU (weak scaling)",
                  });
  CHECK(report.comparisons.size() == 4);  // one workload each: a feed is part of the workload
}

namespace {

// A fixture with a breakdown (ms per step) and the GPUs' mean SM clock.
void write_with_breakdown(const TempDir& dir, const std::string& name, int gpus, double speed,
                          const nlohmann::json& ms_per_step, double wall_ms, double clock_mhz) {
  Result result = make_fixture_result(run_of(kReplicated, gpus, speed));
  result.summary.breakdown = {{"wall_ms_per_step", wall_ms}, {"ms_per_step", ms_per_step}};
  result.summary.gpu_telemetry = {{"available", true}, {"sm_clock_mhz_mean", clock_mhz}};
  write_result_atomically(result, dir.file(name));
}

}  // namespace

TEST_CASE("report shows TFLOP/s and MFU where a series' runs state them", "[report]") {
  TempDir dir;
  // A GPU series with MFU (one row without: n/a) and a series of runs without any (no columns).
  const std::pair<int, nlohmann::json> gpu_runs[] = {
      {1, {{"tflops_per_sec_per_device", 150.0}, {"mfu", 0.125}}},
      {2, {{"tflops_per_sec_per_device", 142.5}, {"mfu", nullptr}, {"mfu_reason", "no peak known"}}}};
  for (const auto& [gpus, flops] : gpu_runs) {
    Result result = make_fixture_result(run_of(kReplicated, gpus, 1000.0 * gpus));
    result.summary.flops = flops;
    write_result_atomically(result, dir.file("gpu_" + std::to_string(gpus) + ".json"));
  }
  write_fixture(dir, "ps_1.json", run_of(kServerCpu, 1, 900));
  const Report report = report_of({dir.path().string()});
  const std::string markdown = render_markdown(report);
  CHECK_THAT(markdown, Contains("MFU % = 100 x that / the GPU's dense peak"));
  CHECK_THAT(markdown, Contains("| Speedup ratio | Efficiency % | Jitter | TFLOP/s per GPU | MFU % |\n"));
  CHECK_THAT(markdown, Contains("| 1000.0 | 1.00 | 100.0 | 10.0 | 150.0 | 12.5 |\n"));
  CHECK_THAT(markdown, Contains("| 2000.0 | 2.00 | 100.0 | 10.0 | 142.5 | n/a |\n"));
  CHECK_THAT(markdown, Contains("| Speedup ratio | Efficiency % | Jitter |\n"));  // the parameter server's
  const nlohmann::json series = nlohmann::json::parse(render_json(report));
  bool seen = false;
  for (const nlohmann::json& one : series) {
    if (one["key"]["variable_update"] != "replicated") continue;
    seen = true;
    CHECK(one["rows"][0]["tflops_per_gpu"].get<double>() == Approx(150.0));
    CHECK(one["rows"][0]["mfu_pct"].get<double>() == Approx(12.5));
    CHECK(one["rows"][1]["mfu_pct"].is_null());
  }
  CHECK(seen);
  CHECK_THAT(render_csv(report), Contains(",10.0,150.0,12.5,"));
  CHECK_THAT(markdown, !Contains("MFU above 100%"));
}

TEST_CASE("report explains an MFU above 100% and names its rows", "[report]") {
  TempDir dir;
  // vgg16's fp32 runs on an H200: 81.6 TFLOP/s of direct-convolution FLOPs against a 67 TFLOP/s peak.
  const std::pair<int, double> mfu_by_gpus[] = {{1, 1.218}, {2, 0.98}, {4, 1.01}};
  for (const auto& [gpus, mfu] : mfu_by_gpus) {
    Result result = make_fixture_result(run_of(kReplicated, gpus, 1000.0 * gpus));
    result.summary.flops = {{"tflops_per_sec_per_device", 67.0 * mfu}, {"mfu", mfu}};
    write_result_atomically(result, dir.file("gpu_" + std::to_string(gpus) + ".json"));
  }
  const std::string markdown = render_markdown(report_of({dir.path().string()}));
  CHECK_THAT(markdown, Contains("- MFU above 100% (1 GPU: 121.8%, 4 GPUs: 101.0%): more model FLOPs per second"));
  CHECK_THAT(markdown, Contains("(Winograd, FFT) can run above it"));
  CHECK_THAT(markdown, !Contains("2 GPUs: 98.0%"));
}

TEST_CASE("report names the Winograd and FFT convolutions behind an MFU above 100%", "[report]") {
  TempDir dir;
  for (const int gpus : {1, 2}) {
    Result result = make_fixture_result(run_of(kReplicated, gpus, 1000.0 * gpus));
    result.summary.flops = {{"tflops_per_sec_per_device", 81.6}, {"mfu", 1.218}};
    result.summary.math_paths = {
        {"convolutions",
         {{"shapes", 9},
          {"classic_algorithms",
           {{"forward", {{"implicit_precomp_gemm", 2}, {"winograd_nonfused", 6}}},
            {"backward_data", {{"algo_1", 3}, {"fft_tiling", 1}}},
            {"backward_filter", {{"algo_1", 9}}}}}}}};
    write_result_atomically(result, dir.file("gpu_" + std::to_string(gpus) + ".json"));
  }
  const std::string markdown = render_markdown(report_of({dir.path().string()}));
  CHECK_THAT(markdown, Contains("the runs' convolutions include algorithms that do fewer multiplications (the 1 GPU "
                                "run's backward data fft_tiling on 1 shape, forward winograd_nonfused on 6 shapes)"));
  CHECK_THAT(markdown, !Contains("can run above it"));
  CHECK_THAT(markdown, !Contains("algo_1"));
}

TEST_CASE("report says where each multi-GPU run's efficiency went, in points that add up", "[report]") {
  TempDir dir;
  // 1 GPU: 64 images in 10 ms; 2 GPUs: 128 images at 11.5 ms a step, efficiency 10 / 11.5 = 86.96%.
  write_with_breakdown(dir, "one.json", 1, 6400,
                       {{"forward_ms", 4.0}, {"backward_ms", 5.0}, {"update_ms", 1.0}, {"exposed_comm_ms", 0.0},
                        {"straggler_wait_ms", 0.0}, {"data_wait_ms", 0.0}, {"host_gap_ms", 0.0}},
                       10.0, 1980);
  write_with_breakdown(dir, "two.json", 2, 12800 / 1.15,
                       {{"forward_ms", 4.1}, {"backward_ms", 5.1}, {"update_ms", 1.0}, {"exposed_comm_ms", 0.9},
                        {"straggler_wait_ms", 0.2}, {"data_wait_ms", 0.0}, {"host_gap_ms", 0.2}},
                       11.5, 1950);
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 1);
  const SeriesRow& row = report.series[0].rows[1];
  REQUIRE(row.efficiency_loss.has_value());
  const EfficiencyLoss& loss = *row.efficiency_loss;
  CHECK(*row.efficiency_pct == Approx(100.0 / 1.15));
  CHECK(loss.exposed_comm == Approx(100 * 0.9 / 11.5));
  CHECK(loss.straggler == Approx(100 * 0.2 / 11.5));
  CHECK(loss.host == Approx(100 * 0.2 / 11.5));
  CHECK(loss.data == Approx(0.0));
  REQUIRE(loss.clock_known);
  CHECK(loss.clock == Approx(100 * 10.2 * (1 - 1950.0 / 1980.0) / 11.5));  // compute at 1950 instead of 1980 MHz
  const double lost = 100 - *row.efficiency_pct;
  CHECK(loss.exposed_comm + loss.straggler + loss.clock + loss.data + loss.host + loss.other == Approx(lost));
  CHECK_FALSE(report.series[0].rows[0].efficiency_loss.has_value());  // 1 GPU: nothing lost

  const std::string markdown = render_markdown(report);
  CHECK_THAT(markdown, Contains("Where the efficiency went (points lost against 1 GPU"));
  CHECK_THAT(markdown, Contains("| 2 | 87.0 | 7.8 | 1.7 | 1.3 | 0.0 | 1.7 | 0.4 |\n"));
  const nlohmann::json rows = nlohmann::json::parse(render_json(report))[0]["rows"];
  CHECK(rows[0]["efficiency_loss_points"].is_null());
  CHECK(rows[1]["efficiency_loss_points"]["exposed_comm"].get<double>() == Approx(100 * 0.9 / 11.5));
  CHECK_THAT(render_csv(report), Contains("loss_exposed_comm_pts"));
}

TEST_CASE("predict's equal-clock error removes the measured run's clock loss", "[report][predict]") {
  // BASE at 1980 MHz; the 4-GPU run computed 9 of its 10 ms at 1800 MHz: it lost 9 x (1 - 1800/1980) =
  // 0.818 ms of compute, 8.18 points of its step.
  Result base = make_fixture_result(run_of(kReplicated, 1, 6400));
  base.summary.gpu_telemetry = {{"available", true}, {"sm_clock_mhz_mean", 1980.0}};
  Result run = make_fixture_result(run_of(kReplicated, 4, 23000));
  run.summary.breakdown = {{"wall_ms_per_step", 10.0},
                           {"ms_per_step", {{"forward_ms", 3.0}, {"backward_ms", 5.0}, {"update_ms", 1.0}}}};
  run.summary.gpu_telemetry = {{"available", true}, {"sm_clock_mhz_mean", 1800.0}};
  const std::optional<double> points = clock_loss_points(run, base);
  REQUIRE(points.has_value());
  CHECK(*points == Approx(100 * 9.0 * (1 - 1800.0 / 1980.0) / 10.0));
  Result untelemetered = base;
  untelemetered.summary.gpu_telemetry = nlohmann::json::object();
  CHECK_FALSE(clock_loss_points(run, untelemetered).has_value());

  PredictionRow row;
  row.strategy = "replicated (nccl)";
  row.step.gpus = 4;
  row.step.modelled = true;
  row.items_per_sec = 25000;
  row.measured_items_per_sec = 23000;
  row.measured_clock_loss_pct = *points;
  CHECK(*row.error_pct() == Approx(100.0 * 2000 / 23000));
  // At BASE's clock the run would have taken 10 - 0.818 ms: 23000 / (1 - 0.0818) items/s.
  const double at_base_clock = 23000 / (1 - *points / 100);
  CHECK(*row.error_at_equal_clocks_pct() == Approx(100 * (25000 - at_base_clock) / at_base_clock));
  PredictionReport report;
  report.unit = "images/s";
  report.measurements_given = true;
  report.rows.push_back(row);
  const std::string markdown = render_prediction_markdown(report);
  CHECK_THAT(markdown, Contains("| Error | Clock loss | Error at equal clocks |"));
  CHECK_THAT(markdown, Contains("| 23000.0 | +8.7% | 8.2% | -0.2% |"));
  CHECK_THAT(markdown, Contains("The prediction leaves it out"));
  const nlohmann::json rows = nlohmann::json::parse(render_prediction_json(report))["rows"];
  CHECK(rows[0]["clock_loss_pct"].get<double>() == Approx(*points));
  CHECK_THAT(render_prediction_csv(report), Contains("clock_loss_pct,error_at_equal_clocks_pct"));
}

TEST_CASE("predict warns where BASE ran at its power limit", "[report][predict]") {
  const nlohmann::json capped = {{"available", true},      {"power_capped_share", 1.0}, {"sm_clock_mhz_mean", 1829.3},
                                 {"power_w_mean", 649.1}, {"power_limit_w_mean", 700.0}};
  const std::optional<std::string> note = power_cap_note(capped);
  REQUIRE(note.has_value());
  CHECK_THAT(*note, StartsWith("BASE ran at its GPU's power limit in 100% of its telemetry samples (mean SM clock "
                               "1829 MHz, 649 W of a 700 W limit): "));
  CHECK_THAT(*note, Contains("the prediction leaves out"));
  // Half the samples is enough; less, no telemetry, or the reference backend's none: no note.
  CHECK(power_cap_note({{"power_capped_share", 0.5}}).has_value());
  CHECK_FALSE(power_cap_note({{"power_capped_share", 0.11}}).has_value());
  CHECK_FALSE(power_cap_note(nlohmann::json::object()).has_value());
  CHECK_FALSE(power_cap_note({{"available", false}, {"power_capped_share", nullptr}}).has_value());
  // Without the clock and power figures the note still stands, shorter.
  CHECK_THAT(*power_cap_note({{"power_capped_share", 0.85}}), StartsWith("BASE ran at its GPU's power limit in 85% "
                                                                          "of its telemetry samples: "));
}

TEST_CASE("reference runs on 1 and 2 devices give a decomposition whose parts add up to the lost points", "[report]") {
  TempDir dir;
  REQUIRE(run_reference_series(dir, {1, 2}));
  const Report report = report_of({dir.path().string()});
  REQUIRE(report.series.size() == 1);
  REQUIRE(report.series[0].rows.size() == 2);
  const SeriesRow& row = report.series[0].rows[1];
  REQUIRE(row.efficiency_loss.has_value());
  const EfficiencyLoss& loss = *row.efficiency_loss;
  CHECK_FALSE(loss.clock_known);  // no telemetry on the reference backend
  CHECK(loss.exposed_comm + loss.straggler + loss.data + loss.host + loss.other ==
        Approx(100 - *row.efficiency_pct));
}
