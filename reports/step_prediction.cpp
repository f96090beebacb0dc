// The step simulation (see step_prediction.h).
#include "reports/step_prediction.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>

#include "engine/errors.h"

namespace dpbench {
namespace {

double ceil_log2(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n))); }

// ms to move `bytes` at `gb_per_s` (GB = 1e9 bytes).
double transfer_ms(double bytes, double gb_per_s) { return bytes / (gb_per_s * 1e6); }

// Note [compute beside communication]: one device's two streams, each running its items in
// order. A compute item starts once the transfer it waits for has ended; a transfer once the
// compute item it waits for has ended and `ready_ms` has passed. While both run, compute
// progresses at 1 / (1 + s) of its pace alone (s: the transfer's compute slowdown) and the
// transfer at 1 / (1 + c) of its own (c: its slowdown beside compute); each alone runs at its pace.
struct ComputeItem {
  double work_ms = 0;       // alone
  int after_transfer = -1;  // the transfer it waits for; -1: none
};
struct Transfer {
  double alone_ms = 0;
  double slows_compute = 0;  // s
  double slowed_by = 0;      // c
  int after_compute = -1;    // the compute item whose end it waits for; -1: none
  double ready_ms = 0;
};
struct StreamEnds {
  std::vector<double> compute, transfers;  // each item's end, ms from the start
  double compute_end() const { return compute.empty() ? 0.0 : compute.back(); }
  double stream_end() const { return transfers.empty() ? 0.0 : transfers.back(); }
};

// Runs both streams to their ends, from time 0; `overlap` false: neither slows the other.
StreamEnds run_streams(const std::vector<ComputeItem>& compute, const std::vector<Transfer>& transfers, bool overlap) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  StreamEnds ends{std::vector<double>(compute.size(), 0.0), std::vector<double>(transfers.size(), 0.0)};
  size_t c = 0, t = 0;
  double now = 0;
  double compute_left = compute.empty() ? 0.0 : compute[0].work_ms;
  double transfer_left = transfers.empty() ? 0.0 : transfers[0].alone_ms;
  while (c < compute.size() || t < transfers.size()) {
    const bool computing = c < compute.size() && (compute[c].after_transfer < 0 ||
                                                  static_cast<size_t>(compute[c].after_transfer) < t);
    const bool transfer_waits = t < transfers.size() && transfers[t].after_compute >= 0 &&
                                static_cast<size_t>(transfers[t].after_compute) >= c;
    const bool transferring = t < transfers.size() && !transfer_waits && now >= transfers[t].ready_ms;
    const bool beside = overlap && computing && transferring;
    const double compute_pace = beside ? 1 / (1 + transfers[t].slows_compute) : 1.0;
    const double transfer_pace = beside ? 1 / (1 + transfers[t].slowed_by) : 1.0;
    const double compute_done = computing ? compute_left / compute_pace : kNever;
    const double transfer_done = transferring ? transfer_left / transfer_pace : kNever;
    const double becomes_ready =
        t < transfers.size() && !transfer_waits && !transferring ? transfers[t].ready_ms - now : kNever;
    const double step = std::min({compute_done, transfer_done, becomes_ready});
    if (step == kNever) throw RuntimeError("predict: the step's compute and communication wait for each other");
    now += step;
    if (computing) compute_left -= step * compute_pace;
    if (transferring) transfer_left -= step * transfer_pace;
    if (computing && step == compute_done) {
      ends.compute[c++] = now;
      compute_left = c < compute.size() ? compute[c].work_ms : 0.0;
    }
    if (transferring && step == transfer_done) {
      ends.transfers[t++] = now;
      transfer_left = t < transfers.size() ? transfers[t].alone_ms : 0.0;
    }
  }
  return ends;
}

// A range's steps as one transfer: their times alone added, each slowdown weighted by its step's time.
struct TransferCost {
  double alone_ms = 0, slows_compute_ms = 0, slowed_by_ms = 0;
  void add(double ms, double slows_compute, double slowed_by) {
    alone_ms += ms;
    slows_compute_ms += ms * slows_compute;
    slowed_by_ms += ms * slowed_by;
  }
  Transfer transfer(int after_compute, double ready_ms = 0) const {
    const double weight = alone_ms > 0 ? 1 / alone_ms : 0.0;
    return Transfer{alone_ms, slows_compute_ms * weight, slowed_by_ms * weight, after_compute, ready_ms};
  }
};

