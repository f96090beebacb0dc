// Predicting one data-parallel training step on N GPUs from a 1-GPU run: an event simulation of
// the step in which each gradient bucket enters the communication stream when backward has
// produced it, costs what the target system's collectives charge for its size at N GPUs, and
// whatever communication ends after backward is exposed (or, where each bucket's update follows
// its own exchange, whatever delays the last update); compute beside a transfer runs slower
// (Note [compute beside communication]). Pure arithmetic on plain inputs, so it
// is tested by hand-computed cases; `dpbench predict` (cli/predict_command.h) feeds it from a
// result's summary.timeline and a system file (reports/system_description.h).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/communication/collective_schedule.h"
#include "engine/communication/collective_traffic.h"
#include "engine/machine/memory_ledger.h"

namespace dpbench {

enum class CollectiveAlgorithm { ring, tree };
// Where a collective's ranks sit: all inside one host, or spread over hosts (then the hosts'
// network is the bottleneck link).
enum class LinkKind { intra_host, inter_host };
const char* link_kind_name(LinkKind link);  // "intra_host", as `dpbench comm_bench --json` records it
// The link a collective over these ranks crosses: intra_host when every rank's host (by rank) is
// the same, inter_host when they span hosts.
LinkKind link_kind_of_hosts(const std::vector<std::string>& hosts_by_rank);

struct LinkCost {
  double bandwidth_gb_per_s = 0;  // GB = 1e9 bytes, one direction
  double latency_us = 0;          // per algorithm step
};

// The target system as a system file describes it (systems/README.md).
struct SystemModel {
  std::string name;
  int gpus_per_host = 1;
  LinkCost intra_host;  // per GPU, to its peers in the host (NVLink, PCIe, shared memory)
  LinkCost inter_host;  // per host: all its network adapters together (Note [alpha-beta collectives])
  LinkCost host_copy;   // per GPU, between its memory and the host's (the host parameter server)
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  // False where a device's communication runs on the same thread as its compute (the reference
  // backend's synchronous streams): nothing overlaps, every transfer lengthens the step.
  bool communication_overlaps_compute = true;
  // How much slower compute runs while a transfer runs beside it (Note [compute beside
  // communication]), where no curve measured it; optional in a system file, absent = 0.
  double compute_slowdown_beside_communication = 0;
};

// How long one collective (or host copy) takes on the target system.
class CollectiveCost {
 public:
  virtual ~CollectiveCost() = default;
  // `bytes` as nccl-tests counts a collective's size: the whole buffer (all_reduce, broadcast,
  // reduce) or the whole gathered/scattered buffer (all_gather, reduce_scatter).
  virtual double collective_ms(Collective op, double bytes, int ranks, LinkKind link) const = 0;
  // One GPU copying `bytes` to or from host memory (over its own link: PCIe, C2C).
  virtual double host_copy_ms(double bytes) const = 0;
  // The fraction by which compute running beside this transfer is slowed (0.1: a forward or
  // backward pass beside it progresses at 1/1.1 of its pace alone): Note [compute beside
  // communication]. 0 unless a cost knows better.
  virtual double compute_slowdown(Collective op, double bytes, int ranks, LinkKind link) const;
  // The fraction by which this transfer itself is slowed while compute runs beside it (0.3: it
  // takes 1.3 times its time alone). 0 unless a cost knows better.
  virtual double collective_slowdown(Collective op, double bytes, int ranks, LinkKind link) const;
};

// Note [alpha-beta collectives]
// A collective of S bytes over n ranks with per-rank bandwidth B and per-step latency a:
//   ring all_reduce      2(n-1) a + 2(n-1)/n S/B   (reduce-scatter then all-gather, 2(n-1) steps)
//   ring reduce_scatter, all_gather   (n-1) a + (n-1)/n S/B
//   ring reduce, broadcast            (n-1) a + S/B   (a pipelined chain)
//   tree all_reduce      2 ceil(log2 n) a + 2(n-1)/n S/B   (up and down a tree; NCCL's double
//                        binary trees reach the ring's bandwidth, so only the latency differs)
//   tree reduce, broadcast            ceil(log2 n) a + S/B
//   all_to_all           (n-1) a + (n-1)/n S/B   (n-1 chunks out, n-1 in)
//   peer_copy            a + S/B   (one copy over one link)
// reduce_scatter, all_gather and all_to_all have no tree in NCCL and use the ring's formula either
// way. Copies to and from host memory cost host_copy_ms, whatever the link.
// Across hosts B is the host's whole network bandwidth and a the network's latency: the slowest
// hop paces every step. NCCL lays a flat ring's channels over all of a host's adapters, so the
// 2(n-1)/n S that each host sends out of a ring all-reduce leaves through all of them at once
// (nccl-tests' busbw across hosts approaches the host's adapters together); comm_bench's curves
// across hosts measure the same. The hierarchical all-reduce's step across hosts, one all-reduce
// of 1/gpus_per_host of the bucket per GPU of the host, all at once, is priced as one all-reduce
// of the whole bucket over the hosts: the same bytes through the same adapters.
class AlphaBetaCost : public CollectiveCost {
 public:
  explicit AlphaBetaCost(SystemModel system) : system_(std::move(system)) {}
  double collective_ms(Collective op, double bytes, int ranks, LinkKind link) const override;
  double host_copy_ms(double bytes) const override;
  // The system's compute_slowdown_beside_communication for every collective; 0 for host copies.
  double compute_slowdown(Collective op, double bytes, int ranks, LinkKind link) const override;
  const SystemModel& system() const { return system_; }

