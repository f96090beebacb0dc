// `dpbench comm_bench` on the reference backend: size parsing, bus bandwidth factors, flag errors
// (exit code 2), and whole runs through dpbench_main, checking the printed table and the JSON rows;
// --beside_compute's flags, its refusal there, and its JSON fields as predict reads them.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "cli/comm_bench_command.h"
#include "engine/backends.h"
#include "engine/communication/collective_traffic.h"
#include "engine/errors.h"
#include "reports/collective_curves.h"
#include "tests/host/test_support.h"

using namespace dpbench;
using dpbench::testing::read_json;
using dpbench::testing::run_cli;
using dpbench::testing::TempDir;

namespace {

// Sends file descriptor 1 to a file until text() is called, so what the command prints through
// its logger (stdio, flushed per line) can be read back.
class CapturedStdout {
 public:
  explicit CapturedStdout(const std::string& path) : path_(path) {
    std::fflush(stdout);
    saved_ = ::dup(1);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::close(fd);
  }
  ~CapturedStdout() { restore(); }
  std::string text() {
    restore();
    std::ifstream in(path_);
    std::stringstream content;
    content << in.rdbuf();
    return content.str();
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, 1);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

DeviceInventory no_gpu() { return DeviceInventory{0, "no driver"}; }

}  // namespace

TEST_CASE("comm_bench sizes take K, M and G as powers of 2", "[comm_bench]") {
  CHECK(parse_byte_size("min_bytes", "4096") == 4096);
  CHECK(parse_byte_size("min_bytes", "64K") == 65536);
  CHECK(parse_byte_size("min_bytes", "1M") == 1048576);
  CHECK(parse_byte_size("min_bytes", "2g") == 2147483648ull);
  for (const char* bad : {"", "0", "K", "1X", "1KB", "-1", "1.5M", " 1M", "99999999999999999999G"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_byte_size("min_bytes", bad), ConfigError);
  }
  CHECK_THROWS_WITH(parse_byte_size("max_bytes", "1X"), Catch::StartsWith("--max_bytes=1X: "));
}

TEST_CASE("comm_bench bus bandwidth factors are nccl-tests'", "[comm_bench]") {
  CHECK(collective_bus_factor(Collective::all_reduce, 4) == Approx(1.5));   // 2(n-1)/n
  CHECK(collective_bus_factor(Collective::all_reduce, 1) == 0.0);
  CHECK(collective_bus_factor(Collective::all_gather, 4) == Approx(0.75));  // (n-1)/n
  CHECK(collective_bus_factor(Collective::reduce_scatter, 8) == Approx(0.875));
  CHECK(collective_bus_factor(Collective::broadcast, 8) == 1.0);
}

TEST_CASE("every collective's bus factor is nccl-tests', written once", "[comm_bench]") {
  CHECK(collective_bus_factor(Collective::all_reduce, 2) == 1.0);  // 2(n-1)/n
  CHECK(collective_bus_factor(Collective::all_reduce, 8) == 1.75);
  CHECK(collective_bus_factor(Collective::reduce_scatter, 4) == 0.75);  // (n-1)/n
  CHECK(collective_bus_factor(Collective::all_gather, 4) == 0.75);
  CHECK(collective_bus_factor(Collective::all_to_all, 2) == 0.5);
  CHECK(collective_bus_factor(Collective::reduce, 8) == 1.0);
  CHECK(collective_bus_factor(Collective::broadcast, 3) == 1.0);
  CHECK(collective_bus_factor(Collective::all_reduce, 1) == 0.0);  // one rank: nothing travels
}

TEST_CASE("one name table: every collective has one name, and comm_bench measures the table's benchmarked ones",
          "[comm_bench]") {
  std::set<std::string> names;
  for (const CollectiveDescription& entry : collective_table()) {
    INFO(entry.name);
    CHECK(names.insert(entry.name).second);
    CHECK(collective_named(entry.name) == entry.collective);
    CHECK(std::string(collective_name(entry.collective)) == entry.name);
  }
  CHECK_FALSE(collective_named("allreduce").has_value());
  CHECK(benchmarked_collectives() == std::vector<Collective>{Collective::all_reduce, Collective::reduce_scatter,
                                                               Collective::all_gather, Collective::reduce,
                                                               Collective::broadcast});
  // What a device sends on average: a ring's bus factor, a chain's (n-1)/n, a copy from the host nothing.
  CHECK(collective_send_factor(Collective::all_reduce, 4) == 1.5);
  CHECK(collective_send_factor(Collective::reduce, 4) == 0.75);
  CHECK(collective_send_factor(Collective::broadcast, 4) == 0.75);
  CHECK(collective_send_factor(Collective::copy_to_host, 4) == 1.0);
  CHECK(collective_send_factor(Collective::copy_from_host, 4) == 0.0);
}

TEST_CASE("comm_bench flags resolve defaults and reject bad values with exit code 2", "[comm_bench]") {
  const CommBenchOptions cpu = parse_comm_bench_flags({}, no_gpu());
  CHECK(cpu.backend == BackendKind::reference);
  CHECK(cpu.fell_back_to_reference);
  CHECK(cpu.num_devices == 2);
  CHECK(cpu.collective == Collective::all_reduce);
  CHECK(cpu.min_bytes == (1u << 20));
  CHECK(cpu.max_bytes == (1u << 30));
  CHECK(cpu.iters == 20);
  CHECK(cpu.warmup_iters == 5);
  const CommBenchOptions gpus = parse_comm_bench_flags({"--op", "broadcast", "--data_type=bf16"}, DeviceInventory{8, ""});
  CHECK(gpus.backend == BackendKind::cuda);
  CHECK(gpus.num_devices == 8);
  CHECK(gpus.collective == Collective::broadcast);
  CHECK(gpus.type == DataType::bf16);

  CHECK_THROWS_WITH(parse_comm_bench_flags({"--op=all_to_all"}, no_gpu()),
                    Catch::StartsWith("--op=all_to_all: unknown collective"));
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--device=gpu"}, no_gpu()), Catch::StartsWith("--device=gpu: no CUDA GPU"));
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--num_gpus=3"}, DeviceInventory{2, ""}),
                    Catch::StartsWith("--num_gpus=3: only 2"));
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--iters"}, no_gpu()), "--iters: missing a value; e.g. --iters=N");
  // The wording every command shares (cli/flag_reader.h).
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--iter=3"}, no_gpu()),
                    "--iter=3: unknown flag; did you mean --iters? dpbench comm_bench --help lists the accepted flags");
  CHECK_THROWS_WITH(parse_comm_bench_flags({"stray"}, no_gpu()),
                    "unexpected argument 'stray'; flags take the form --name=value (see dpbench comm_bench --help)");
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--iters=3", "--iters=4"}, no_gpu()),
                    "--iters is given twice, as 3 and as 4; give it once");
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--json="}, no_gpu()), "--json: empty value; e.g. --json=FILE");
  CHECK(parse_comm_bench_flags({"-iters", "3", "--iters=3", "--device=cpu"}, no_gpu()).iters == 3);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--op=all_to_all"},
                                             {"--device=cpu", "--min_bytes=4K", "--max_bytes=1K"},
                                             {"--device=cpu", "--iters=0"},
                                             {"--device=cpu", "--warmup_iters=-1"},
                                             {"--device=cpu", "--num_gpus=65"},
                                             {"--device=cpu", "--bogus=1"},
                                             {"--device=cpu", "stray"}}) {
    std::vector<std::string> command = {"comm_bench"};
    command.insert(command.end(), args.begin(), args.end());
    INFO(args.back());
    CHECK(run_cli(command) == 2);
  }
}

