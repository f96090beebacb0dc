// `dpbench comm_bench` (see the header): flags, the timed loop on one thread per rank (or one
// process per rank under a launcher) over the collectives of cli/comm_bench_collectives.h, and
// output.
#include "cli/comm_bench_command.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/environment_record.h"
#include "cli/flag_limits.h"
#include "cli/flag_parsing.h"
#include "cli/flag_reader.h"
#include "cli/flags_validation.h"
#include "cli/log.h"
#include "engine/backend/backend.h"
#include "engine/backends.h"
#include "engine/communication/communicator.h"
#include "engine/communication/process_group.h"
#include "engine/communication/thread_barrier.h"
#include "engine/errors.h"
#include "engine/machine/environment.h"
#include "engine/machine/path_identity.h"
#include "reports/result_json.h"
#include "reports/step_prediction.h"
#include "reports/text_file.h"
#include "dpbench_version.h"

namespace dpbench {
namespace {

// Under a launcher only rank 0 speaks (the table, the notes); the others stay quiet.
bool speaks() { return process_group() == nullptr || process_group()->rank() == 0; }
void print(const std::string& text) {
  if (speaks()) log_lines(output_log(), text);
}

// --op's names: the collectives comm_bench measures.
std::vector<std::string> benchmarked_collective_names() {
  std::vector<std::string> names;
  for (Collective collective : benchmarked_collectives()) names.push_back(collective_name(collective));
  return names;
}

}  // namespace

FlagTable comm_bench_flag_table() {
  const CommBenchOptions defaults;
  FlagTable table;
  table.command = "comm_bench";
  table.flags = {
      {"op", "", "NAME",
       "collective: all_reduce (sum), all_gather, reduce_scatter (sum), reduce (sum to root 0), broadcast (root 0)",
       std::string(collective_name(defaults.collective)), FlagKind::value, benchmarked_collective_names()},
      {"data_type", "", "fp32|fp16|bf16", "element type", std::string("fp32")},
      {"device", "", "auto|gpu|cpu", "gpu = NCCL, cpu = the reference backend's in-process communicator",
       defaults.device},
      {"num_gpus", "", "N",
       "ranks, one per device (default: every GPU; reference backend: 2); under mpirun, srun or torchrun: one per "
       "process"},
      {"min_bytes", "", "SIZE", "smallest size, e.g. 4096, 64K, 1M (K, M, G = powers of 2)", std::string("1M")},
      {"max_bytes", "", "SIZE", "largest size; sizes double from min_bytes up to it", std::string("1G")},
      {"iters", "", "N", "timed calls per size", std::to_string(defaults.iters)},
      {"warmup_iters", "", "N", "untimed calls per size before them", std::to_string(defaults.warmup_iters)},
      {"json", "", "FILE",
       "also write the rows, ranks and link (intra_host, inter_host) as JSON to FILE (atomically); dpbench predict "
       "--curves reads it"},
      {"beside_compute", "", "BOOL",
       "also time a bf16 GEMM on the compute stream alone and beside the collective, and the collective beside it: "
       "how much each slows the other (GPUs only); dpbench predict charges compute that slowdown",
       defaults.beside_compute ? "true" : "false", FlagKind::boolean},
      {"compute_shape", "", "MxNxK", "the GEMM of --beside_compute: C (M x N) = A (M x K) B (K x N)",
       gemm_shape_text(defaults.compute_shape)},
  };
  return table;
}

namespace {

std::string format_time_us(double us) {
  char text[32];
  std::snprintf(text, sizeof text, us >= 10000.0 ? "%.0f" : us >= 100.0 ? "%.1f" : "%.2f", us);
  return text;
}

// Note [comm_bench ranks]
// The ranks of one measurement are this process's devices, one host thread each, or, under a
// launcher, the job's processes, one device each (the communicator then spans processes and
// hosts, as `dpbench run` does). Between timed sections they meet to check results and to take
// the slowest rank's time; a meeting is also the barrier that starts every rank's clock with
// every device idle.
class RankMeeting {
 public:
  virtual ~RankMeeting() = default;
  // Every rank's `mine`, by rank, once every rank has given its own.
  virtual std::vector<std::string> gather_texts(int local_rank, const std::string& mine) = 0;
  virtual std::vector<double> gather_numbers(int local_rank, double mine) = 0;
  virtual void abort() {}  // a rank failed: release the others instead of leaving them waiting
};

class ThreadMeeting final : public RankMeeting {
 public:
  explicit ThreadMeeting(int ranks) : barrier_(ranks), texts_(ranks), numbers_(ranks) {}
  std::vector<std::string> gather_texts(int local_rank, const std::string& mine) override {
    return gather(texts_, local_rank, mine);
  }
  std::vector<double> gather_numbers(int local_rank, double mine) override { return gather(numbers_, local_rank, mine); }
  void abort() override { barrier_.abort(); }