// Note [units gathered ahead]: each use's compute time, forward then backward, in the uses' order.
std::vector<double> use_compute_ms(const MeasuredStep& measured, const StepSchedule& schedule) {
  const std::vector<ScheduledUse>& uses = schedule.uses;
  std::vector<double> compute(uses.size(), 0.0);
  std::vector<double> unit_backward(schedule.ranges.size(), 0.0);
  std::vector<int> forward_uses(schedule.ranges.size(), 0);
  double pinned = 0;            // backward's time when the last unit's gradients were produced
  std::vector<size_t> waiting;  // backward uses since then, not yet placed
  auto share = [&](double until) {
    const double each = waiting.empty() ? 0.0 : std::max(0.0, until - pinned) / static_cast<double>(waiting.size());
    for (size_t j : waiting) {
      compute[j] = each;
      unit_backward[static_cast<size_t>(uses[j].range)] += each;
    }
    waiting.clear();
    pinned = std::max(pinned, until);
  };
  for (size_t j = 0; j < uses.size(); ++j) {
    if (!uses[j].backward) {
      ++forward_uses[static_cast<size_t>(uses[j].range)];
      continue;
    }
    waiting.push_back(j);
    const size_t range = static_cast<size_t>(uses[j].range);
    if (uses[j].reduces && range < measured.units.size()) share(measured.units[range].ready_ms);
  }
  if (!waiting.empty()) share(measured.backward_ms);
  double backward_total = 0;
  int forward_count = 0;
  for (size_t r = 0; r < unit_backward.size(); ++r) {
    if (forward_uses[r] > 0) backward_total += unit_backward[r];
    forward_count += forward_uses[r];
  }
  for (size_t j = 0; j < uses.size(); ++j) {
    if (uses[j].backward) continue;
    const size_t range = static_cast<size_t>(uses[j].range);
    compute[j] = backward_total > 0
                     ? measured.forward_ms * unit_backward[range] / backward_total / forward_uses[range]
                     : measured.forward_ms / std::max(1, forward_count);
  }
  return compute;
}

}  // namespace

const char* link_kind_name(LinkKind link) {
  return link == LinkKind::intra_host ? "intra_host" : "inter_host";
}

LinkKind link_kind_of_hosts(const std::vector<std::string>& hosts_by_rank) {
  for (const std::string& host : hosts_by_rank)
    if (host != hosts_by_rank.front()) return LinkKind::inter_host;
  return LinkKind::intra_host;
}

double AlphaBetaCost::collective_ms(Collective op, double bytes, int ranks, LinkKind link) const {
  if (op == Collective::copy_to_host || op == Collective::copy_from_host) return host_copy_ms(bytes);
  if (ranks <= 1) return 0;
  const bool across = link == LinkKind::inter_host;
  const double bandwidth = across ? system_.inter_host.bandwidth_gb_per_s : system_.intra_host.bandwidth_gb_per_s;
  const double latency_ms = (across ? system_.inter_host.latency_us : system_.intra_host.latency_us) / 1e3;
  const double n = ranks;
  const bool tree = system_.algorithm == CollectiveAlgorithm::tree;
  // Note [alpha-beta collectives] in the header.
  double steps = 0;
  switch (op) {
    case Collective::all_reduce: steps = tree ? 2 * ceil_log2(ranks) : 2 * (n - 1); break;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all: steps = n - 1; break;
    case Collective::reduce:
    case Collective::broadcast: steps = tree ? ceil_log2(ranks) : n - 1; break;
    case Collective::peer_copy: steps = 1; break;
    case Collective::copy_to_host:
    case Collective::copy_from_host: break;  // host_copy_ms, above
  }
  return steps * latency_ms + transfer_ms(bytes * collective_bus_factor(op, ranks), bandwidth);
}

double AlphaBetaCost::host_copy_ms(double bytes) const {
  return system_.host_copy.latency_us / 1e3 + transfer_ms(bytes, system_.host_copy.bandwidth_gb_per_s);
}

double CollectiveCost::compute_slowdown(Collective, double, int, LinkKind) const { return 0; }
double CollectiveCost::collective_slowdown(Collective, double, int, LinkKind) const { return 0; }