TEST_CASE("comm_bench measures all_reduce on 2 reference devices and writes the rows", "[comm_bench]") {
  TempDir dir;
  const std::string json_path = dir.file("comm.json");
  std::string printed;
  {
    CapturedStdout captured(dir.file("stdout.txt"));
    const int code = run_cli({"comm_bench", "--device=cpu", "--num_gpus=2", "--min_bytes=1K", "--max_bytes=4K",
                              "--iters=3", "--warmup_iters=1", "--json=" + json_path});
    printed = captured.text();
    REQUIRE(code == 0);
  }
  const nlohmann::json result = read_json(json_path);
  CHECK(result["communicator"] == "in-process");
  CHECK(result["environment"]["backend"] == "reference");
  CHECK(result["environment"]["devices"].size() == 2);
  CHECK(result["config"]["op"] == "all_reduce");
  CHECK(result["config"]["backend"] == "reference");
  // What a curve of `dpbench predict --curves` needs: the ranks and the link they spanned (the
  // reference backend's devices are threads of one process, on one host).
  CHECK(result["ranks"] == 2);
  CHECK(result["hosts"] == 1);
  CHECK(result["link"] == "intra_host");
  CHECK(result["busbw_factor"].get<double>() == 1.0);  // 2(n-1)/n with n = 2
  const nlohmann::json& rows = result["rows"];
  REQUIRE(rows.size() == 3);
  const size_t sizes[] = {1024, 2048, 4096};
  for (size_t i = 0; i < 3; ++i) {
    INFO("row " << i);
    const nlohmann::json& row = rows[i];
    CHECK(row["size_bytes"] == sizes[i]);
    CHECK(row["count"] == sizes[i] / 4);
    CHECK(row["type"] == "fp32");
    const double time_us = row["time_us"], algbw = row["algbw_gbps"], busbw = row["busbw_gbps"];
    CHECK(time_us > 0);
    CHECK(algbw == Approx(sizes[i] / (time_us * 1e-6) / 1e9));
    CHECK(busbw == Approx(algbw));
    // The printed row: size, count and type in their fixed-width columns.
    char start[64];
    std::snprintf(start, sizeof start, "%12zu  %12zu  %6s", sizes[i], sizes[i] / 4, "fp32");
    CHECK_THAT(printed, Catch::Contains(start));
  }
  CHECK_THAT(printed, Catch::Contains("in-process"));
  CHECK_THAT(printed, Catch::Contains("(elements)"));
  CHECK_THAT(printed, Catch::Contains("Avg bus bandwidth"));
}