 private:
  SystemModel system_;
};

// Measured bus bandwidth against message size (`dpbench comm_bench --json` rows), per collective,
// link kind and rank count, replacing the formulas where a curve exists. The time of S bytes on n
// ranks is S x collective_bus_factor(op, n) / busbw(S), busbw from the curve measured on the most
// ranks not above n (the fewest, where all were measured on more): busbw is what nccl-tests made
// comparable across rank counts, and the nearest count below keeps what it loses at larger ones
// (latency steps, slower links) closest. busbw is interpolated linearly in log2(size); below the
// smallest size measured the time stays that of the smallest (latency-bound), above the largest
// the busbw stays the last. A curve measured with --beside_compute also gives compute's slowdown
// beside the collective, interpolated the same way and held at the ends; a curve without it
// (an older file, or none for the collective) leaves the slowdown to the fallback.
class MeasuredCurveCost : public CollectiveCost {
 public:
  struct Point {
    double bytes = 0, busbw_gb_per_s = 0;
    std::optional<double> compute_slowdown;  // comm_bench --beside_compute's; absent: unknown
    // The collective's own: its time beside the GEMM over its time alone, less 1 (same rows).
    std::optional<double> collective_slowdown;
  };
  using Curve = std::vector<Point>;                        // by ascending size
  using CurvesByRanks = std::map<int, Curve>;              // by the rank count it was measured on
  using Curves = std::map<std::pair<Collective, LinkKind>, CurvesByRanks>;
  MeasuredCurveCost(Curves curves, std::shared_ptr<const CollectiveCost> fallback)
      : curves_(std::move(curves)), fallback_(std::move(fallback)) {}
  double collective_ms(Collective op, double bytes, int ranks, LinkKind link) const override;
  double host_copy_ms(double bytes) const override { return fallback_->host_copy_ms(bytes); }
  double compute_slowdown(Collective op, double bytes, int ranks, LinkKind link) const override;
  double collective_slowdown(Collective op, double bytes, int ranks, LinkKind link) const override;
  // The curve that prices `ranks`, or nullptr where none covers (op, link).
  const Curve* curve_for(Collective op, LinkKind link, int ranks) const;

