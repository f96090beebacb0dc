// ParameterServerStrategy (see the header).
#include "strategies/parameter_server.h"

#include <algorithm>
#include <numeric>

#include "engine/backend/step_trace.h"
#include "engine/backends.h"
#include "engine/errors.h"
#include "engine/training/optimizer.h"
#include "strategies/exchange_meter.h"

namespace dpbench {

std::vector<int> place_tensors(const ParameterLayout& layout, int num_devices) {
  const std::vector<TensorView>& tensors = layout.tensors();
  std::vector<int> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return tensors[a].count > tensors[b].count; });
  std::vector<size_t> load(num_devices, 0);
  std::vector<int> owner(tensors.size(), 0);
  for (int id : order) {
    const int least = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[id] = least;
    load[least] += tensors[id].count;
  }
  return owner;
}

std::vector<size_t> owned_counts(const ParameterLayout& layout, const std::vector<int>& owner_of_tensor,
                                 int num_devices) {
  std::vector<size_t> owned(static_cast<size_t>(std::max(1, num_devices)), 0);
  for (size_t id = 0; id < layout.tensors().size(); ++id)
    owned[static_cast<size_t>(owner_of_tensor[id])] += layout.tensors()[id].count;
  return owned;
}

double largest_owned_share(const ParameterLayout& layout, int num_devices) {
  const std::vector<size_t> owned = owned_counts(layout, place_tensors(layout, num_devices), num_devices);
  const double total = static_cast<double>(std::accumulate(owned.begin(), owned.end(), size_t{0}));
  return total > 0 ? static_cast<double>(*std::max_element(owned.begin(), owned.end())) / total : 0.0;
}

std::vector<std::vector<ParameterServerStrategy::OwnedRange>> ParameterServerStrategy::runs_of(
    const ParameterLayout& layout, const std::vector<int>& owner_of_tensor, const std::vector<GradientRange>& plan) {
  // Tensors by offset, then each planned range as runs of consecutive tensors of one owner.
  std::vector<int> by_offset(layout.tensors().size());
  std::iota(by_offset.begin(), by_offset.end(), 0);
  std::sort(by_offset.begin(), by_offset.end(),
            [&](int a, int b) { return layout.tensors()[a].offset < layout.tensors()[b].offset; });
  std::vector<std::vector<OwnedRange>> all;
  for (const GradientRange& range : plan) {
    std::vector<OwnedRange> runs;
    for (int id : by_offset) {
      const GradientRange tensor = layout.extent(id);  // its aligning gap included
      if (tensor.count == 0 || tensor.offset < range.offset || tensor.offset >= range.end()) continue;
      if (!runs.empty() && runs.back().owner == owner_of_tensor[id] && runs.back().range.end() == tensor.offset)
        runs.back().range.count += tensor.count;
      else
        runs.push_back(OwnedRange{GradientRange{tensor.offset, tensor.count}, owner_of_tensor[id]});
    }
    all.push_back(std::move(runs));
  }
  return all;
}

StepSchedule ParameterServerStrategy::schedule_for(const StrategyOptions& options, const ParameterLayout& layout,
                                                   const std::vector<GradientRange>& plan, const ScheduleShape& shape) {
  StepSchedule schedule;
  auto step = [](Collective collective, size_t count, int ranks, StepAfter after) {
    ScheduledCollective scheduled;
    scheduled.collective = collective;
    scheduled.bytes = static_cast<double>(count) * sizeof(float);
    scheduled.ranks = ranks;
    scheduled.after = after;
    return scheduled;
  };
  if (options.local_parameter_device == "cpu") {
    schedule.update = UpdatePlacement::after_all;
    schedule.one_host_only = "the host parameter server runs in one process, on one host";
    for (const GradientRange& range : plan) {
      RangeSchedule exchange;
      exchange.message_bytes = static_cast<double>(range.count) * sizeof(float);
      exchange.steps.push_back(step(Collective::copy_to_host, range.count, 1, StepAfter::previous));
      schedule.ranges.push_back(std::move(exchange));
    }
    if (!schedule.ranges.empty())
      schedule.ranges.back().steps.push_back(
          step(Collective::copy_from_host, layout.total_count(), 1, StepAfter::update));
    return schedule;
  }
  schedule.update = UpdatePlacement::at_owners;
  schedule.update_share = largest_owned_share(layout, shape.world);
  const std::vector<std::vector<OwnedRange>> runs = runs_of(layout, place_tensors(layout, shape.world), plan);
  for (size_t index = 0; index < plan.size(); ++index) {
    RangeSchedule exchange;
    exchange.message_bytes = static_cast<double>(plan[index].count) * sizeof(float);
    for (const OwnedRange& run : runs[index])
      exchange.steps.push_back(step(Collective::reduce, run.range.count, shape.world, StepAfter::previous));
    for (const OwnedRange& run : runs[index])
      exchange.steps.push_back(step(Collective::broadcast, run.range.count, shape.world, StepAfter::update));
    schedule.ranges.push_back(std::move(exchange));
  }
  return schedule;
}