TEST_CASE("comm_bench sizes all_gather by the whole gathered buffer, as nccl-tests", "[comm_bench]") {
  TempDir dir;
  const std::string json_path = dir.file("gather.json");
  REQUIRE(run_cli({"comm_bench", "--device=cpu", "--num_gpus=3", "--op=all_gather", "--data_type=fp16",
                   "--min_bytes=1K", "--max_bytes=1K", "--iters=2", "--warmup_iters=0", "--json=" + json_path}) == 0);
  const nlohmann::json rows = read_json(json_path)["rows"];
  REQUIRE(rows.size() == 1);
  // 1024 B of fp16 over 3 ranks: 170 elements per rank, 3 * 170 * 2 = 1020 B in all.
  CHECK(rows[0]["count"] == 170);
  CHECK(rows[0]["size_bytes"] == 1020);
  CHECK(rows[0]["type"] == "fp16");
  CHECK(rows[0]["busbw_gbps"].get<double>() == Approx(rows[0]["algbw_gbps"].get<double>() * 2.0 / 3.0));
}

TEST_CASE("comm_bench checks every collective's result in every type on the reference backend", "[comm_bench]") {
  // A wrong result throws (exit code 1) before any bandwidth is printed; these must all pass it.
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "reduce", "broadcast"}) {
    for (const char* type : {"fp32", "fp16", "bf16"}) {
      INFO(op << " " << type);
      CHECK(run_cli({"comm_bench", "--device=cpu", "--num_gpus=4", std::string("--op=") + op,
                     std::string("--data_type=") + type, "--min_bytes=64", "--max_bytes=256", "--iters=1",
                     "--warmup_iters=0"}) == 0);
    }
  }
}

namespace {

// The in-process communicator with one wrong element in rank 1's all-reduce results.
class OffByOneCommunicator final : public Communicator {
 public:
  explicit OffByOneCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int size() const override { return inner_->size(); }
  std::string description() const override { return "off-by-one"; }
  bool capturable() const override { return false; }
  void all_reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                  StreamKind stream) override {
    inner_->all_reduce(rank, send, recv, count, type, op, stream);
    if (rank == 1 && count > 0) store_from_float(type, recv, count - 1, load_as_float(type, recv, count - 1) + 1.0f);
  }
  void reduce(int rank, const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              StreamKind stream) override {
    inner_->reduce(rank, send, recv, count, type, op, root, stream);
  }
  void broadcast(int rank, const void* send, void* recv, size_t count, DataType type, int root,
                 StreamKind stream) override {
    inner_->broadcast(rank, send, recv, count, type, root, stream);
  }
  void reduce_scatter(int rank, const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                      StreamKind stream) override {
    inner_->reduce_scatter(rank, send, recv, recv_count, type, op, stream);
  }
  void all_gather(int rank, const void* send, void* recv, size_t send_count, DataType type,
                  StreamKind stream) override {
    inner_->all_gather(rank, send, recv, send_count, type, stream);
  }
  void all_to_all(int rank, const void* send, void* recv, size_t chunk_count, DataType type,
                  StreamKind stream) override {
    inner_->all_to_all(rank, send, recv, chunk_count, type, stream);
  }
  void abort() override { inner_->abort(); }