double AlphaBetaCost::compute_slowdown(Collective op, double, int, LinkKind) const {
  // Copies to and from host memory run on copy engines, not SMs: nothing measured them beside compute.
  if (op == Collective::copy_to_host || op == Collective::copy_from_host) return 0;
  return system_.compute_slowdown_beside_communication;
}

const MeasuredCurveCost::Curve* MeasuredCurveCost::curve_for(Collective op, LinkKind link, int ranks) const {
  const auto found = curves_.find({op, link});
  if (found == curves_.end() || found->second.empty()) return nullptr;
  const CurvesByRanks& by_ranks = found->second;
  auto above = by_ranks.upper_bound(ranks);  // the first measured on more ranks than `ranks`
  const Curve& curve = above == by_ranks.begin() ? above->second : std::prev(above)->second;
  return curve.empty() ? nullptr : &curve;
}

double MeasuredCurveCost::collective_ms(Collective op, double bytes, int ranks, LinkKind link) const {
  const Curve* measured = ranks > 1 ? curve_for(op, link, ranks) : nullptr;
  if (measured == nullptr) return fallback_->collective_ms(op, bytes, ranks, link);
  const Curve& curve = *measured;
  const double factor = collective_bus_factor(op, ranks);
  if (bytes <= curve.front().bytes) return transfer_ms(curve.front().bytes * factor, curve.front().busbw_gb_per_s);
  if (bytes >= curve.back().bytes) return transfer_ms(bytes * factor, curve.back().busbw_gb_per_s);
  const auto upper = std::upper_bound(curve.begin(), curve.end(), bytes,
                                      [](double size, const Point& point) { return size < point.bytes; });
  const Point& high = *upper;
  const Point& low = *(upper - 1);
  const double t = (std::log2(bytes) - std::log2(low.bytes)) / (std::log2(high.bytes) - std::log2(low.bytes));
  const double busbw = low.busbw_gb_per_s + t * (high.busbw_gb_per_s - low.busbw_gb_per_s);
  return transfer_ms(bytes * factor, busbw);
}

namespace {

// A curve's optional figure at `bytes` (`field` of its points, every point having it): linear in
// log2(size) between the sizes measured, the nearest end's beyond them; nullopt where absent.
std::optional<double> interpolated(const MeasuredCurveCost::Curve& curve, double bytes,
                                   std::optional<double> MeasuredCurveCost::Point::*field) {
  for (const MeasuredCurveCost::Point& point : curve)
    if (!(point.*field).has_value()) return std::nullopt;
  if (bytes <= curve.front().bytes) return curve.front().*field;
  if (bytes >= curve.back().bytes) return curve.back().*field;
  const auto upper = std::upper_bound(curve.begin(), curve.end(), bytes,
                                      [](double size, const MeasuredCurveCost::Point& point) { return size < point.bytes; });
  const MeasuredCurveCost::Point& high = *upper;
  const MeasuredCurveCost::Point& low = *(upper - 1);
  const double t = (std::log2(bytes) - std::log2(low.bytes)) / (std::log2(high.bytes) - std::log2(low.bytes));
  return *(low.*field) + t * (*(high.*field) - *(low.*field));
}

}  // namespace

double MeasuredCurveCost::compute_slowdown(Collective op, double bytes, int ranks, LinkKind link) const {
  const Curve* measured = ranks > 1 ? curve_for(op, link, ranks) : nullptr;
  const std::optional<double> slowdown = measured ? interpolated(*measured, bytes, &Point::compute_slowdown) : std::nullopt;
  return slowdown ? *slowdown : fallback_->compute_slowdown(op, bytes, ranks, link);
}

double MeasuredCurveCost::collective_slowdown(Collective op, double bytes, int ranks, LinkKind link) const {
  const Curve* measured = ranks > 1 ? curve_for(op, link, ranks) : nullptr;
  const std::optional<double> slowdown =
      measured ? interpolated(*measured, bytes, &Point::collective_slowdown) : std::nullopt;
  return slowdown ? *slowdown : fallback_->collective_slowdown(op, bytes, ranks, link);
}

double MeasuredStep::gradient_bytes() const {
  double total = 0;
  for (const BucketReady& bucket : buckets) total += bucket.bytes;
  return total;
}

