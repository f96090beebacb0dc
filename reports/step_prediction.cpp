// The step simulation (see step_prediction.h).
#include "reports/step_prediction.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>

namespace dpbench {
namespace {

double ceil_log2(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n))); }

// ms to move `bytes` at `gb_per_s` (GB = 1e9 bytes).
double transfer_ms(double bytes, double gb_per_s) { return bytes / (gb_per_s * 1e6); }

// One transfer on the communication stream: it may start once `ready_ms` (from backward's start)
// has passed and the stream is free, and occupies the stream for `cost_ms`, slowing compute
// beside it by `slowdown` (Note [compute beside communication]).
struct CommJob {
  double ready_ms = 0, cost_ms = 0, slowdown = 0;
};

// A stretch of time during which the communication stream runs a transfer that slows compute
// beside it by `slowdown` (> 0).
struct SlowStretch {
  double start_ms = 0, end_ms = 0, slowdown = 0;
};

// The stream's stretches so far, in time order (the stream runs one transfer at a time); a
// transfer that slows nothing is left out, so that without slowdowns compute ends exactly where
// it did before.
void add_stretch(std::vector<SlowStretch>& stretches, double start_ms, double end_ms, double slowdown) {
  if (slowdown > 0 && end_ms > start_ms) stretches.push_back({start_ms, end_ms, slowdown});
}

// Note [compute beside communication]: when compute of `work_ms` alone, started at `from_ms`,
// ends, progressing at 1 / (1 + s) through each stretch of `stretches` and at 1 elsewhere.
double compute_end_ms(double from_ms, double work_ms, const std::vector<SlowStretch>& stretches) {
  double now = from_ms, left = work_ms;
  for (const SlowStretch& stretch : stretches) {
    if (stretch.end_ms <= now) continue;
    if (stretch.start_ms > now) {
      if (left <= stretch.start_ms - now) return now + left;
      left -= stretch.start_ms - now;
      now = stretch.start_ms;
    }
    const double done_inside = (stretch.end_ms - now) / (1 + stretch.slowdown);
    if (left <= done_inside) return now + left * (1 + stretch.slowdown);
    left -= done_inside;
    now = stretch.end_ms;
  }
  return now + left;
}

// When the stream has run every job, in order (ms from backward's start).
double stream_end_ms(const std::vector<CommJob>& jobs) {
  double free_at = 0;
  for (const CommJob& job : jobs) free_at = std::max(free_at, job.ready_ms) + job.cost_ms;
  return free_at;
}

// When the compute stream has updated every bucket, each once its job has ended and after
// backward (ms from backward's start); a bucket's update takes its share of the bytes.
double updated_by_bucket_ms(const std::vector<CommJob>& jobs, const std::vector<BucketReady>& buckets,
                            double backward_ms, double update_ms, double total_bytes) {
  double comm_free = 0, compute_free = backward_ms;
  for (size_t i = 0; i < jobs.size(); ++i) {
    comm_free = std::max(comm_free, jobs[i].ready_ms) + jobs[i].cost_ms;
    const double share = total_bytes > 0 ? buckets[i].bytes / total_bytes : 0.0;
    compute_free = std::max(compute_free, comm_free) + update_ms * share;
  }
  return compute_free;
}

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