 private:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace

TEST_CASE("comm_bench refuses to report the bandwidth of a communicator that computes wrong values", "[comm_bench]") {
  CommBenchOptions options = parse_comm_bench_flags(
      {"--device=cpu", "--num_gpus=2", "--min_bytes=64", "--max_bytes=1K", "--iters=2", "--warmup_iters=0"}, no_gpu());
  auto broken = [](const std::vector<Device*>& devices) -> std::unique_ptr<Communicator> {
    return std::make_unique<OffByOneCommunicator>(create_communicator(devices));
  };
  CHECK_THROWS_WITH(run_comm_bench(options, broken),
                    Catch::Contains("wrong values") && Catch::Contains("rank 1 element 15") &&
                        Catch::Contains("no bandwidth is reported"));
  // The same run through the real communicator passes the check and measures every size.
  CHECK(run_comm_bench(options).rows.size() == 5);
}

TEST_CASE("comm_bench measures each size a collective can move once, never a size twice", "[comm_bench]") {
  // 3 and 6 bytes of fp32 on 2 ranks are both one element: one row of 4 B, not two.
  CHECK(measured_sizes(Collective::all_reduce, 3, 100, 2, DataType::f32) == std::vector<size_t>{4, 12, 24, 48, 96});
  // Below one element per rank a scatter moves one per rank: 3, 6 and 12 B on 3 ranks are all 12.
  CHECK(measured_sizes(Collective::reduce_scatter, 3, 100, 3, DataType::f32) ==
        std::vector<size_t>{12, 24, 48, 96});
  // Every collective, type and rank count from 2 to 8: ascending, each what one call moves (so
  // sizing it again changes nothing), none past the largest size asked for but where one call
  // moves more.
  for (Collective collective : benchmarked_collectives())
    for (DataType type : {DataType::f32, DataType::f16, DataType::bf16})
      for (int ranks = 2; ranks <= 8; ++ranks)
        for (size_t min_bytes : {size_t{1}, size_t{3}, size_t{7}, size_t{1000}}) {
          INFO(collective_name(collective) << " " << data_type_name(type) << " " << ranks << " ranks from "
                                                 << min_bytes << " B");
          const size_t max_bytes = 1 << 16;
          const std::vector<size_t> sizes = measured_sizes(collective, min_bytes, max_bytes, ranks, type);
          REQUIRE(!sizes.empty());
          for (size_t i = 0; i < sizes.size(); ++i) {
            CHECK(shape_of(collective, sizes[i], ranks, type).size_bytes == sizes[i]);
            if (i > 0) CHECK(sizes[i] > sizes[i - 1]);
            if (i > 0) CHECK(sizes[i] <= max_bytes);
          }
        }
}

TEST_CASE("a comm_bench of sizes below one element per rank writes a curve predict takes", "[comm_bench]") {
  TempDir dir;
  const std::string json_path = dir.file("scatter.json");
  REQUIRE(run_cli({"comm_bench", "--device=cpu", "--num_gpus=3", "--op=reduce_scatter", "--min_bytes=3",
                   "--max_bytes=100", "--iters=1", "--warmup_iters=0", "--json=" + json_path}) == 0);
  const nlohmann::json written = read_json(json_path);
  std::vector<size_t> sizes;
  for (const nlohmann::json& row : written["rows"]) sizes.push_back(row["size_bytes"].get<size_t>());
  CHECK(sizes == std::vector<size_t>{12, 24, 48, 96});
  const CollectiveCurve curve = load_collective_curve(json_path);
  CHECK(curve.points.size() == 4);
}

TEST_CASE("comm_bench --compute_shape takes three positive whole numbers MxNxK", "[comm_bench]") {
  const GemmShape shape = parse_gemm_shape("compute_shape", "16384x3072x768");
  CHECK(shape.m == 16384);
  CHECK(shape.n == 3072);
  CHECK(shape.k == 768);
  CHECK(gemm_shape_text(shape) == "16384x3072x768");
  CHECK(gemm_shape_text(GemmShape{}) == "16384x3072x768");  // gpt-124m's MLP GEMM, the default
  CHECK(parse_gemm_shape("compute_shape", "1x1x1").k == 1);
  for (const char* bad : {"", "x", "16384x3072", "16384x3072x768x2", "0x3072x768", "-1x3072x768", "16384x3072x",
                          "16384X3072X768", "1.5x2x3", " 1x2x3", "99999999999x1x1", "65536x65536x1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_gemm_shape("compute_shape", bad),
                      Catch::StartsWith("--compute_shape=" + std::string(bad) + ": "));
  }
}

TEST_CASE("comm_bench --beside_compute is off by default, parsed on GPUs and refused on the reference backend",
          "[comm_bench]") {
  const CommBenchOptions plain = parse_comm_bench_flags({}, DeviceInventory{2, ""});
  CHECK_FALSE(plain.beside_compute);
  const CommBenchOptions beside =
      parse_comm_bench_flags({"--beside_compute", "--compute_shape=4096x1024x512"}, DeviceInventory{2, ""});
  CHECK(beside.beside_compute);
  CHECK(beside.compute_shape.m == 4096);
  CHECK(beside.compute_shape.n == 1024);
  CHECK(beside.compute_shape.k == 512);
  CHECK(parse_comm_bench_flags({"--beside_compute=false"}, DeviceInventory{2, ""}).beside_compute == false);
  const std::string needs_gpu = "--beside_compute needs a GPU: the reference backend runs a device's streams one "
                                "after another; drop --beside_compute or use --device=gpu";
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--beside_compute", "--device=cpu"}, DeviceInventory{2, ""}), needs_gpu);
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--beside_compute"}, no_gpu()), needs_gpu);  // --device=auto, no GPU
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--compute_shape=1x2x3"}, DeviceInventory{2, ""}),
                    Catch::StartsWith("--compute_shape=1x2x3: the GEMM of --beside_compute, which is off"));
  CHECK_THROWS_WITH(parse_comm_bench_flags({"--beside_compute", "--compute_shape=1x2"}, DeviceInventory{2, ""}),
                    Catch::StartsWith("--compute_shape=1x2: accepted: three positive whole numbers"));
  // The whole command: exit code 2, and no JSON written.
  TempDir dir;
  const std::string json_path = dir.file("beside.json");
  CHECK(run_cli({"comm_bench", "--device=cpu", "--beside_compute", "--json=" + json_path}) == 2);
  CHECK_FALSE(std::ifstream(json_path).good());
}