 private:
  template <typename T>
  std::vector<T> gather(std::vector<T>& slots, int local_rank, const T& mine) {
    slots[static_cast<size_t>(local_rank)] = mine;
    barrier_.arrive_and_wait();
    std::vector<T> all = slots;
    barrier_.arrive_and_wait();  // every rank has read the slots before the next meeting writes them
    return all;
  }
  ThreadBarrier barrier_;
  std::vector<std::string> texts_;
  std::vector<double> numbers_;
};

// A failing process ends the whole job (cli/main.cpp), so there is nothing to release here.
class ProcessMeeting final : public RankMeeting {
 public:
  explicit ProcessMeeting(const ProcessGroup& group) : group_(group) {}
  std::vector<std::string> gather_texts(int, const std::string& mine) override { return group_.all_gather_text(mine); }
  std::vector<double> gather_numbers(int, double mine) override {
    std::vector<double> all(static_cast<size_t>(group_.size()));
    group_.all_gather_bytes(&mine, sizeof mine, all.data());
    return all;
  }

 private:
  const ProcessGroup& group_;
};

}  // namespace

size_t parse_byte_size(const std::string& flag, const std::string& text) {
  const std::string accepted = "accepted: a positive number of bytes, with an optional K, M or G (powers of 2), e.g. 64K";
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  unsigned long long value = 0;
  if (digits == 0 || std::from_chars(text.data(), text.data() + digits, value).ec != std::errc()) {
    reject(flag, text, accepted);
  }
  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) reject(flag, text, accepted);
  if (value == 0) reject(flag, text, accepted);
  if (value > (kMaxBenchBytes >> shift)) reject(flag, text, "too large; accepted: up to 1024G");
  return static_cast<size_t>(value << shift);
}

std::string gemm_shape_text(const GemmShape& shape) {
  return std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k);
}

GemmShape parse_gemm_shape(const std::string& flag, const std::string& text) {
  const std::string accepted = "accepted: three positive whole numbers MxNxK, e.g. 16384x3072x768";
  int dimensions[3] = {0, 0, 0};
  size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t end = i < 2 ? text.find('x', at) : text.size();
    if (end == std::string::npos) reject(flag, text, accepted);
    const std::string part = text.substr(at, end - at);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::from_chars(part.data(), part.data() + part.size(), dimensions[i]).ec != std::errc() ||
        dimensions[i] < 1)
      reject(flag, text, accepted);
    at = end + 1;
  }
  const GemmShape shape{dimensions[0], dimensions[1], dimensions[2]};
  const auto elements = [](int rows, int columns) { return static_cast<long long>(rows) * columns; };
  constexpr long long kMaxMatrixElements = 1LL << 31;
  if (elements(shape.m, shape.k) > kMaxMatrixElements || elements(shape.k, shape.n) > kMaxMatrixElements ||
      elements(shape.m, shape.n) > kMaxMatrixElements)
    reject(flag, text, "too large; accepted: each of A (MxK), B (KxN) and C (MxN) at most 2^31 elements");
  return shape;
}