double MeasuredCurveCost::compute_slowdown(Collective op, double bytes, int ranks, LinkKind link) const {
  const Curve* measured = ranks > 1 ? curve_for(op, link, ranks) : nullptr;
  const bool has_slowdown = measured != nullptr && std::all_of(measured->begin(), measured->end(), [](const Point& p) {
                              return p.compute_slowdown.has_value();
                            });
  if (!has_slowdown) return fallback_->compute_slowdown(op, bytes, ranks, link);
  const Curve& curve = *measured;
  if (bytes <= curve.front().bytes) return *curve.front().compute_slowdown;
  if (bytes >= curve.back().bytes) return *curve.back().compute_slowdown;
  const auto upper = std::upper_bound(curve.begin(), curve.end(), bytes,
                                      [](double size, const Point& point) { return size < point.bytes; });
  const Point& high = *upper;
  const Point& low = *(upper - 1);
  const double t = (std::log2(bytes) - std::log2(low.bytes)) / (std::log2(high.bytes) - std::log2(low.bytes));
  return *low.compute_slowdown + t * (*high.compute_slowdown - *low.compute_slowdown);
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
                                 const std::function<double(const ScheduledCollective&)>& cost_ms,
                                 const std::function<double(const ScheduledCollective&)>& slowdown) {
  const std::vector<ScheduledUse>& uses = schedule.uses;
  const std::vector<double> compute = use_compute_ms(measured, schedule);
  // Each range's g-th gather costs its g-th gather step; its other steps are its reduction, which
  // slows compute by its steps' slowdowns weighted by their times.
  std::vector<std::vector<CommJob>> gathers(schedule.ranges.size());
  std::vector<CommJob> reductions(schedule.ranges.size());
  for (size_t r = 0; r < schedule.ranges.size(); ++r) {
    double slowed_ms = 0;
    for (const ScheduledCollective& step : schedule.ranges[r].steps) {
      const double ms = cost_ms(step);
      if (step.after == StepAfter::unit_use) {
        gathers[r].push_back({0, ms, slowdown(step)});
      } else {
        reductions[r].cost_ms += ms;
        slowed_ms += ms * slowdown(step);
      }
    }
    if (reductions[r].cost_ms > 0) reductions[r].slowdown = slowed_ms / reductions[r].cost_ms;
  }
  // Note [compute beside communication]: every transfer that can run beside a use's compute is on
  // the stream before that compute is placed (gathers issued at its begin start no earlier than
  // it; reductions follow a use's end).
  std::vector<SlowStretch> stretches;
  auto place = [&](double start_ms, const CommJob& job) {
    if (system.communication_overlaps_compute) add_stretch(stretches, start_ms, start_ms + job.cost_ms, job.slowdown);
    prediction.comm_ms += job.cost_ms;
    return start_ms + job.cost_ms;
  };
  std::vector<size_t> gathers_done(schedule.ranges.size(), 0);
  std::vector<double> gathered_at(uses.size(), 0.0), ended_at(uses.size(), 0.0);
  double stream_free = 0, compute_free = 0;
  for (size_t j = 0; j < uses.size(); ++j) {
    for (int g : uses[j].issues_gathers_of) {
      const ScheduledUse& target = uses[static_cast<size_t>(g)];
      const size_t r = static_cast<size_t>(target.range);
      const std::vector<CommJob>& jobs = gathers[r];
      const CommJob job = jobs.empty() ? CommJob{} : jobs[std::min(gathers_done[r]++, jobs.size() - 1)];
      const double slot_free = target.gather_waits_for >= 0 ? ended_at[static_cast<size_t>(target.gather_waits_for)] : 0.0;
      stream_free = place(std::max(stream_free, slot_free), job);
      gathered_at[static_cast<size_t>(g)] = stream_free;
    }
    const double start = std::max(compute_free, uses[j].gathers ? gathered_at[j] : 0.0);
    ended_at[j] = compute_end_ms(start, compute[j], stretches);
    compute_free = ended_at[j];
    if (uses[j].reduces) stream_free = place(std::max(stream_free, ended_at[j]), reductions[static_cast<size_t>(uses[j].range)]);
  }
  // Backward's compute of no unit (after the last unit's gradients) follows the last use.
  double backward_placed = 0;
  for (size_t j = 0; j < uses.size(); ++j) backward_placed += uses[j].backward ? compute[j] : 0.0;
  const double compute_end =
      compute_end_ms(compute_free, std::max(0.0, measured.backward_ms - backward_placed), stretches);
  const double one_gpu = measured.forward_ms + measured.backward_ms;
  prediction.exposed_comm_ms = system.communication_overlaps_compute
                                   ? std::max(0.0, std::max(compute_end, stream_free) - one_gpu)
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
  // (Note [alpha-beta collectives]).
  auto cost_ms = [&](const ScheduledCollective& step) {
    const LinkKind crossed = step.span == StepRanks::job            ? link
                             : step.span == StepRanks::inside_host ? LinkKind::intra_host
                                                                   : LinkKind::inter_host;
    return cost.collective_ms(step.collective, step.bytes * std::max(1, step.concurrent), step.ranks, crossed);
  };
  // Note [compute beside communication]: a measured speed-up beside a transfer is noise, not priced.
  auto slowdown = [&](const ScheduledCollective& step) {
    const LinkKind crossed = step.span == StepRanks::job            ? link
                             : step.span == StepRanks::inside_host ? LinkKind::intra_host
                                                                   : LinkKind::inter_host;
    return std::max(0.0, cost.compute_slowdown(step.collective, step.bytes * std::max(1, step.concurrent), step.ranks,
                                               crossed));
  };

  if (!schedule.uses.empty()) return predict_unit_step(measured, schedule, prediction, system, cost_ms, slowdown);

  std::vector<CommJob> during;  // started by backward, one per bucket
  double after_ms = 0;          // transfers that wait for the update (parameters travelling back)
  for (size_t i = 0; i < measured.buckets.size() && i < schedule.ranges.size(); ++i) {
    const BucketReady& bucket = measured.buckets[i];
    const RangeSchedule& range = schedule.ranges[i];
    double job_ms = 0, slowed_ms = 0;  // slowed_ms: the job's steps' times, each times its slowdown
    bool waits_for_backward = false;
    // The bucket's share of the update, split as the schedule says, runs after its first step.
    bool update_pending = schedule.update == UpdatePlacement::in_exchange;
    for (const ScheduledCollective& step : range.steps) {
      if (step.after == StepAfter::update) {
        after_ms += cost_ms(step);
        continue;
      }
      waits_for_backward = waits_for_backward || step.after == StepAfter::backward;
      const double step_ms = cost_ms(step);
      job_ms += step_ms;
      slowed_ms += step_ms * slowdown(step);
      if (update_pending) {
        job_ms += total_bytes > 0 ? measured.update_ms * bucket.bytes / total_bytes / std::max(1, schedule.update_split) : 0;
        update_pending = false;
      }
    }
    // A job that waits for backward is marked ready at its end (negative); placed below.
    during.push_back({waits_for_backward ? -1.0 : bucket.ready_ms, job_ms, job_ms > 0 ? slowed_ms / job_ms : 0.0});
    prediction.comm_ms += job_ms;
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
  const bool by_bucket = system.communication_overlaps_compute && !measured.update_waits_for_every_exchange &&
                         schedule.update == UpdatePlacement::each_range;
  // Note [compute beside communication]: backward and the stream together. Each bucket is ready
  // when backward's progress, slowed by the transfers before it, reaches its 1-GPU ready time.
  const bool overlaps = system.communication_overlaps_compute;
  std::vector<SlowStretch> stretches;
  double stream_free = 0;
  for (CommJob& job : during) {
    if (job.ready_ms >= 0) job.ready_ms = compute_end_ms(0, job.ready_ms, stretches);
    else job.ready_ms = compute_end_ms(0, measured.backward_ms, stretches);
    const double start = std::max(stream_free, job.ready_ms);
    stream_free = start + job.cost_ms;
    if (overlaps) add_stretch(stretches, start, stream_free, job.slowdown);
  }
  const double backward_end = compute_end_ms(0, measured.backward_ms, stretches);
  double during_exposed = 0;
  if (by_bucket) {
    const double updated = updated_by_bucket_ms(during, measured.buckets, backward_end, update_ms, total_bytes);
    during_exposed = std::max(0.0, updated - measured.backward_ms - update_ms);
  } else {
    during_exposed = overlaps ? std::max(backward_end, stream_end_ms(during)) - measured.backward_ms
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
