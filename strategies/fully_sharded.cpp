// FullyShardedStrategy (see the header): the shard plan, the communicators of the groups, the
// schedule that prices it and its summary; each replica's hooks are fully_sharded_units.h's.
#include "strategies/fully_sharded.h"

#include <algorithm>
#include <string>

#include "engine/backends.h"
#include "engine/communication/process_group.h"
#include "engine/errors.h"
#include "strategies/exchange_meter.h"
#include "strategies/fully_sharded_units.h"
#include "strategies/unit_slots.h"

namespace dpbench {
namespace {

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// The shard group a job of `shape` has under `options`.
int shard_group_of(const StrategyOptions& options, const ScheduleShape& shape) {
  return options.shard_group_size > 0 ? std::min(options.shard_group_size, shape.world) : shape.world;
}

// `units`, or where a model published none (an older result), the bucket plan's ranges as units:
// backward produces them in the plan's order, so forward uses them in reverse.
ParameterUnits units_or_plan(const ParameterUnits& units, const std::vector<GradientRange>& plan) {
  if (!units.empty()) return units;
  ParameterUnits from_plan;
  for (size_t i = 0; i < plan.size(); ++i) from_plan.units.push_back({"range " + std::to_string(i), plan[i]});
  for (size_t i = plan.size(); i-- > 0;) from_plan.uses.push_back({static_cast<int>(i), UnitPass::forward, false});
  for (size_t i = 0; i < plan.size(); ++i) from_plan.uses.push_back({static_cast<int>(i), UnitPass::backward, true});
  return from_plan;
}

// The slot plan a run on a shard group of `k` makes for `units`.
UnitSlotPlan slot_plan_of(const StrategyOptions& options, const ParameterUnits& units, int k) {
  std::vector<size_t> padded;
  for (const ParameterUnit& unit : units.units)
    padded.push_back(ceil_div(unit.range.count, static_cast<size_t>(k)) * static_cast<size_t>(k));
  return plan_unit_slots(padded, units.uses, options.prefetch_units, options.reshard_after_forward);
}

}  // namespace

FullyShardedStrategy::FullyShardedStrategy(const StrategyOptions& options, const DevicePlacement& placement)
    : options_(options), num_processes_(placement.num_processes), process_rank_(placement.process_rank),
      world_(placement.world_devices()), local_replicas_(placement.num_devices()) {}

FullyShardedStrategy::~FullyShardedStrategy() = default;

int FullyShardedStrategy::group_size() const {
  return options_.shard_group_size > 0 ? options_.shard_group_size : world_;
}

std::vector<std::vector<ResidentChunk>> FullyShardedStrategy::plan_shards(const ParameterLayout& layout,
                                                                          const ParameterUnits& units,
                                                                          int num_replicas) {
  local_replicas_ = num_replicas;
  world_ = num_replicas * num_processes_;
  if (units.empty()) {
    // On one device nothing is gathered or reduced (Note [a group of one]): the whole model is one unit.
    if (world_ > 1)
      throw ConfigError("--variable_update=fully_sharded: this model publishes no parameter units (every model "
                        "of the zoo does; Note [parameter units] in engine/training/model.h says how), so it runs "
                        "on one device only; use --variable_update=" +
                        std::string(num_processes_ > 1 ? "distributed_all_reduce" : "replicated") +
                        " --sharded_update=true for it");
    ParameterUnits whole;
    whole.units.push_back({"model", GradientRange{0, layout.total_count()}});
    return plan_shards(layout, whole, num_replicas);
  }
  const int k = group_size();
  if (k > world_ || world_ % k != 0)
    throw ConfigError("--shard_group_size=" + std::to_string(k) + ": does not divide the " + std::to_string(world_) +
                      " devices into equal groups; give a divisor of " + std::to_string(world_));
  size_t expected = 0;
  for (const ParameterUnit& unit : units.units) {
    if (unit.range.offset != expected)
      throw RuntimeError("fully_sharded: the model's units do not tile its parameters ('" + unit.name + "')");
    expected = unit.range.end();
  }
  if (expected != layout.total_count())
    throw RuntimeError("fully_sharded: the model's units leave parameters outside every unit");
  units_ = units;
  chunk_.clear();
  shard_offset_.clear();
  std::vector<size_t> padded;
  size_t offset = 0;
  for (const ParameterUnit& unit : units.units) {
    const size_t chunk = ceil_div(unit.range.count, static_cast<size_t>(k));
    chunk_.push_back(chunk);
    shard_offset_.push_back(offset);
    padded.push_back(chunk * static_cast<size_t>(k));
    offset += chunk;
  }
  plan_ = plan_unit_slots(padded, units.uses, options_.prefetch_units, options_.reshard_after_forward);
  if (k == 1) return {};  // Note [a group of one]
  std::vector<std::vector<ResidentChunk>> shards(static_cast<size_t>(num_replicas));
  for (int r = 0; r < num_replicas; ++r) {
    const size_t q = static_cast<size_t>(shard_rank(r));
    for (size_t u = 0; u < units.units.size(); ++u) {
      const GradientRange& range = units.units[u].range;
      const size_t start = std::min(q * chunk_[u], range.count);
      const size_t count = std::min(chunk_[u], range.count - start);
      shards[static_cast<size_t>(r)].push_back(ResidentChunk{range.offset + start, count, chunk_[u]});
    }
  }
  return shards;
}

void FullyShardedStrategy::setup(const ParameterLayout& layout, std::vector<Replica>& replicas) {
  replicas_ = replicas;
  local_replicas_ = static_cast<int>(replicas.size());
  const int k = group_size();
  create_groups(replicas);
  for (const Replica& replica : replicas) {
    replica.device->make_current();
    meters_.push_back(std::make_unique<ExchangeMeter>(*replica.device));
    state_.push_back(std::make_unique<ReplicaUnits>(*this, replica, layout));
    if (k > 1) replica.parameters->set_residence(state_.back().get());
  }
  measured_from_.resize(replicas.size());
}

// In one process: a communicator per group over its devices, each device seated at its rank
// there. Across processes: this process's two groups (Note [groups across processes]).
void FullyShardedStrategy::create_groups(const std::vector<Replica>& replicas) {
  const int k = group_size();
  shard_seats_.assign(replicas.size(), Seat{});
  replica_seats_.assign(replicas.size(), Seat{});
  if (num_processes_ > 1) {
    if (replicas.size() != 1)
      throw ConfigError("--variable_update=fully_sharded across processes drives one device per process; start one "
                        "process per device");
    create_process_groups(*replicas.front().device);
    return;
  }
  if (k > 1)
    for (int g = 0; g < world_ / k; ++g) {
      std::vector<Device*> devices;
      for (int q = 0; q < k; ++q) devices.push_back(replicas[static_cast<size_t>(g * k + q)].device);
      shard_groups_.push_back(create_communicator(devices));
      for (int q = 0; q < k; ++q) shard_seats_[static_cast<size_t>(g * k + q)] = Seat{shard_groups_.back().get(), q};
    }
  if (crosses_groups())
    for (int q = 0; q < k; ++q) {
      std::vector<Device*> devices;
      for (int g = 0; g < world_ / k; ++g) devices.push_back(replicas[static_cast<size_t>(g * k + q)].device);
      replica_groups_.push_back(create_communicator(devices));
      for (int g = 0; g < world_ / k; ++g)
        replica_seats_[static_cast<size_t>(g * k + q)] = Seat{replica_groups_.back().get(), g};
    }
}

void FullyShardedStrategy::create_process_groups(Device& device) {
  const ProcessGroup* job = process_group();
  if (job == nullptr || job->size() != world_)
    throw RuntimeError("fully_sharded across processes needs the run's process group, one rank per device");
  const int k = group_size(), me = world_index(0);
  // The group of `members` (ranks of the job, ascending), the job itself where it is all of them.
  auto communicator_of = [&](const std::vector<int>& members) {
    if (static_cast<int>(members.size()) == world_) return create_process_communicator(device, *job);
    process_subgroups_.push_back(std::make_unique<ProcessSubgroup>(*job, members));
    return create_process_communicator(device, *process_subgroups_.back());
  };
  if (k > 1) {
    std::vector<int> members;
    for (int q = 0; q < k; ++q) members.push_back(me - me % k + q);
    shard_groups_.push_back(communicator_of(members));
    shard_seats_.front() = Seat{shard_groups_.back().get(), 0};
  }
  if (crosses_groups()) {
    std::vector<int> members;
    for (int g = 0; g < world_ / k; ++g) members.push_back(g * k + me % k);
    replica_groups_.push_back(communicator_of(members));
    replica_seats_.front() = Seat{replica_groups_.back().get(), 0};
  }
}

UnitHooks* FullyShardedStrategy::unit_hooks(int replica) { return state_.at(static_cast<size_t>(replica)).get(); }

void FullyShardedStrategy::finish_step(int replica, int64_t step) { state_.at(static_cast<size_t>(replica))->finish(step); }

bool FullyShardedStrategy::step_is_replayable() const {
  for (const auto& group : shard_groups_)
    if (!group->capturable()) return false;
  for (const auto& group : replica_groups_)
    if (!group->capturable()) return false;
  return true;
}

void FullyShardedStrategy::abort() {
  for (const auto& group : shard_groups_) group->abort();
  for (const auto& group : replica_groups_) group->abort();
}

void FullyShardedStrategy::begin_measurement() {
  for (size_t r = 0; r < meters_.size(); ++r) measured_from_[r] = meters_[r]->totals();
}

std::vector<double> FullyShardedStrategy::exposed_comm_ms_per_step(int64_t measured_steps) const {
  if (measured_steps <= 0 || (group_size() == 1 && !crosses_groups())) return {};
  std::vector<double> waits;
  for (size_t r = 0; r < meters_.size(); ++r)
    waits.push_back((meters_[r]->totals().wait_ms - measured_from_[r].wait_ms) / static_cast<double>(measured_steps));
  return waits;
}

RangeSchedule FullyShardedStrategy::unit_schedule(const ParameterUnit& unit) const {
  size_t index = 0;
  while (index < units_.units.size() && units_.units[index].name != unit.name) ++index;
  int gathers = 0;
  for (const PlannedUse& use : plan_.uses) gathers += use.unit == static_cast<int>(index) && use.gathers ? 1 : 0;
  StrategyOptions options = options_;
  options.shard_group_size = group_size();
  ScheduleShape shape;
  shape.world = world_;
  shape.ranks_per_host = world_;
  StepSchedule one = schedule_for(options, ParameterLayout{}, {unit.range}, shape);
  RangeSchedule schedule = one.ranges.front();
  // The planned gathers, not the estimate: a unit still held is not gathered again.
  std::vector<ScheduledCollective> steps;
  for (const ScheduledCollective& step : schedule.steps)
    if (step.collective != Collective::all_gather) steps.push_back(step);
  if (group_size() > 1) {
    ScheduledCollective gather = schedule.steps.front();
    std::vector<ScheduledCollective> gathered = {gather};
    const DataType copy = state_.empty() ? DataType::f32 : state_.front()->copy_type();
    if (copy != DataType::f32) {  // Note [what travels]: the chunk in 16 bits, then the vectors' pack
      gather.width = static_cast<double>(data_type_bytes(copy)) / sizeof(float);
      gather.bytes *= gather.width;
      gathered = {gather};
      const size_t pack = state_.front()->pack_count(index);
      if (pack > 0) {
        ScheduledCollective vectors = gather;
        vectors.width = 1;
        vectors.bytes = static_cast<double>(pack) * group_size() * sizeof(float);
        gathered.push_back(vectors);
      }
    }
    for (int g = 0; g < gathers; ++g) steps.insert(steps.begin(), gathered.begin(), gathered.end());
  }
  schedule.steps = steps;
  return schedule;
}

StepSchedule FullyShardedStrategy::schedule_for(const StrategyOptions& options, const ParameterLayout& /*layout*/,
                                                const std::vector<GradientRange>& units, const ScheduleShape& shape) {
  const int k = options.shard_group_size > 0 ? std::min(options.shard_group_size, shape.world) : shape.world;
  const int groups = std::max(1, shape.world / std::max(1, k));
  StepSchedule schedule;
  schedule.update = UpdatePlacement::after_all;
  schedule.update_share = 1.0 / k;
  for (const GradientRange& unit : units) {
    RangeSchedule range;
    range.message_bytes = static_cast<double>(unit.count) * sizeof(float);
    const size_t chunk = ceil_div(unit.count, static_cast<size_t>(k));
    const double padded_bytes = static_cast<double>(chunk) * k * sizeof(float);
    if (k > 1) {
      for (int g = 0; g < (options.reshard_after_forward ? 2 : 1); ++g) {
        ScheduledCollective gather;
        gather.collective = Collective::all_gather;
        gather.bytes = padded_bytes;
        gather.ranks = k;
        gather.span = k == shape.world ? StepRanks::job : StepRanks::inside_host;
        range.steps.push_back(gather);
      }
      ScheduledCollective reduce;
      reduce.collective = Collective::reduce_scatter;
      const bool half = options.reduce_precision == ReducePrecision::bf16;
      reduce.width = half ? 0.5 : 1.0;
      reduce.bytes = padded_bytes * reduce.width;
      reduce.ranks = k;
      reduce.span = k == shape.world ? StepRanks::job : StepRanks::inside_host;
      range.steps.push_back(reduce);
    }
    if (groups > 1) {
      ScheduledCollective across;
      across.collective = Collective::all_reduce;
      across.bytes = static_cast<double>(k > 1 ? chunk : unit.count) * sizeof(float);
      across.ranks = groups;
      across.span = k == shape.ranks_per_host ? StepRanks::across_hosts : StepRanks::job;
      across.concurrent = k == shape.ranks_per_host ? k : 1;
      range.steps.push_back(across);
    }
    schedule.ranges.push_back(range);
  }
  return schedule;
}

StepSchedule FullyShardedStrategy::step_schedule(const StrategyOptions& options, const ParameterLayout& layout,
                                                 const std::vector<GradientRange>& plan, const ScheduleShape& shape,
                                                 const ParameterUnits& published) {
  const ParameterUnits units = units_or_plan(published, plan);
  std::vector<GradientRange> ranges;
  for (const ParameterUnit& unit : units.units) ranges.push_back(unit.range);
  StepSchedule schedule = schedule_for(options, layout, ranges, shape);
  const int k = shard_group_of(options, shape);
  if (k <= 1 || units.uses.empty()) return schedule;
  const UnitSlotPlan slots = slot_plan_of(options, units, k);
  // Each range's gathers: one per use the slot plan gathers for, not the estimate's one or two.
  std::vector<int> gathers(ranges.size(), 0);
  for (const PlannedUse& use : slots.uses) gathers[static_cast<size_t>(use.unit)] += use.gathers ? 1 : 0;
  for (size_t r = 0; r < schedule.ranges.size(); ++r) {
    std::vector<ScheduledCollective>& steps = schedule.ranges[r].steps;
    const ScheduledCollective gather = steps.front();  // schedule_for puts the gathers first
    steps.erase(std::remove_if(steps.begin(), steps.end(),
                               [](const ScheduledCollective& step) { return step.collective == Collective::all_gather; }),
                steps.end());
    ScheduledCollective planned = gather;
    planned.after = StepAfter::unit_use;
    // Under a 16-bit weight copy the unit travels in 16 bits, and its vectors (Note [what
    // travels]) in fp32 after it, each owner's pack about 1/K of them.
    planned.width = options.gathered_element_bytes / static_cast<double>(sizeof(float));
    planned.bytes *= planned.width;
    std::vector<ScheduledCollective> gathered = {planned};
    const size_t vectors = units.units[r].vector_elements;
    if (planned.width < 1 && vectors > 0) {
      ScheduledCollective pack = planned;
      pack.after = StepAfter::with_gather;
      pack.width = 1;
      pack.bytes = static_cast<double>(ceil_div(vectors, static_cast<size_t>(k)) * static_cast<size_t>(k) * sizeof(float));
      gathered.push_back(pack);
    }
    for (int g = 0; g < gathers[r]; ++g) steps.insert(steps.begin(), gathered.begin(), gathered.end());
  }
  for (size_t j = 0; j < slots.uses.size(); ++j) {
    const PlannedUse& planned = slots.uses[j];
    ScheduledUse use;
    use.range = planned.unit;
    use.backward = planned.pass == UnitPass::backward;
    use.gathers = planned.gathers;
    use.issues_gathers_of = slots.gathers_issued_at[j];
    use.gather_waits_for = planned.gathers ? planned.slot_freed_by : -1;
    use.reduces = planned.reduces_gradients;
    schedule.uses.push_back(use);
  }
  return schedule;
}

StrategyMemory FullyShardedStrategy::memory_for(const StrategyOptions& options, const ParameterLayout& /*layout*/,
                                                const std::vector<GradientRange>& plan, const ScheduleShape& shape,
                                                const ParameterUnits& published) {
  const int k = shard_group_of(options, shape);
  StrategyMemory memory;
  memory.added[static_cast<size_t>(MemoryCategory::trace)] = ExchangeMeter::kDeviceBytes;
  for (MemoryCategory kept : {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::optimizer_state})
    memory.kept[static_cast<size_t>(kept)] = k > 1 ? 1.0 / k : 1.0;
  // Without the shards' 16-bit copies (Note [what travels]): of a mixed-precision replica's
  // parameters (4 bytes of fp32 and 2 of copy per element) only the fp32 part's 1/N stays.
  const bool mixed = options.gathered_element_bytes < static_cast<int>(sizeof(float));
  const bool cast_at_gather = k > 1 && mixed && !options.shard_weight_copy;
  if (cast_at_gather)
    memory.kept[static_cast<size_t>(MemoryCategory::parameters)] =
        sizeof(float) / static_cast<double>(sizeof(float) + options.gathered_element_bytes) / k;
  memory.rule = std::string("each device keeps 1/N of the parameters") +
                (cast_at_gather ? " (fp32, no 16-bit copy)" : "") +
                ", gradients and optimizer state, and the slots its unit plan allocates (gathered units in the weight "
                "copy's type, fp32 unit gradients, each slot the largest unit it holds)";
  const ParameterUnits units = units_or_plan(published, plan);
  if (k <= 1 || units.uses.empty()) return memory;
  const UnitSlotPlan slots = slot_plan_of(options, units, k);
  uint64_t parameter_slots = 0, gradient_slots = 0, largest_gradient_slot = 0, largest_chunk = 0;
  // Under a 16-bit weight copy a slot holds the unit in 16 bits (and its fp32 vectors, a few
  // biases and norm scales, left out here).
  for (size_t elements : slots.parameter_slot_elements)
    parameter_slots += std::max<size_t>(elements, 1) * static_cast<uint64_t>(options.gathered_element_bytes);
  for (size_t elements : slots.gradient_slot_elements) {
    gradient_slots += elements * sizeof(float);
    largest_gradient_slot = std::max<uint64_t>(largest_gradient_slot, elements);
  }
  for (const ParameterUnit& unit : units.units)
    largest_chunk = std::max<uint64_t>(largest_chunk, ceil_div(unit.range.count, static_cast<size_t>(k)));
  memory.added[static_cast<size_t>(MemoryCategory::parameters)] = parameter_slots;
  memory.added[static_cast<size_t>(MemoryCategory::gradients)] = gradient_slots;
  // The bf16 reduction's staging: the largest gradient slot and the largest chunk, 2 bytes each;
  // rounding at each gather, the gathers' staging: the largest chunk in 16 bits.
  uint64_t& staging = memory.added[static_cast<size_t>(MemoryCategory::communication)];
  if (options.reduce_precision == ReducePrecision::bf16)
    staging += std::max<uint64_t>(largest_gradient_slot, 1) * 2 + std::max<uint64_t>(largest_chunk, 1) * 2;
  if (cast_at_gather) staging += std::max<uint64_t>(largest_chunk, 1) * static_cast<uint64_t>(options.gathered_element_bytes);
  return memory;
}

nlohmann::json FullyShardedStrategy::communication_summary(int64_t measured_steps) const {
  std::vector<RangeSchedule> ranges;
  for (const ParameterUnit& unit : units_.units) ranges.push_back(unit_schedule(unit));
  const ScheduleTraffic traffic = traffic_of(ranges);
  const int k = group_size();
  nlohmann::json comm;
  comm["exchange"] = k == 1 ? (crosses_groups() ? "all-reduce per unit (shard groups of one)"
                                                : "none (one device: nothing to gather or reduce)")
                            : std::string("per unit: all-gather (") + gathered_type() + "), reduce-scatter (" +
                                  (options_.reduce_precision == ReducePrecision::bf16 ? "bf16" : "fp32") + ")" +
                                  (crosses_groups() ? ", all-reduce across groups" : "");
  comm["communicator"] = shard_groups_.empty() ? (replica_groups_.empty() ? "none" : replica_groups_.front()->description())
                                               : shard_groups_.front()->description();
  comm["units"] = units_.units.size();
  comm["shard_group_size"] = k;
  comm["parameter_slots"] = plan_.parameter_slot_elements.size();
  comm["gradient_slots"] = plan_.gradient_slot_elements.size();
  comm["gathered_bytes"] = in_flight_bytes();
  comm["collectives_per_step"] = traffic.collectives;
  comm["bytes_per_step"] = traffic.bytes;
  comm["bytes_sent_per_device_per_step"] = traffic.bytes_sent;
  double sizes = 0;  // the collectives' sizes as nccl-tests counts them, in the types they travel in
  for (const RangeSchedule& range : ranges)
    for (const ScheduledCollective& step : range.steps) sizes += step.bytes;
  comm["collective_bytes_per_step"] = sizes;
  comm["transfer_type"] = gathered_type();
  comm["reduce_precision"] = options_.reduce_precision == ReducePrecision::bf16 ? "bf16" : "fp32";
  comm["overlap"] = true;
  comm["embedding_exchange"] = "dense";
  comm["busbw_formula"] = "each collective's nccl-tests size x its bus factor ((k-1)/k for all-gather and "
                          "reduce-scatter over a group of k, 2(g-1)/g for the all-reduce across g groups), summed";
  if (measured_steps <= 0 || meters_.empty()) return comm;
  const double transfer_min_ms = record_measured_exchange_times(meters_, measured_from_, measured_steps, comm);
  if (transfer_min_ms > 0) {
    const double seconds = transfer_min_ms * 1e-3;
    comm["algbw_gbps"] = traffic.bytes / seconds / 1e9;
    comm["busbw_gbps"] = traffic.bus_bytes / seconds / 1e9;
  }
  return comm;
}

// The type units are gathered in (Note [what travels]).
std::string FullyShardedStrategy::gathered_type() const {
  const DataType copy = state_.empty() ? DataType::f32 : state_.front()->copy_type();
  return copy == DataType::f32 ? "fp32" : std::string(data_type_name(copy)) + ", vectors fp32";
}

// What one device holds beyond its shard: the parameter slots (fp32, and the 16-bit copy under
// mixed precision) and the gradient slots. Nothing with groups of one.
double FullyShardedStrategy::in_flight_bytes() const {
  if (group_size() == 1 || state_.empty()) return 0;
  return state_.front()->slot_bytes();
}

void FullyShardedStrategy::place_shard(const float* shard, int owner, std::vector<float>& whole) const {
  for (size_t u = 0; u < units_.units.size(); ++u) {
    const GradientRange& range = units_.units[u].range;
    const size_t start = std::min(static_cast<size_t>(owner) * chunk_[u], range.count);
    const size_t count = std::min(chunk_[u], range.count - start);
    std::copy_n(shard + shard_offset_[u], count, whole.begin() + static_cast<std::ptrdiff_t>(range.offset + start));
  }
}

std::vector<float> FullyShardedStrategy::assembled_parameters(int replica) const {
  const int k = group_size();
  if (k == 1) return {};
  const Replica& self = replicas_.at(static_cast<size_t>(replica));
  std::vector<float> whole(self.parameters->layout().total_count(), 0.0f);
  const size_t shard = self.parameters->count();  // every owner's: its padded chunks
  if (num_processes_ > 1) {
    // The other owners' shards live in other processes: all-gathered through the shard group,
    // which every rank of the job does here at once (each its own group's).
    Device& device = *self.device;
    device.make_current();
    Buffer gathered = device.allocate(shard * static_cast<size_t>(k) * sizeof(float),
                                      MemoryTag{MemoryCategory::scratch, "fully_sharded assembled parameters"});
    const Seat& seat = shard_seat(replica);
    seat.group->all_gather(seat.rank, self.parameters->parameters(), gathered.data(), shard, DataType::f32,
                           StreamKind::communication);
    device.synchronize();
    std::vector<float> owners(shard * static_cast<size_t>(k));
    device.copy_to_host(owners.data(), gathered.data(), owners.size() * sizeof(float));
    for (int q = 0; q < k; ++q) place_shard(owners.data() + static_cast<size_t>(q) * shard, q, whole);
    return whole;
  }
  const int group = replica / k;
  for (int q = 0; q < k; ++q) {
    const Replica& owner = replicas_.at(static_cast<size_t>(group * k + q));
    owner.device->make_current();
    place_shard(owner.parameters->download().data(), q, whole);
  }
  return whole;
}

}  // namespace dpbench