CommBenchOptions parse_comm_bench_flags(const std::vector<std::string>& args, const DeviceInventory& inventory) {
  CommBenchOptions options;
  const ReadFlags flags = read_flags(comm_bench_flag_table(), args);
  options.help = flags.help();
  if (options.help) return options;
  auto text = [&](const std::string& name) { return flags.text(name); };

  const std::string op = text("op");
  const std::vector<Collective> collectives = benchmarked_collectives();
  const auto collective = std::find_if(collectives.begin(), collectives.end(),
                                       [&](Collective c) { return op == collective_name(c); });
  if (collective == collectives.end()) {
    std::string accepted;
    for (Collective c : collectives) accepted += std::string(accepted.empty() ? "" : ", ") + collective_name(c);
    reject("op", op, "unknown collective; accepted: " + accepted);
  }
  options.collective = *collective;

  const std::string type = text("data_type");
  require_one_of("data_type", type, {"fp32", "fp16", "bf16"}, "type");
  options.type = type == "fp16" ? DataType::f16 : type == "bf16" ? DataType::bf16 : DataType::f32;

  options.device = text("device");
  require_one_of("device", options.device, {"auto", "gpu", "cpu"}, "device");
  if (options.device == "gpu" && inventory.cuda_gpus <= 0) {
    const std::string why = inventory.why_no_gpu.empty() ? "" : " (" + inventory.why_no_gpu + ")";
    throw ConfigError("--device=gpu: no CUDA GPU is present" + why + "; use --device=cpu for the reference backend");
  }
  const bool on_gpu = options.device == "gpu" || (options.device == "auto" && inventory.cuda_gpus > 0);
  options.backend = on_gpu ? BackendKind::cuda : BackendKind::reference;
  options.fell_back_to_reference = options.device == "auto" && !on_gpu;
  const int device_limit = on_gpu ? inventory.cuda_gpus : kMaxReferenceDevices;
  const ProcessGroup* group = process_group();
  options.across_processes = group != nullptr && group->size() > 1;
  const std::string num_gpus = flags.given("num_gpus")
                                   ? text("num_gpus")
                                   : std::to_string(options.across_processes ? 1 : on_gpu ? inventory.cuda_gpus : 2);
  options.num_devices = parse_int_at_least("num_gpus", num_gpus, 1, "must be at least 1");
  if (options.across_processes) {
    if (options.num_devices != 1)
      reject("num_gpus", num_gpus,
             "under " + group->launcher() + " each process is one rank with one device (this job: " +
                 std::to_string(group->size()) + " ranks); drop --num_gpus or give 1");
    // As `dpbench run` places a rank: a process that sees one GPU takes it, else its host-local rank's.
    options.first_device = on_gpu && inventory.cuda_gpus == 1 ? 0 : group->local_rank();
    if (options.first_device >= device_limit)
      throw ConfigError("this host runs more processes than it has " + std::string(on_gpu ? "GPUs" : "devices") +
                        ": local rank " + std::to_string(options.first_device) + " (from " + group->launcher() +
                        "'s variables), " + std::to_string(device_limit) + " visible; start at most that many "
                        "ranks per host, or give each process one GPU (CUDA_VISIBLE_DEVICES)");
  } else if (options.num_devices > device_limit) {
    reject("num_gpus", num_gpus,
           on_gpu ? "only " + std::to_string(device_limit) + " CUDA GPU(s) present"
                  : "the reference backend runs at most " + std::to_string(device_limit) + " devices");
  }

  options.min_bytes = parse_byte_size("min_bytes", text("min_bytes"));
  options.max_bytes = parse_byte_size("max_bytes", text("max_bytes"));
  if (options.min_bytes > options.max_bytes) {
    throw ConfigError("--min_bytes=" + text("min_bytes") + " is larger than --max_bytes=" + text("max_bytes") +
                      "; sizes double from min_bytes up to max_bytes");
  }
  options.iters = parse_int_at_least("iters", text("iters"), 1, "must be at least 1", kMaxBenchIterations);
  options.warmup_iters =
      parse_int_at_least("warmup_iters", text("warmup_iters"), 0, "must be at least 0", kMaxBenchIterations);
  options.json_file = text("json");
  options.beside_compute = parse_bool("beside_compute", text("beside_compute"));
  options.compute_shape = parse_gemm_shape("compute_shape", text("compute_shape"));
  if (flags.given("compute_shape") && !options.beside_compute)
    throw ConfigError("--compute_shape=" + text("compute_shape") +
                      ": the GEMM of --beside_compute, which is off; add --beside_compute or drop --compute_shape");
  if (options.beside_compute && !on_gpu)
    throw ConfigError("--beside_compute needs a GPU: the reference backend runs a device's streams one after "
                      "another; drop --beside_compute or use --device=gpu");
  // Rank 0 writes the JSON; another host need not have its folder.
  const bool writes = group == nullptr || group->rank() == 0;
  if (!options.json_file.empty() && writes) check_output_path(options.json_file, "--json");
  return options;
}

std::string comm_bench_help_text() {
  return "usage: dpbench comm_bench [flags]\n"
         "Times one collective through dpbench's communicator (NCCL on GPUs) over doubling sizes,\n"
         "as nccl-tests does: time per call (slowest rank), algbw = size / time, busbw (see README).\n\n" +
         flag_table_help(comm_bench_flag_table()) +
         "\nExample: dpbench comm_bench --num_gpus=8 --min_bytes=8 --max_bytes=8G\n";
}