StrategyMemory ParameterServerStrategy::memory_for(const StrategyOptions& options, const ParameterLayout& layout,
                                                  const std::vector<GradientRange>& /*plan*/,
                                                  const ScheduleShape& /*shape*/) {
  StrategyMemory memory;
  memory.added[static_cast<size_t>(MemoryCategory::trace)] = ExchangeMeter::kDeviceBytes;
  if (options.local_parameter_device == "cpu") {
    memory.pinned_host_added = 3 * layout.total_count() * sizeof(float);  // master, sum, staging (prepare)
    memory.rule = "every device holds a whole replica; the master copy, the gradients' sum and the staging are "
                  "in page-locked host memory";
  } else {
    memory.rule = "every device holds a whole replica and its optimizer state (each owner updates only its "
                  "tensors)";
  }
  return memory;
}

// --local_parameter_device=cpu: the master copy, its gradients' sum and the optimizer on the host.
struct ParameterServerStrategy::HostServer {
  std::unique_ptr<Device> host;       // a reference device: the optimizer's state lives in its memory
  std::unique_ptr<Optimizer> optimizer;
  Buffer master;                      // fp32 parameters, pinned
  Buffer gradient_sum;                // fp32, pinned
  std::vector<Buffer> staging;        // per replica: its gradients, pinned
  std::vector<std::unique_ptr<Event>> staged, fetched, backward_end;
  std::unique_ptr<Event> updated;     // on device 0's communication stream, after the host update
  HostThreadPool threads;
  std::unique_ptr<Rendezvous<const Event*>> rendezvous;
  std::vector<int64_t> steps_done;    // per replica, touched only by its own thread
};

ParameterServerStrategy::ParameterServerStrategy(const StrategyOptions& options, const DevicePlacement& placement)
    : BucketedExchangeStrategy(options, placement), on_cpu_(options.local_parameter_device == "cpu") {
  if (options.compact_gradient_transfer != TransferWidth::full)
    throw ConfigError("--compact_gradient_transfer is for --variable_update=replicated");
  if (options.sparse_embedding_grads)
    throw ConfigError("--sparse_embedding_grads is for --variable_update=replicated");
}

ParameterServerStrategy::~ParameterServerStrategy() = default;

// On the host, the replicas' threads meet in a rendezvous (the communicator is the GPUs').
void ParameterServerStrategy::abort_exchanges() {
  if (host_) host_->rendezvous->abort();
}

void ParameterServerStrategy::prepare(const ParameterLayout& layout) {
  const int n = world_size();
  const size_t count = layout.total_count();
  schedule_ = schedule_for(options(), layout, plan(), ScheduleShape{n, n, 1});
  if (!on_cpu_) {
    owner_of_tensor_ = place_tensors(layout, n);
    bytes_owned_ = owned_counts(layout, owner_of_tensor_, n);
    for (size_t& owned : bytes_owned_) owned *= sizeof(float);
    runs_ = runs_of(layout, owner_of_tensor_, plan());
    create_exchange_communicator();
    for (const Replica& replica : replicas()) {
      replica.device->make_current();
      reduced_.push_back(replica.device->create_event(false));
      updated_.push_back(replica.device->create_event(false));
      broadcast_.push_back(replica.device->create_event(false));
    }
    replicas().front().device->make_current();
    return;
  }

  // Automatic loss scaling never reaches here: a parameter server refuses it (strategy_registry.cpp,
  // Note [owners decide alone]), so the host update never has to skip a step.
  host_ = std::make_unique<HostServer>();
  HostServer& host = *host_;
  host.host = create_host_device();
  host.optimizer = std::make_unique<Optimizer>(*host.host, replicas().front().optimizer->config(), count);
  Device& first = *replicas().front().device;
  // Pinned host memory, counted beside device 0's (Note [pinned host memory in the ledger]).
  host.master =
      first.allocate_host_visible(count * sizeof(float), MemoryTag{MemoryCategory::parameters, "parameter_server"});
  host.gradient_sum =
      first.allocate_host_visible(count * sizeof(float), MemoryTag{MemoryCategory::gradients, "parameter_server"});
  first.copy_to_host(host.master.data(), replicas().front().parameters->parameters(), count * sizeof(float));
  for (const Replica& replica : replicas()) {
    replica.device->make_current();
    host.staging.push_back(replica.device->allocate_host_visible(
        count * sizeof(float), MemoryTag{MemoryCategory::communication, "parameter_server"}));
    host.staged.push_back(replica.device->create_event(false));
    host.fetched.push_back(replica.device->create_event(false));
    host.backward_end.push_back(replica.device->create_event(false));
  }
  first.make_current();
  host.updated = first.create_event(false);
  host.rendezvous = std::make_unique<Rendezvous<const Event*>>(n);
  host.steps_done.assign(n, 0);
}

