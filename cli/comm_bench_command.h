// `dpbench comm_bench`: an nccl-tests style measurement of one collective through dpbench's own
// Communicator (NCCL on GPUs, the in-process one on reference devices): buffer sizes doubling
// from --min_bytes to --max_bytes, each timed over --iters calls after --warmup_iters, printed as
// a fixed-width table of time, algorithm bandwidth and bus bandwidth, optionally saved as JSON.
// Started by a launcher (mpirun, srun, torchrun), each process is one rank with one device, and the
// collective runs across the job's processes and hosts; the JSON says which link the ranks spanned.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/comm_bench_collectives.h"
#include "cli/flag_reader.h"
#include "cli/flags.h"
#include "cli/run_config.h"
#include "engine/backend/device.h"
#include "engine/communication/communicator.h"
#include "engine/data_type.h"

namespace dpbench {

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
};

// `dpbench comm_bench`'s flags: what it reads, what --help lists, what shell completion offers.
FlagTable comm_bench_flag_table();

// `args` excludes "comm_bench". Throws ConfigError with one line naming the flag and the value.
CommBenchOptions parse_comm_bench_flags(const std::vector<std::string>& args, const DeviceInventory& inventory);
std::string comm_bench_help_text();

// "4096", "64K", "1M", "1G" (K, M, G: powers of 2) -> bytes, at least 1; ConfigError naming `flag`.
size_t parse_byte_size(const std::string& flag, const std::string& text);


// The table's column header and one row, fixed width as nccl-tests prints them.
std::string format_comm_bench_header();
std::string format_comm_bench_row(const CommBenchRow& row, DataType type);

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

// The subcommand: parse, run, print, write the JSON. Errors propagate to dpbench_main.
void run_comm_bench_command(const std::vector<std::string>& args, const DeviceInventory& inventory);

}  // namespace dpbench