std::string format_comm_bench_header(bool beside_compute) {
  char text[600];
  std::snprintf(text, sizeof text, "# %10s  %12s  %6s  %9s  %8s  %8s", "size", "count", "type", "time", "algbw",
                "busbw");
  std::string header = text;
  // Beside compute: the GEMM alone and beside the collective, its slowdown, and the collective's
  // time and bus bandwidth beside the GEMM.
  if (beside_compute) {
    std::snprintf(text, sizeof text, "  %9s  %9s  %8s  %9s  %8s", "gemm", "gemm+coll", "slowdown", "coll+gemm",
                  "busbw");
    header += text;
  }
  std::snprintf(text, sizeof text, "\n# %10s  %12s  %6s  %9s  %8s  %8s", "(B)", "(elements)", "", "(us)", "(GB/s)",
                "(GB/s)");
  header += text;
  if (beside_compute) {
    std::snprintf(text, sizeof text, "  %9s  %9s  %8s  %9s  %8s", "(us)", "(us)", "(%)", "(us)", "(GB/s)");
    header += text;
  }
  return header + "\n";
}

std::string format_comm_bench_row(const CommBenchRow& row, DataType type, bool beside_compute) {
  char text[300];
  std::snprintf(text, sizeof text, "%12zu  %12zu  %6s  %9s  %8.2f  %8.2f", row.size_bytes, row.count,
                data_type_name(type), format_time_us(row.time_us).c_str(), row.algbw_gbps, row.busbw_gbps);
  std::string line = text;
  if (beside_compute) {
    std::snprintf(text, sizeof text, "  %9s  %9s  %8.1f  %9s  %8.2f", format_time_us(row.compute_alone_us).c_str(),
                  format_time_us(row.compute_beside_us).c_str(), row.compute_slowdown * 100.0,
                  format_time_us(row.time_beside_compute_us).c_str(), row.busbw_beside_compute_gbps);
    line += text;
  }
  return line + "\n";
}

std::unique_ptr<Communicator> comm_bench_communicator(const std::vector<Device*>& devices) {
  const ProcessGroup* group = process_group();
  if (group != nullptr && group->size() > 1 && devices.size() == 1)
    return create_process_communicator(*devices.front(), *group);
  return create_communicator(devices);
}

namespace {

// What the ranks of one measurement share (Note [comm_bench ranks]).
struct Measurement {
  const CommBenchOptions& options;
  Communicator& comm;
  RankMeeting& meeting;
  int ranks = 0;       // in the whole collective
  int first_rank = 0;  // this process's first device's rank
  std::vector<size_t> sizes;  // measured_sizes
};

// The smallest and the largest size, each called once and checked on every rank before anything
// is timed. Every rank learns every rank's verdict before any gives up, so a wrong result stops
// all ranks together, none hanging in a collective the others have left, and no row is printed.
void check_before_timing(const Measurement& m, Device& device, int local, const void* send, void* recv) {
  std::vector<size_t> checked = {m.sizes.front()};
  if (m.sizes.size() > 1) checked.push_back(m.sizes.back());
  for (size_t bytes : checked) {
    const BenchShape shape = shape_of(m.options.collective, bytes, m.ranks, m.options.type);
    issue(m.comm, m.options.collective, local, send, recv, shape, m.options.type, StreamKind::communication);
    device.synchronize();
    const std::string mine =
        check_result(device, recv, m.options.collective, m.ranks, m.first_rank + local, shape, m.options.type);
    for (const std::string& problem : m.meeting.gather_texts(local, mine)) {
      if (!problem.empty()) {
        throw RuntimeError(std::string("comm_bench: ") + collective_name(m.options.collective) + " of " +
                           std::to_string(shape.size_bytes) + " B returned wrong values (" + problem +
                           "); no bandwidth is reported for a communicator that computes wrong results");
      }
    }
  }
}

// Note [compute beside a collective]
// With --beside_compute each size is measured three more ways on every rank, each a loop timed
// with events: the GEMM alone on the compute stream; the GEMM while the collective runs
// continuously on the communication stream; and the collective while the GEMM runs continuously.
// The loop that is timed (the covered one) must lie inside the other's activity, so the covering
// loop runs kLead of the covered loop's time alone before the covered loop may start (the covered
// stream waits for an event recorded after those calls), and lasts kCover times the covered
// loop's time alone in all, so that the covered loop stays inside it even slowed by half. The
// host issues the two loops interleaved, the covered one at twice the pace, so that neither
// stream waits for the host while the other runs. Events on both streams then check the cover
// (the covering loop ended after the covered one); a loop left uncovered on any rank is measured
// again with a covering loop twice as long. Each covered loop lasts about kPhaseMs alone (the
// collective's at least --iters calls): long against the events' resolution and a launch gap,
// short enough that the default sizes, 1M to 1G, take a few seconds per collective. All ranks
// derive the collective's call counts from the same gathered times, so they make the same calls.
constexpr double kPhaseMs = 25.0;
constexpr double kLead = 0.1;
constexpr double kCover = 1.5;
constexpr int kCoverAttempts = 3;

// Calls of `per_call_ms` each that last at least `ms` (at least one).
int calls_lasting(double ms, double per_call_ms) {
  if (!(per_call_ms > 0)) return 1;
  return static_cast<int>(std::clamp(std::ceil(ms / per_call_ms), 1.0, static_cast<double>(kMaxBenchIterations)));
}

// Issues `covering` calls of one loop and `covered` of the other, the covered ones at twice the pace.
void issue_interleaved(int covering, const std::function<void()>& cover, int covered,
                       const std::function<void()>& covered_call) {
  int issued = 0;
  for (int i = 0; i < covering; ++i) {
    cover();
    const long long due = std::min<long long>(covered, 2LL * covered * (i + 1) / covering);
    for (; issued < due; ++issued) covered_call();
  }
  for (; issued < covered; ++issued) covered_call();
}

// One rank's streams, events and GEMM operands for Note [compute beside a collective].
struct BesideCompute {
  Device& device;
  GemmShape shape;
  Buffer a, b, c;
  std::unique_ptr<Event> compute_start, compute_stop, comm_start, comm_stop, lead_done;