TEST_CASE("comm_bench's JSON carries the beside-compute figures, and predict reads the slowdown", "[comm_bench]") {
  CommBenchOptions options = parse_comm_bench_flags({"--op=all_gather"}, DeviceInventory{2, ""});
  CommBenchResult result;
  result.communicator = "nccl 2.28.9";
  result.ranks = 2;
  result.hosts = {"a", "a"};
  for (size_t bytes : {size_t{1} << 20, size_t{1} << 21}) {
    CommBenchRow row;
    row.size_bytes = bytes;
    row.count = bytes / 8;
    row.time_us = 20;
    row.algbw_gbps = 50;
    row.busbw_gbps = 25;
    row.compute_alone_us = 1000;
    row.compute_beside_us = bytes == (size_t{1} << 20) ? 1050 : 1100;
    row.compute_slowdown = row.compute_beside_us / row.compute_alone_us - 1;
    row.time_beside_compute_us = 30;
    row.busbw_beside_compute_gbps = 16.5;
    result.rows.push_back(row);
  }
  const EnvironmentRecord environment;
  // Without --beside_compute the rows are as before: no beside-compute fields.
  const nlohmann::json plain = comm_bench_json(options, result, environment);
  CHECK(plain["config"]["beside_compute"] == false);
  CHECK_FALSE(plain["rows"][0].contains("compute_slowdown"));
  CHECK_FALSE(parse_collective_curve(plain, "plain.json").points[0].compute_slowdown.has_value());

  options.beside_compute = true;
  options.compute_shape = GemmShape{4096, 1024, 512};
  const nlohmann::json beside = comm_bench_json(options, result, environment);
  CHECK(beside["config"]["beside_compute"] == true);
  CHECK(beside["config"]["compute_shape"] == "4096x1024x512");
  const nlohmann::json& row = beside["rows"][1];
  CHECK(row["compute_alone_us"].get<double>() == 1000);
  CHECK(row["compute_beside_us"].get<double>() == 1100);
  CHECK(row["compute_slowdown"].get<double>() == Approx(0.1));
  CHECK(row["time_beside_compute_us"].get<double>() == 30);
  CHECK(row["busbw_beside_compute_gbps"].get<double>() == 16.5);
  const CollectiveCurve curve = parse_collective_curve(beside, "beside.json");
  REQUIRE(curve.points.size() == 2);
  CHECK(*curve.points[0].compute_slowdown == Approx(0.05));
  CHECK(*curve.points[1].compute_slowdown == Approx(0.1));
  CHECK_THAT(describe_curve(curve), Catch::Contains("compute beside it slowed 5.0% to 10.0%"));

  // The printed table gains its columns only under --beside_compute.
  CHECK_THAT(format_comm_bench_header(true), Catch::Contains("slowdown"));
  CHECK_THAT(format_comm_bench_header(false), !Catch::Contains("slowdown"));
  CHECK_THAT(format_comm_bench_row(result.rows[1], DataType::bf16, true), Catch::Contains("10.0"));
  CHECK(format_comm_bench_row(result.rows[1], DataType::bf16, false) ==
        format_comm_bench_row(result.rows[1], DataType::bf16));
}