namespace {

// Note [units gathered ahead]: the step of a schedule with uses, from `prediction`'s count.
StepPrediction predict_unit_step(const MeasuredStep& measured, const StepSchedule& schedule, StepPrediction prediction,
                                 const SystemModel& system,
                                 const std::function<void(const ScheduledCollective&, TransferCost&)>& price) {
  const std::vector<ScheduledUse>& uses = schedule.uses;
  const std::vector<double> compute = use_compute_ms(measured, schedule);
  // Each range's g-th gather costs its g-th gather step; its other steps are its reduction.
  std::vector<std::vector<TransferCost>> gathers(schedule.ranges.size());
  std::vector<TransferCost> reductions(schedule.ranges.size());
  for (size_t r = 0; r < schedule.ranges.size(); ++r)
    for (const ScheduledCollective& step : schedule.ranges[r].steps) {
      if (step.after == StepAfter::unit_use) {
        gathers[r].emplace_back();
        price(step, gathers[r].back());
      } else if (step.after == StepAfter::with_gather && !gathers[r].empty()) {
        price(step, gathers[r].back());
      } else {
        price(step, reductions[r]);
      }
    }
  // The compute stream: each use, then backward's compute of no unit (after the last unit's
  // gradients). The communication stream, in the order the run issues them: the gathers a use
  // issues when it begins, each after its slot's previous holder's compute; after a unit's last
  // writing use, its reduction.
  std::vector<ComputeItem> work;
  std::vector<Transfer> transfers;
  std::vector<int> gathered_by(uses.size(), -1);  // per use: the transfer that gathered its unit
  std::vector<size_t> gathers_done(schedule.ranges.size(), 0);
  for (size_t j = 0; j < uses.size(); ++j) {
    for (int g : uses[j].issues_gathers_of) {
      const ScheduledUse& target = uses[static_cast<size_t>(g)];
      const size_t r = static_cast<size_t>(target.range);
      const std::vector<TransferCost>& costs = gathers[r];
      const TransferCost cost = costs.empty() ? TransferCost{} : costs[std::min(gathers_done[r]++, costs.size() - 1)];
      gathered_by[static_cast<size_t>(g)] = static_cast<int>(transfers.size());
      transfers.push_back(cost.transfer(target.gather_waits_for));
      prediction.comm_ms += cost.alone_ms;
    }
    work.push_back({compute[j], uses[j].gathers ? gathered_by[j] : -1});
    if (uses[j].reduces) {
      const TransferCost& cost = reductions[static_cast<size_t>(uses[j].range)];
      transfers.push_back(cost.transfer(static_cast<int>(j)));
      prediction.comm_ms += cost.alone_ms;
    }
  }
  double backward_placed = 0;
  for (size_t j = 0; j < uses.size(); ++j) backward_placed += uses[j].backward ? compute[j] : 0.0;
  work.push_back({std::max(0.0, measured.backward_ms - backward_placed), -1});
  const StreamEnds ends = run_streams(work, transfers, system.communication_overlaps_compute);
  const double one_gpu = measured.forward_ms + measured.backward_ms;
  prediction.exposed_comm_ms = system.communication_overlaps_compute
                                   ? std::max(0.0, std::max(ends.compute_end(), ends.stream_end()) - one_gpu)
                                   : prediction.comm_ms;
  const double update_ms = measured.update_ms * schedule.update_share;
  prediction.step_ms = measured.step_ms - measured.update_ms + update_ms + prediction.exposed_comm_ms;
  return prediction;
}

}  // namespace