void ParameterServerStrategy::exchange(int replica, size_t index, const Event& ready) {
  if (on_cpu_) exchange_through_host(replica, index, ready);
  else exchange_on_gpus(replica, index, ready);
}

void ParameterServerStrategy::complete_step(int replica, int64_t step) {
  if (on_cpu_) complete_through_host(replica, step);
  else complete_on_gpus(replica, step);
}

void ParameterServerStrategy::exchange_on_gpus(int replica, size_t index, const Event& ready) {
  const Replica& self = replicas()[replica];
  self.device->wait(StreamKind::communication, ready);
  meter(replica).begin_transfer(StreamKind::communication);
  float* gradients = self.parameters->gradients();
  communicator()->group_start(replica);
  for (const OwnedRange& run : runs_[index])
    communicator()->reduce(replica, gradients + run.range.offset, gradients + run.range.offset, run.range.count,
                           DataType::f32, ReduceOp::average, run.owner, StreamKind::communication);
  communicator()->group_end(replica);
  meter(replica).end_transfer(StreamKind::communication);
}

void ParameterServerStrategy::complete_on_gpus(int replica, int64_t step) {
  const Replica& self = replicas()[replica];
  Device& device = *self.device;
  ExchangeMeter& clocks = meter(replica);
  reduced_[replica]->record(StreamKind::communication);
  clocks.begin_wait();
  device.wait(StreamKind::compute, *reduced_[replica]);
  clocks.end_wait();
  // The owner updates its tensors from the mean gradients it now holds.
  float* parameters = self.parameters->parameters();
  const float* gradients = self.parameters->gradients();
  self.optimizer->begin_update(gradients, self.parameters->count());
  for (const auto& runs : runs_)
    for (const OwnedRange& run : runs)
      if (run.owner == world_rank(replica))
        self.optimizer->apply(parameters, gradients, run.range, step, StreamKind::compute, self.parameters);
  self.optimizer->end_update();
  updated_[replica]->record(StreamKind::compute);
  // Then every tensor travels back from its owner.
  device.wait(StreamKind::communication, *updated_[replica]);
  if (device.trace().recording())
    clocks.label_next_transfer("broadcast parameters", {{"bytes", self.parameters->count() * sizeof(float)},
                                                        {"exchange", "broadcast from each tensor's owner"}});
  clocks.begin_transfer(StreamKind::communication);
  communicator()->group_start(replica);
  for (const auto& runs : runs_)
    for (const OwnedRange& run : runs)
      communicator()->broadcast(replica, parameters + run.range.offset, parameters + run.range.offset,
                                run.range.count, DataType::f32, run.owner, StreamKind::communication);
  communicator()->group_end(replica);
  clocks.end_transfer(StreamKind::communication);
  self.parameters->refresh_weight_copy(GradientRange{0, self.parameters->count()}, StreamKind::communication);
  broadcast_[replica]->record(StreamKind::communication);
  clocks.begin_wait();
  device.wait(StreamKind::compute, *broadcast_[replica]);
  clocks.end_wait();
}

