// `dpbench comm_bench`: an nccl-tests style measurement of one collective through dpbench's own
// Communicator (NCCL on GPUs, the in-process one on reference devices): buffer sizes doubling
// from --min_bytes to --max_bytes, each timed over --iters calls after --warmup_iters, printed as
// a fixed-width table of time, algorithm bandwidth and bus bandwidth, optionally saved as JSON.
// Started by a launcher (mpirun, srun, torchrun), each process is one rank with one device, and the
// collective runs across the job's processes and hosts; the JSON says which link the ranks spanned.
// With --beside_compute it also measures how a GEMM on the compute stream and the collective on
// the communication stream slow each other when they run at once (Note [compute beside a
// collective] in comm_bench_command.cpp): what `dpbench predict` charges compute overlapped by
// communication.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/comm_bench_collectives.h"
#include "cli/environment_record.h"
#include "cli/flag_reader.h"
#include "cli/flags.h"
#include "cli/run_config.h"
#include "engine/backend/device.h"
#include "engine/communication/communicator.h"
#include "engine/data_type.h"

namespace dpbench {

// A GEMM's shape, C (m, n) = A (m, k) B (k, n).
struct GemmShape {
  int m = 16384, n = 3072, k = 768;  // gpt-124m's MLP GEMM at batch 16 x 1024 tokens
};
std::string gemm_shape_text(const GemmShape& shape);  // "16384x3072x768", as --compute_shape takes it

struct CommBenchOptions {
  Collective collective = Collective::all_reduce;
  DataType type = DataType::f32;
  std::string device = "auto";  // as given: auto | gpu | cpu
  BackendKind backend = BackendKind::reference;
  int num_devices = 1;       // this process's devices, one rank each
  int first_device = 0;      // the index of the first (under a launcher: the host-local rank's)
  bool across_processes = false;  // under a launcher with several processes: one rank per process
  size_t min_bytes = size_t{1} << 20;
  size_t max_bytes = size_t{1} << 30;
  int iters = 20;
  int warmup_iters = 5;
  std::string json_file;  // empty: no JSON
  bool beside_compute = false;  // also time a bf16 GEMM of compute_shape beside each collective
  GemmShape compute_shape;
  bool help = false;
  bool fell_back_to_reference = false;  // --device=auto found no GPU
};

// One measured size.
struct CommBenchRow {
  size_t size_bytes = 0;  // the bytes nccl-tests reports for the collective (see collective_bus_factor)
  size_t count = 0;       // elements per call argument: the buffer, or one rank's chunk (gather, scatter)
  double time_us = 0;     // per call, the slowest rank's
  double algbw_gbps = 0;  // size_bytes / time, GB/s (1e9 bytes)
  double busbw_gbps = 0;  // algbw * collective_bus_factor
  // Under --beside_compute (else 0), each the slowest rank's: one GEMM's time alone and while the
  // collective runs beside it, the fraction it is slowed by, and the collective's time and bus
  // bandwidth while the GEMM runs beside it.
  double compute_alone_us = 0;
  double compute_beside_us = 0;
  double compute_slowdown = 0;  // compute_beside_us / compute_alone_us - 1
  double time_beside_compute_us = 0;
  double busbw_beside_compute_gbps = 0;
};

// `dpbench comm_bench`'s flags: what it reads, what --help lists, what shell completion offers.
FlagTable comm_bench_flag_table();

// `args` excludes "comm_bench". Throws ConfigError with one line naming the flag and the value.
CommBenchOptions parse_comm_bench_flags(const std::vector<std::string>& args, const DeviceInventory& inventory);
std::string comm_bench_help_text();

// "4096", "64K", "1M", "1G" (K, M, G: powers of 2) -> bytes, at least 1; ConfigError naming `flag`.
size_t parse_byte_size(const std::string& flag, const std::string& text);


// "MxNxK" -> the shape; ConfigError naming `flag` unless three positive whole numbers, each matrix
// at most 2^31 elements (cuBLAS's int sizes).
GemmShape parse_gemm_shape(const std::string& flag, const std::string& text);

// The table's column header and one row, fixed width as nccl-tests prints them; `beside_compute`
// adds the columns of --beside_compute.
std::string format_comm_bench_header(bool beside_compute = false);
std::string format_comm_bench_row(const CommBenchRow& row, DataType type, bool beside_compute = false);

struct CommBenchResult {
  std::vector<CommBenchRow> rows;  // one per size, smallest first
  std::string communicator;        // Communicator::description(): "nccl 2.28.9", "in-process"
  std::vector<DeviceDescription> devices;  // this process's
  int ranks = 0;                   // in the whole collective (every process's)
  std::vector<std::string> hosts;  // each rank's host, by rank
};

using CommunicatorFactory = std::function<std::unique_ptr<Communicator>(const std::vector<Device*>&)>;
// Across the job's processes under a launcher (this process's one device), else over `devices`.
std::unique_ptr<Communicator> comm_bench_communicator(const std::vector<Device*>& devices);

// Runs the measurement (printing as it goes). Throws RuntimeError when a result check fails: a
// broken communicator must not report a bandwidth. `make_communicator` lets a test measure a
// communicator of its own.
CommBenchResult run_comm_bench(const CommBenchOptions& options,
                               const CommunicatorFactory& make_communicator = comm_bench_communicator);

// What --json writes, the file `dpbench predict --curves` reads (reports/collective_curves.h).
nlohmann::json comm_bench_json(const CommBenchOptions& options, const CommBenchResult& result,
                               const EnvironmentRecord& environment);

// The subcommand: parse, run, print, write the JSON. Errors propagate to dpbench_main.
void run_comm_bench_command(const std::vector<std::string>& args, const DeviceInventory& inventory);

}  // namespace dpbench