StepPrediction predict_step(const MeasuredStep& measured, const StepSchedule& schedule, int gpus,
                            const SystemModel& system, const CollectiveCost& cost) {
  StepPrediction prediction;
  prediction.gpus = gpus;
  if (gpus <= 1) {
    prediction.step_ms = measured.step_ms;
    return prediction;
  }
  const int per_host = std::max(1, system.gpus_per_host);
  const bool one_host = gpus <= per_host;
  const LinkKind link = one_host ? LinkKind::intra_host : LinkKind::inter_host;
  const double total_bytes = measured.gradient_bytes();
  // What one step of the schedule costs: its collective at its size over its ranks, on the link
  // its ranks span; steps that run at once through a host's network as one of their whole bytes
  // (Note [alpha-beta collectives]); and how it and compute beside it slow each other (Note
  // [compute beside communication]; a measured speed-up beside the other is noise, not priced).
  auto price = [&](const ScheduledCollective& step, TransferCost& into) {
    const LinkKind crossed = step.span == StepRanks::job            ? link
                             : step.span == StepRanks::inside_host ? LinkKind::intra_host
                                                                   : LinkKind::inter_host;
    const double bytes = step.bytes * std::max(1, step.concurrent);
    into.add(cost.collective_ms(step.collective, bytes, step.ranks, crossed),
             std::max(0.0, cost.compute_slowdown(step.collective, bytes, step.ranks, crossed)),
             std::max(0.0, cost.collective_slowdown(step.collective, bytes, step.ranks, crossed)));
  };

  if (!schedule.uses.empty()) return predict_unit_step(measured, schedule, prediction, system, price);

  std::vector<TransferCost> during;   // started by backward, one per bucket
  std::vector<bool> after_backward;   // per bucket: its exchange waits for the whole backward
  double after_ms = 0;                // transfers that wait for the update (parameters travelling back)
  for (size_t i = 0; i < measured.buckets.size() && i < schedule.ranges.size(); ++i) {
    const BucketReady& bucket = measured.buckets[i];
    const RangeSchedule& range = schedule.ranges[i];
    TransferCost job;
    bool waits_for_backward = false;
    // The bucket's share of the update, split as the schedule says, runs after its first step.
    bool update_pending = schedule.update == UpdatePlacement::in_exchange;
    for (const ScheduledCollective& step : range.steps) {
      if (step.after == StepAfter::update) {
        TransferCost after;
        price(step, after);
        after_ms += after.alone_ms;
        continue;
      }
      waits_for_backward = waits_for_backward || step.after == StepAfter::backward;
      price(step, job);
      if (update_pending) {
        job.add(total_bytes > 0 ? measured.update_ms * bucket.bytes / total_bytes / std::max(1, schedule.update_split) : 0,
                0, 0);
        update_pending = false;
      }
    }
    during.push_back(job);
    after_backward.push_back(waits_for_backward);
    prediction.comm_ms += job.alone_ms;
  }
  if (!schedule.one_host_only.empty() && !one_host) {
    prediction.modelled = false;
    prediction.why_not = schedule.one_host_only + " (at most " + std::to_string(per_host) + " GPUs)";
    return prediction;
  }
  double update_ms = measured.update_ms;
  if (schedule.update == UpdatePlacement::in_exchange) update_ms = 0;  // done inside the exchange
  // Owners each update the tensors they own, at once: the most loaded one sets the pace.
  if (schedule.update == UpdatePlacement::at_owners) update_ms = measured.update_ms * schedule.update_share;
  prediction.comm_ms += after_ms;
  const bool overlaps = system.communication_overlaps_compute;
  const bool by_bucket = overlaps && !measured.update_waits_for_every_exchange &&
                         schedule.update == UpdatePlacement::each_range;
  // Backward on the compute stream, cut where each bucket is ready (its 1-GPU ready time, so a
  // transfer that slows backward delays the buckets after it), then each bucket's update once its
  // exchange is done where the schedule updates by bucket; each bucket's exchange after its cut.
  std::vector<ComputeItem> work;
  std::vector<Transfer> transfers;
  double cut = 0;
  for (size_t i = 0; i < during.size(); ++i) {
    const double ready = std::clamp(measured.buckets[i].ready_ms, cut, measured.backward_ms);
    work.push_back({ready - cut, -1});
    cut = ready;
  }
  work.push_back({measured.backward_ms - cut, -1});
  const int backward_done = static_cast<int>(work.size()) - 1;
  for (size_t i = 0; i < during.size(); ++i)
    transfers.push_back(during[i].transfer(after_backward[i] ? backward_done : static_cast<int>(i)));
  if (by_bucket)
    for (size_t i = 0; i < during.size(); ++i)
      work.push_back({total_bytes > 0 ? update_ms * measured.buckets[i].bytes / total_bytes : 0.0, static_cast<int>(i)});
  const StreamEnds ends = run_streams(work, transfers, overlaps);
  double during_exposed = 0;
  if (by_bucket) {
    during_exposed = std::max(0.0, ends.compute_end() - measured.backward_ms - update_ms);
  } else {
    const double backward_end = ends.compute[static_cast<size_t>(backward_done)];
    during_exposed = overlaps ? std::max(backward_end, ends.stream_end()) - measured.backward_ms
                              : prediction.comm_ms - after_ms;
  }
  prediction.exposed_comm_ms = during_exposed + after_ms;
  prediction.step_ms = measured.step_ms - measured.update_ms + update_ms + prediction.exposed_comm_ms;
  return prediction;
}