  BesideCompute(Device& d, const GemmShape& gemm_shape, int rank)
      : device(d), shape(gemm_shape),
        a(d.allocate(elements(shape.m, shape.k) * 2, tag())), b(d.allocate(elements(shape.k, shape.n) * 2, tag())),
        c(d.allocate(elements(shape.m, shape.n) * 2, tag())), compute_start(d.create_event(true)),
        compute_stop(d.create_event(true)), comm_start(d.create_event(true)), comm_stop(d.create_event(true)),
        lead_done(d.create_event(false)) {
    // Whole numbers 1..4: products summed over k stay finite in bf16.
    fill_inputs(d, a.data(), elements(shape.m, shape.k), DataType::bf16, rank);
    fill_inputs(d, b.data(), elements(shape.k, shape.n), DataType::bf16, rank);
  }
  static size_t elements(int rows, int columns) { return static_cast<size_t>(rows) * static_cast<size_t>(columns); }
  static MemoryTag tag() { return MemoryTag{MemoryCategory::scratch, "comm_bench gemm"}; }

  // C (m, n) = A (m, k) B^T, B stored (n, k) as a linear layer's weights.
  void gemm() {
    device.ops(StreamKind::compute)
        .gemm(Transpose::no, Transpose::yes, shape.m, shape.n, shape.k, 1.0f, DataType::bf16, a.data(), shape.k,
              b.data(), shape.k, 0.0f, DataType::bf16, c.data(), shape.n);
  }
  // ms per GEMM of `calls` alone.
  double gemm_alone_ms(int calls) {
    compute_start->record(StreamKind::compute);
    for (int i = 0; i < calls; ++i) gemm();
    compute_stop->record(StreamKind::compute);
    compute_stop->synchronize();
    return compute_stop->elapsed_ms_since(*compute_start) / calls;
  }
};

// The slowest rank's figures of one size beside compute (per call, ms).
struct BesideFigures {
  double gemm_alone_ms = 0, gemm_beside_ms = 0, collective_beside_ms = 0;
};

// One of the two loops of Note [compute beside a collective]: its call, the time of one call
// alone, its stream and the events that time it there.
struct BesideLoop {
  std::function<void()> call;
  double alone_ms = 0;
  StreamKind stream = StreamKind::compute;
  Event* start = nullptr;
  Event* stop = nullptr;
};

// `calls` of `timed` inside `cover`'s activity (Note [compute beside a collective]): ms per call,
// the slowest rank's.
double time_covered(const Measurement& m, BesideCompute& beside, int local, const BesideLoop& timed, int calls,
                    const BesideLoop& cover, const std::function<double(double)>& slowest) {
  Device& device = beside.device;
  const double window_ms = calls * timed.alone_ms;
  double per_call_ms = 0;
  for (int attempt = 0; attempt < kCoverAttempts; ++attempt) {
    const int lead = calls_lasting(kLead * window_ms, cover.alone_ms);
    const int covering = calls_lasting(kCover * (1 << attempt) * window_ms, cover.alone_ms) + 1;
    device.synchronize();
    m.meeting.gather_numbers(local, 0);  // every device idle, every rank at the start line
    for (int i = 0; i < lead; ++i) cover.call();
    beside.lead_done->record(cover.stream);
    device.wait(timed.stream, *beside.lead_done);
    timed.start->record(timed.stream);
    issue_interleaved(covering, cover.call, calls, timed.call);
    timed.stop->record(timed.stream);
    cover.stop->record(cover.stream);
    device.synchronize();
    per_call_ms = slowest(timed.stop->elapsed_ms_since(*timed.start) / calls);
    const bool covered = cover.stop->elapsed_ms_since(*timed.stop) >= 0;
    if (slowest(covered ? 0.0 : 1.0) == 0.0) break;
  }
  return per_call_ms;
}

BesideFigures measure_beside_compute(const Measurement& m, BesideCompute& beside, int local,
                                     const std::function<void()>& collective, double collective_ms) {
  const std::function<double(double)> slowest = [&](double mine) {
    const std::vector<double> all = m.meeting.gather_numbers(local, mine);
    return *std::max_element(all.begin(), all.end());
  };
  BesideFigures figures;
  // Alone: a few calls warm the GEMM (its kernel chosen, clocks up) and size the timed loop.
  for (int i = 0; i < 3; ++i) beside.gemm();
  const double probe_ms = beside.gemm_alone_ms(3);
  figures.gemm_alone_ms = slowest(beside.gemm_alone_ms(calls_lasting(kPhaseMs, probe_ms)));
  const BesideLoop gemm{[&] { beside.gemm(); }, figures.gemm_alone_ms, StreamKind::compute,
                        beside.compute_start.get(), beside.compute_stop.get()};
  const BesideLoop transfer{collective, collective_ms, StreamKind::communication, beside.comm_start.get(),
                            beside.comm_stop.get()};
  figures.gemm_beside_ms =
      time_covered(m, beside, local, gemm, calls_lasting(kPhaseMs, figures.gemm_alone_ms), transfer, slowest);
  figures.collective_beside_ms = time_covered(
      m, beside, local, transfer, std::max(m.options.iters, calls_lasting(kPhaseMs, collective_ms)), gemm, slowest);
  return figures;
}

// One rank's part, on its own thread: `local` is the rank this process's communicator is called
// with. Local rank 0 appends the rows (the slowest rank's time per size) and prints them.
void measure_rank(const Measurement& m, Device& device, int local, std::vector<CommBenchRow>* rows) {
  const CommBenchOptions& options = m.options;
  const StreamKind stream = StreamKind::communication;
  device.make_current();
  const BenchShape largest = shape_of(options.collective, m.sizes.back(), m.ranks, options.type);
  const MemoryTag buffers{MemoryCategory::communication, "comm_bench"};
  Buffer send = device.allocate(largest.send_elements * data_type_bytes(options.type), buffers);
  Buffer recv = device.allocate(largest.recv_elements * data_type_bytes(options.type), buffers);
  fill_inputs(device, send.data(), largest.send_elements, options.type, m.first_rank + local);
  std::unique_ptr<Event> start = device.create_event(true), stop = device.create_event(true);
  std::unique_ptr<BesideCompute> beside;
  if (options.beside_compute) beside = std::make_unique<BesideCompute>(device, options.compute_shape, m.first_rank + local);
  check_before_timing(m, device, local, send.data(), recv.data());

  for (size_t bytes : m.sizes) {
    const BenchShape shape = shape_of(options.collective, bytes, m.ranks, options.type);
    auto call = [&] { issue(m.comm, options.collective, local, send.data(), recv.data(), shape, options.type, stream); };
    for (int i = 0; i < options.warmup_iters; ++i) call();
    device.synchronize();
    m.meeting.gather_numbers(local, 0);  // every rank starts its clock with every device idle
    start->record(stream);
    for (int i = 0; i < options.iters; ++i) call();
    stop->record(stream);
    stop->synchronize();
    const std::vector<double> rank_ms = m.meeting.gather_numbers(local, stop->elapsed_ms_since(*start) / options.iters);
    const double slowest_ms = *std::max_element(rank_ms.begin(), rank_ms.end());
    BesideFigures figures;
    if (beside) figures = measure_beside_compute(m, *beside, local, call, slowest_ms);
    if (local != 0) continue;
    const double bus_factor = collective_bus_factor(options.collective, m.ranks);
    auto busbw_gbps = [&](double ms) { return ms > 0 ? static_cast<double>(shape.size_bytes) / (ms * 1e-3) / 1e9 * bus_factor : 0.0; };
    CommBenchRow row;
    row.size_bytes = shape.size_bytes;
    row.count = shape.count;
    row.time_us = slowest_ms * 1000.0;
    const double seconds = row.time_us * 1e-6;
    row.algbw_gbps = seconds > 0 ? static_cast<double>(row.size_bytes) / seconds / 1e9 : 0.0;
    row.busbw_gbps = row.algbw_gbps * bus_factor;
    if (beside) {
      row.compute_alone_us = figures.gemm_alone_ms * 1000.0;
      row.compute_beside_us = figures.gemm_beside_ms * 1000.0;
      row.compute_slowdown = figures.gemm_alone_ms > 0 ? figures.gemm_beside_ms / figures.gemm_alone_ms - 1.0 : 0.0;
      row.time_beside_compute_us = figures.collective_beside_ms * 1000.0;
      row.busbw_beside_compute_gbps = busbw_gbps(figures.collective_beside_ms);
    }
    rows->push_back(row);
    print(format_comm_bench_row(row, options.type, options.beside_compute));
  }
}

// The lines above the table: the collective and the communicator, then each rank's device (and
// host, across processes), gathered from every process.
void print_comm_bench_preamble(const Measurement& m, const CommBenchResult& result, const ProcessGroup* group) {
  print("# dpbench comm_bench: " + std::string(collective_name(m.options.collective)) + ", " +
        data_type_name(m.options.type) + ", " + std::to_string(m.ranks) + " ranks, " + result.communicator + ", " +
        std::to_string(m.options.warmup_iters) + " warm-up + " + std::to_string(m.options.iters) +
        " timed calls per size\n");
  if (m.options.beside_compute)
    print("# beside compute: a bf16 GEMM " + gemm_shape_text(m.options.compute_shape) +
          " (MxNxK) on the compute stream, alone and beside the collective; slowdown = gemm+coll / gemm - 1\n");
  std::vector<std::string> lines;
  for (size_t local = 0; local < result.devices.size(); ++local) {
    const DeviceDescription& d = result.devices[local];
    const std::string host = group != nullptr ? " on " + result.hosts[static_cast<size_t>(m.first_rank)] : "";
    lines.push_back("#  rank " + std::to_string(m.first_rank + static_cast<int>(local)) + ": device " +
                    std::to_string(d.index) + " " + d.name + host + "\n");
  }
  if (group != nullptr) lines = group->all_gather_text(lines.front());
  for (const std::string& line : lines) print(line);
  print(format_comm_bench_header(m.options.beside_compute));
}

}  // namespace