void ParameterServerStrategy::exchange_through_host(int replica, size_t index, const Event& ready) {
  HostServer& host = *host_;
  const GradientRange range = plan()[index];
  const int64_t step = host.steps_done[replica] + 1;  // every replica is in the same step here
  host.rendezvous->arrive(replica, &ready, [&](std::vector<const Event*>& ready_events) {
    const int n = num_replicas();
    for (int r = 0; r < n; ++r) {
      const Replica& other = replicas()[r];
      other.device->make_current();
      other.device->wait(StreamKind::communication, *ready_events[r]);
      meter(r).begin_transfer(StreamKind::communication);
      other.device->ops(StreamKind::communication)
          .copy(host.staging[r].as<float>() + range.offset, other.parameters->gradients() + range.offset,
                range.count * sizeof(float));
      meter(r).end_transfer(StreamKind::communication);
      host.staged[r]->record(StreamKind::communication);
    }
    Device& first = *replicas().front().device;
    first.make_current();
    for (int r = 0; r < n; ++r) first.wait(StreamKind::communication, *host.staged[r]);
    std::vector<const float*> parts;
    for (const Buffer& staging : host.staging) parts.push_back(staging.as<float>());
    float* sum = host.gradient_sum.as<float>();
    float* master = host.master.as<float>();
    HostServer* server = &host;
    const StepTrace::HostTimes traced = first.trace().deferred_host_span(
        HostTrack::host_workers, "host reduction and update " + std::to_string(index), "parameter server",
        {{"bucket", index}, {"elements", range.count}, {"threads", host.threads.threads()}});
    first.enqueue_host_function(StreamKind::communication, [=] {
      if (traced.begin_ns) *traced.begin_ns = host_clock_ns();
      const float inverse = 1.0f / static_cast<float>(parts.size());
      server->threads.parallel_for(range.count, [&](size_t begin, size_t end) {
        for (size_t e = range.offset + begin; e < range.offset + end; ++e) {
          float total = 0;
          for (const float* part : parts) total += part[e];  // replica order
          sum[e] = total * inverse;
        }
        server->optimizer->apply(master, sum, GradientRange{range.offset + begin, end - begin}, step,
                                 StreamKind::compute, nullptr);
      });
      if (traced.end_ns) *traced.end_ns = host_clock_ns();
    });
    host.updated->record(StreamKind::communication);
    replicas()[replica].device->make_current();
  });
}

void ParameterServerStrategy::complete_through_host(int replica, int64_t step) {
  HostServer& host = *host_;
  const Replica& self = replicas()[replica];
  Device& device = *self.device;
  ExchangeMeter& clocks = meter(replica);
  // The parameters may be overwritten only once this replica's backward no longer reads them, and
  // only with the values of the last range's update (the host updates ranges in order).
  host.backward_end[replica]->record(StreamKind::compute);
  device.wait(StreamKind::communication, *host.backward_end[replica]);
  device.wait(StreamKind::communication, *host.updated);
  if (device.trace().recording())
    clocks.label_next_transfer("fetch parameters", {{"bytes", self.parameters->count() * sizeof(float)},
                                                    {"exchange", "copy from the host's master parameters"}});
  clocks.begin_transfer(StreamKind::communication);
  device.ops(StreamKind::communication)
      .copy(self.parameters->parameters(), host.master.data(), self.parameters->count() * sizeof(float));
  clocks.end_transfer(StreamKind::communication);
  self.parameters->refresh_weight_copy(GradientRange{0, self.parameters->count()}, StreamKind::communication);
  host.fetched[replica]->record(StreamKind::communication);
  clocks.begin_wait();
  device.wait(StreamKind::compute, *host.fetched[replica]);
  clocks.end_wait();
  host.steps_done[replica] = step;
}

// From this run's schedule: on the GPUs a reduce and a broadcast of every byte (nccl-tests: busbw
// = algbw for each; owners spread evenly, the reduces send as a reduce-scatter and the broadcasts
// as an all-gather, an all-reduce's volume); on the host every device sends its gradients up and
// receives the parameters.
TrafficModel ParameterServerStrategy::traffic() const {
  TrafficModel model;
  const ScheduleTraffic traffic = traffic_of(schedule_.ranges);
  model.bytes_per_step = traffic.bytes;
  model.bytes_sent_per_device = traffic.bytes_sent;
  model.collectives_per_step = traffic.collectives;
  model.busbw_factor = traffic.bytes > 0 ? traffic.bus_bytes / traffic.bytes : 0.0;
  if (on_cpu_) {
    model.exchange = "parameter server on the host";
    model.communicator = "copies to and from pinned host memory; update on " +
                         std::to_string(host_->threads.threads()) + " host threads";
    model.busbw_formula = "each device sends its gradients and receives the parameters: busbw = algbw x 2";
  } else {
    model.exchange = "parameter server on the GPUs";
    std::string shares;
    for (size_t bytes : bytes_owned_) shares += (shares.empty() ? "" : "/") + std::to_string(bytes >> 20);
    model.communicator = communicator()->description() + " reduce + broadcast; MiB owned per GPU " + shares;
    model.busbw_formula = "reduce then broadcast, each busbw = algbw (nccl-tests): busbw = algbw x 2";
  }
  return model;
}

}  // namespace dpbench