ScheduleShape shape_on(const SystemModel& system, int gpus) {
  const int per_host = std::max(1, system.gpus_per_host);
  if (gpus <= per_host) return ScheduleShape{gpus, gpus, 1};
  return ScheduleShape{gpus, per_host, (gpus + per_host - 1) / per_host};
}

MeasuredMemory measured_memory_from(const MemoryFigures& figures, int batch_size) {
  MeasuredMemory measured;
  measured.replica = figures.at_window_peak;
  measured.whole_run = figures.at_peak;
  measured.replica[static_cast<size_t>(MemoryCategory::communication)] = 0;  // its strategy's
  measured.whole_run[static_cast<size_t>(MemoryCategory::communication)] = 0;
  measured.batch_size = batch_size;
  return measured;
}

namespace {

// `bytes` of a run at `base_batch` per device, at `batch`: the categories that grow with it in
// proportion, the others as they are.
CategoryBytes scaled_to(CategoryBytes bytes, int base_batch, int64_t batch) {
  const double ratio = static_cast<double>(batch) / std::max(1, base_batch);
  for (const MemoryCategoryInfo& category : memory_categories()) {
    uint64_t& held = bytes[static_cast<size_t>(category.category)];
    if (category.scales_with_batch) held = static_cast<uint64_t>(std::llround(static_cast<double>(held) * ratio));
  }
  return bytes;
}

// Note [memory from one run]: the whole run's peak at `batch`, its workspaces past the steps' fixed.
CategoryBytes whole_run_bytes_at(const MeasuredMemory& measured, int64_t batch) {
  const size_t workspaces = static_cast<size_t>(MemoryCategory::workspaces);
  CategoryBytes base = measured.whole_run;
  const uint64_t fixed =
      base[workspaces] > measured.replica[workspaces] ? base[workspaces] - measured.replica[workspaces] : 0;
  base[workspaces] -= fixed;
  CategoryBytes bytes = scaled_to(base, measured.batch_size, batch);
  bytes[workspaces] += fixed;
  return bytes;
}

}  // namespace

CategoryBytes replica_bytes_at(const MeasuredMemory& measured, int64_t batch) {
  return scaled_to(measured.replica, measured.batch_size, batch);
}

MemoryPrediction predict_memory(const MeasuredMemory& measured, const StrategyMemory& strategy, int64_t batch,
                                uint64_t device_memory) {
  // Far past any device at a byte per sample; a model whose bytes do not grow fits every batch.
  constexpr int64_t kLargestBatch = int64_t{1} << 30;
  MemoryPrediction prediction;
  prediction.batch_size = batch;
  prediction.bytes = device_bytes_under(strategy, replica_bytes_at(measured, batch));
  const uint64_t whole_run = total_bytes(device_bytes_under(strategy, whole_run_bytes_at(measured, batch)));
  prediction.set_up_excess_bytes =
      whole_run > prediction.step_peak_bytes() ? whole_run - prediction.step_peak_bytes() : 0;
  prediction.pinned_host_bytes = strategy.pinned_host_added;
  prediction.rule = strategy.rule;
  prediction.largest_batch = largest_batch_that_fits(
      device_memory, [&](int64_t b) { return total_bytes(device_bytes_under(strategy, replica_bytes_at(measured, b))); },
      kLargestBatch);
  return prediction;
}

std::vector<int> predicted_gpu_counts(int max_gpus) {
  std::vector<int> counts;
  for (int n = 1; n <= max_gpus; n *= 2) {
    counts.push_back(n);
    if (n > max_gpus / 2) break;
  }
  if (counts.empty() || counts.back() != max_gpus) counts.push_back(max_gpus);
  return counts;
}

}  // namespace dpbench