 private:
  Curves curves_;
  std::shared_ptr<const CollectiveCost> fallback_;
};

// One gradient bucket of the 1-GPU run: its bytes (fp32) and when backward had produced all of
// it, in ms from the start of backward.
struct BucketReady {
  double bytes = 0;
  double ready_ms = 0;
};

// What the 1-GPU run measured: its step and the parts a prediction changes, in ms per step.
struct MeasuredStep {
  double step_ms = 0;
  double forward_ms = 0;
  double backward_ms = 0;
  double update_ms = 0;  // the optimizer (and whatever follows backward on one GPU)
  std::vector<BucketReady> buckets;  // in the order backward produces them
  // Each parameter unit's bytes and when backward had produced its gradients, in the model's unit
  // order: the ranges of a schedule whose exchanges follow the units' uses (StepSchedule::uses).
  std::vector<BucketReady> units;
  // A schedule that updates each bucket once its exchange is done (Note [update by bucket] in
  // strategies/replicated.h) waits for the last exchange instead where the update first looks at
  // every gradient (fp16's automatic loss scaling).
  bool update_waits_for_every_exchange = false;
  double gradient_bytes() const;
};

struct StepPrediction {
  int gpus = 1;
  bool modelled = true;
  std::string why_not;        // when !modelled: why this strategy has no prediction at this count
  double step_ms = 0;
  // What the step waits for communication beyond the 1-GPU step, compute slowed beside it included.
  double exposed_comm_ms = 0;
  double comm_ms = 0;         // the communication stream's busy time (all transfers, overlapped or not)
};

// The step on `gpus` GPUs of the exchange `schedule` describes for that many (one range per
// bucket of `measured`, engine/communication/collective_schedule.h): each bucket's steps cost what `cost`
// charges for their collectives, on the stream after what they wait for; the update runs where
// the schedule places it, its share of the 1-GPU update. A schedule with uses (fully_sharded:
// one range per unit of `measured.units`) is simulated use by use instead (Note [units gathered
// ahead]). gpus == 1 is the measured step, whatever the schedule.
StepPrediction predict_step(const MeasuredStep& measured, const StepSchedule& schedule, int gpus,
                            const SystemModel& system, const CollectiveCost& cost);

// Note [compute beside communication]
// NCCL's kernels take SMs and memory bandwidth from the forward and backward kernels running beside
// them, and those kernels take them from NCCL's: on 2 H200s gpt's passes ran 5-12% slower beside
// transfers, and a model keeping both at their pace alone predicted the step 6.6% (replicated) to
// 9.3% (fully_sharded) too fast. `dpbench comm_bench --beside_compute` measures both sides per
// collective and size: a GEMM beside the collective, and the collective beside a GEMM. So while
// the communication stream runs a transfer beside compute, compute progresses at 1 / (1 + s) of
// its 1-GPU pace (s: CollectiveCost::compute_slowdown: the curves', else the system file's
// compute_slowdown_beside_communication, else 0) and the transfer at 1 / (1 + c) of its pace alone
// (c: CollectiveCost::collective_slowdown, the curves' time beside compute over time alone less
// 1, else 0); each runs at its own pace alone. The two streams are simulated together, each
// running its items in order, a compute item after the transfer it waits for (a unit's gather)
// and a transfer after the compute item it waits for (its bucket's part of backward, its unit's
// last use, its slot's previous holder): a slowed backward produces its later buckets later, and a
// transfer slowed beside backward ends later, and is exposed where it outlasts backward. A job of
// several steps takes their times alone added, with s and c weighted by them. The update after
// backward is compute too where it waits for each bucket's exchange; without overlap nothing runs
// beside anything. With every s and c 0 the simulation is the one without them.

// Note [units gathered ahead]
// fully_sharded's step, use by use as its slot plan runs it (StepSchedule::uses). Each use's
// compute: in backward, a unit's gradients are produced when its last writing use ends, so those
// uses end at their units' ready times and the uses between two such ends share the interval
// evenly (backward after the last of them is compute of no unit); the 1-GPU run has no forward
// time per unit, so forward is split over the forward uses in proportion to their units'
// backward times (a unit of several forward uses evenly over them). On the communication stream,
// in the order the run issues them: when a use begins, the gathers it issues (its own and,
// prefetched, later uses'), each after its slot's previous holder's compute; when a unit's last
// writing use ends, its reduction. A use's compute starts once the one before it ended and its
// own gather is done, so a gather is charged only where it is not done by then; the update waits
// for every transfer. Without overlap (the reference backend) every transfer is charged. A use's
// compute beside a transfer is slowed (Note [compute beside communication]).

// The job `gpus` GPUs make on `system`, for a schedule: inside one host where they fit one, else
// full hosts of system.gpus_per_host (the last one's share counted as full).
ScheduleShape shape_on(const SystemModel& system, int gpus);

// Note [memory from one run]
// A device's memory at another batch, strategy and device count, from one 1-device run. Two
// figures: its measured steps' peak (summary.memory's at_step_peak), and its whole-run peak
// (at_peak, set-up and warm-up included). Each without its communication, which is its
// strategy's, is one replica. The categories that grow with the batch (memory_categories()'s
// scales_with_batch) grow in proportion to it, the others stay; each strategy's memory rule
// (StrategyEntry::memory) then says which categories every device keeps whole or a 1/N share of,
// and which exchange buffers it adds. The whole run's peak is most often a set-up or warm-up
// transient (Note [search memory] in engine/cuda/device_memory.h) whose tensors grow with the
// batch like the steps' (the searched layer's input and output, a linear layer's timing
// buffers), but whose workspace does not: a convolution search takes what room there is, up to
// 2 GiB. Scaled with the rest, that workspace made a ResNet-50 prediction 20% to 40% high at 2x
// and 4x its batch, so the workspaces the whole-run peak held past the steps' stay fixed. The
// predicted whole-run peak is at least the steps'. The largest batch that fits is the largest
// whose steps' total is at most the device's memory: the set-up's transients take only the room
// the memory limit leaves them, so they are no need.
struct MeasuredMemory {
  CategoryBytes replica{};    // the run's at_step_peak, its communication left out
  CategoryBytes whole_run{};  // the run's at_peak, its communication left out
  int batch_size = 1;         // per device
};
// One device's figures (DeviceMemoryRecord::figures) of a run at `batch_size` per device.
MeasuredMemory measured_memory_from(const MemoryFigures& figures, int batch_size);
// The replica's bytes at `batch` per device, in its steps.
CategoryBytes replica_bytes_at(const MeasuredMemory& measured, int64_t batch);

struct MemoryPrediction {
  int64_t batch_size = 0;
  CategoryBytes bytes{};             // one device's (the fullest) at its steps' peak
  uint64_t set_up_excess_bytes = 0;  // the whole-run peak past the steps'
  uint64_t pinned_host_bytes = 0;    // beside it
  // The largest batch per device whose steps' bytes fit `device_memory`; 0: not even 1.
  int64_t largest_batch = 0;
  std::string rule;               // the strategy's, in words
  uint64_t step_peak_bytes() const { return total_bytes(bytes); }
  // The whole run's, set-up included: what summary.memory's peak_bytes will say.
  uint64_t peak_bytes() const { return step_peak_bytes() + set_up_excess_bytes; }
};
MemoryPrediction predict_memory(const MeasuredMemory& measured, const StrategyMemory& strategy, int64_t batch,
                                uint64_t device_memory);

// 1, 2, 4, ... up to and including max_gpus (which need not be a power of two).
std::vector<int> predicted_gpu_counts(int max_gpus);

}  // namespace dpbench