CommBenchResult run_comm_bench(const CommBenchOptions& options, const CommunicatorFactory& make_communicator) {
  std::vector<int> indices;
  for (int i = 0; i < options.num_devices; ++i) indices.push_back(options.first_device + i);
  std::vector<std::unique_ptr<Device>> devices = create_devices(options.backend, indices);
  std::vector<Device*> pointers;
  for (auto& device : devices) pointers.push_back(device.get());
  const std::unique_ptr<Communicator> comm = make_communicator(pointers);
  // Note [comm_bench ranks]
  const ProcessGroup* group = options.across_processes ? process_group() : nullptr;
  if (options.across_processes && group == nullptr)
    throw RuntimeError("comm_bench: across processes without a process group");
  std::unique_ptr<RankMeeting> meeting;
  if (group != nullptr) meeting = std::make_unique<ProcessMeeting>(*group);
  else meeting = std::make_unique<ThreadMeeting>(static_cast<int>(devices.size()));
  const Measurement measurement{options, *comm, *meeting, comm->size(), group != nullptr ? group->rank() : 0,
                                measured_sizes(options.collective, options.min_bytes, options.max_bytes, comm->size(),
                                               options.type)};

  CommBenchResult result;
  result.communicator = comm->description();
  result.ranks = measurement.ranks;
  for (const auto& device : devices) result.devices.push_back(device->description());
  result.hosts = group != nullptr ? group->hostnames()
                                  : std::vector<std::string>(static_cast<size_t>(measurement.ranks), host_name());
  print_comm_bench_preamble(measurement, result, group);

  std::mutex failure_mutex;
  std::exception_ptr failure;
  std::vector<std::thread> threads;
  for (size_t local = 0; local < devices.size(); ++local) {
    threads.emplace_back([&, local] {
      try {
        measure_rank(measurement, *devices[local], static_cast<int>(local), &result.rows);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
        // Release the ranks waiting for this one, at a meeting or in the communicator.
        meeting->abort();
        comm->abort();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);

  double busbw_sum = 0;
  for (const CommBenchRow& row : result.rows) busbw_sum += row.busbw_gbps;
  char average[80];
  std::snprintf(average, sizeof average, "# Avg bus bandwidth    : %.3f GB/s\n",
                result.rows.empty() ? 0.0 : busbw_sum / result.rows.size());
  print(average);
  return result;
}

namespace {

nlohmann::json comm_bench_config_json(const CommBenchOptions& options) {
  return {{"op", collective_name(options.collective)}, {"data_type", data_type_name(options.type)},
          {"device", options.device}, {"backend", backend_name(options.backend)}, {"num_gpus", options.num_devices},
          {"min_bytes", options.min_bytes}, {"max_bytes", options.max_bytes}, {"iters", options.iters},
          {"warmup_iters", options.warmup_iters}, {"beside_compute", options.beside_compute},
          {"compute_shape", gemm_shape_text(options.compute_shape)}};
}

}  // namespace

// What `dpbench predict --curves` reads (reports/collective_curves.h): the collective, its ranks
// and the link they spanned beside the rows' sizes and bus bandwidths.
nlohmann::json comm_bench_json(const CommBenchOptions& options, const CommBenchResult& result,
                               const EnvironmentRecord& environment) {
  nlohmann::json rows_json = nlohmann::json::array();
  for (const CommBenchRow& row : result.rows) {
    nlohmann::json row_json = {{"size_bytes", row.size_bytes}, {"count", row.count},
                               {"type", data_type_name(options.type)}, {"time_us", row.time_us},
                               {"algbw_gbps", row.algbw_gbps}, {"busbw_gbps", row.busbw_gbps}};
    if (options.beside_compute) {
      row_json["compute_alone_us"] = row.compute_alone_us;
      row_json["compute_beside_us"] = row.compute_beside_us;
      row_json["compute_slowdown"] = row.compute_slowdown;
      row_json["time_beside_compute_us"] = row.time_beside_compute_us;
      row_json["busbw_beside_compute_gbps"] = row.busbw_beside_compute_gbps;
    }
    rows_json.push_back(row_json);
  }
  std::vector<std::string> hosts;
  for (const std::string& host : result.hosts)
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  return {
      {"schema_version", 1},
      {"tool", {{"version", DPBENCH_VERSION}, {"git_sha", DPBENCH_GIT_SHA}}},
      {"command", "comm_bench"},
      {"environment", environment_to_json(environment)},
      {"communicator", result.communicator},
      {"config", comm_bench_config_json(options)},
      {"ranks", result.ranks},
      {"hosts", hosts.size()},
      {"link", link_kind_name(link_kind_of_hosts(result.hosts))},
      {"busbw_factor", collective_bus_factor(options.collective, result.ranks)},
      {"rows", rows_json},
  };
}


void run_comm_bench_command(const std::vector<std::string>& args, const DeviceInventory& inventory) {
  const CommBenchOptions options = parse_comm_bench_flags(args, inventory);
  if (options.help) {
    write_text_atomically("-", comm_bench_help_text(), "comm_bench's help");
    return;
  }
  // --json on standard output stays one document there: the table takes stderr.
  send_output_log_to_standard_error(same_destination(identify_path(options.json_file), identify_path("-")));
  const ProcessGroup* group = options.across_processes ? process_group() : nullptr;
  if (group != nullptr) {
    nlohmann::json shared = comm_bench_config_json(options);
    shared["json"] = !options.json_file.empty();  // whether the ranks meet once more to describe the job
    group->require_same_on_every_rank("the comm_bench flags", shared.dump(1));
  }
  if (options.fell_back_to_reference) {
    print("note: no CUDA GPU found; measuring the reference backend's in-process communicator (--device=cpu silences this)\n");
  }
  const CommBenchResult result = run_comm_bench(options);
  if (options.json_file.empty()) return;

  EnvironmentRecord environment = describe_environment(options.backend, result.devices);
  if (group != nullptr) describe_every_process(*group, environment);
  if (!speaks()) return;
  write_text_atomically(options.json_file, comm_bench_json(options, result, environment).dump(2) + "\n",
                        "comm_bench rows");
  print("Rows written to " + options.json_file + "\n");
}

}  // namespace dpbench
