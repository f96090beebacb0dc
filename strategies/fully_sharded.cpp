// FullyShardedStrategy (see the header): the shard plan, the per-replica hooks that gather,
// reduce and resolve the model's tensors, and the schedule that prices it.
#include "strategies/fully_sharded.h"

#include <algorithm>
#include <string>

#include "engine/backend/step_trace.h"
#include "engine/backends.h"
#include "engine/errors.h"

namespace dpbench {
namespace {

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

const char* pass_name(UnitPass pass) { return pass == UnitPass::forward ? "forward" : "backward"; }

}  // namespace

// One replica's side: its slots and events, the hooks the model calls, and where its tensors are.
class FullyShardedStrategy::ReplicaUnits final : public UnitHooks, public TensorResidence {
 public:
  ReplicaUnits(FullyShardedStrategy& strategy, const Replica& replica, const ParameterLayout& layout)
      : s_(strategy), replica_(replica), device_(*replica.device), layout_(layout),
        whole_(strategy.group_size() == 1), copy_type_(replica.parameters->weight_copy_type()) {
    const ParameterUnits& units = s_.units_;
    const UnitSlotPlan& plan = s_.plan_;
    unit_of_tensor_.assign(layout.tensors().size(), -1);
    for (size_t u = 0; u < units.units.size(); ++u)
      for (size_t id = 0; id < layout.tensors().size(); ++id) {
        const size_t offset = layout.tensor(static_cast<int>(id)).offset;
        if (offset >= units.units[u].range.offset && offset < units.units[u].range.end())
          unit_of_tensor_[id] = static_cast<int>(u);
      }
    parameter_slot_of_.assign(units.units.size(), -1);
    gradient_slot_of_.assign(units.units.size(), -1);
    for (size_t j = 0; j < plan.uses.size(); ++j) {
      use_done_.push_back(device_.create_event(false));
      gathered_.push_back(device_.create_event(false));
    }
    step_started_ = device_.create_event(false);
    exchanged_ = device_.create_event(false);
    if (!whole_ && copy_type_ != DataType::f32) plan_vector_pieces();
    if (!whole_) allocate_slots();
  }

  void before_unit(int unit, UnitPass pass) override {
    const int j = expect(unit, pass, "before");
    if (whole_) return;
    const PlannedUse& use = s_.plan_.uses[static_cast<size_t>(j)];
    // The step's first gathers follow the last update on the compute stream (and the slots' last
    // reads): through an event recorded here, inside the step, so a captured step stays whole.
    if (j == 0) {
      step_started_->record(StreamKind::compute);
      device_.wait(StreamKind::communication, *step_started_);
    }
    for (int k : s_.plan_.gathers_issued_at[static_cast<size_t>(j)]) gather(k);
    if (use.gathers) wait_for(*gathered_[static_cast<size_t>(j)]);
    parameter_slot_of_[static_cast<size_t>(unit)] = use.parameter_slot;
    if (use.zeroes_gradients) {
      if (use.gradient_slot_freed_by_unit >= 0) wait_for(*reduced_[static_cast<size_t>(use.gradient_slot)]);
      Buffer& slot = gradient_slots_[static_cast<size_t>(use.gradient_slot)];
      device_.ops().fill(slot.as<float>(), s_.plan_.gradient_slot_elements[static_cast<size_t>(use.gradient_slot)], 0.0f);
      gradient_slot_of_[static_cast<size_t>(unit)] = use.gradient_slot;
    }
  }

  void after_unit(int unit, UnitPass pass) override {
    const int j = expect(unit, pass, "after");
    ++next_use_;
    const PlannedUse& use = s_.plan_.uses[static_cast<size_t>(j)];
    if (whole_ && !(use.reduces_gradients && s_.crosses_groups())) return;
    // Later gathers into this use's slot, and its unit's reduction, wait for its compute.
    use_done_[static_cast<size_t>(j)]->record(StreamKind::compute);
    if (!whole_) parameter_slot_of_[static_cast<size_t>(unit)] = -1;
    if (use.reduces_gradients) reduce(j);
  }

  float* parameter(int tensor_id) const override {
    if (copy_type_ == DataType::f32) return slot_parameters(tensor_id, DataType::f32, parameter_slots_);
    // Note [what travels]: under fp16/bf16 only the vectors come in fp32, packed.
    const size_t at = vector_offset_.at(static_cast<size_t>(tensor_id));
    if (at == kNotAVector)
      throw RuntimeError("fully_sharded: the model reads '" + layout_.tensor(tensor_id).name +
                         "' in fp32 under " + data_type_name(copy_type_) +
                         ", but units travel in the 16-bit copy with only their vectors (biases, norms) in fp32");
    const int slot = parameter_slot_of_[static_cast<size_t>(unit_of(tensor_id))];
    if (slot < 0) outside(tensor_id, "reads");
    return parameter_slots_[static_cast<size_t>(slot)].as<float>() + at;
  }
  const void* parameter_as(int tensor_id, DataType type) const override {
    if (type != copy_type_)
      throw RuntimeError(std::string("fully_sharded: a ") + data_type_name(type) + " op reads '" +
                         layout_.tensor(tensor_id).name + "' in a run whose weight copy is " + data_type_name(copy_type_));
    return static_cast<const void*>(slot_parameters(tensor_id, type, half_slots_));
  }
  float* gradient(int tensor_id) const override {
    const int unit = unit_of(tensor_id);
    const int slot = gradient_slot_of_[static_cast<size_t>(unit)];
    if (slot < 0) outside(tensor_id, "writes the gradient of");
    return gradient_slots_[static_cast<size_t>(slot)].as<float>() + element_in_unit(tensor_id);
  }

  void finish(int64_t step) {
    if (next_use_ != s_.plan_.uses.size())
      throw RuntimeError("the model ended its step after " + std::to_string(next_use_) + " of the " +
                         std::to_string(s_.plan_.uses.size()) + " unit uses it declared");
    next_use_ = 0;
    if (!whole_ || s_.crosses_groups()) {
      exchanged_->record(StreamKind::communication);
      wait_for(*exchanged_);
    }
    ParameterSet& params = *replica_.parameters;
    Optimizer& optimizer = *replica_.optimizer;
    optimizer.begin_update(params.gradients(), params.count());
    optimizer.apply(params.parameters(), params.gradients(), GradientRange{0, params.count()}, step,
                    StreamKind::compute, &params);
    optimizer.end_update();
  }

  ExchangeMeter& meter() { return *s_.meters_.at(static_cast<size_t>(replica_.index)); }
  // What the slots hold beyond the shard: bytes of the parameter and gradient slots.
  double slot_bytes() const {
    double bytes = 0;
    for (const auto* slots : {&parameter_slots_, &half_slots_, &gradient_slots_})
      for (const Buffer& slot : *slots) bytes += static_cast<double>(slot.bytes());
    return bytes;
  }
  // Under fp16/bf16: the elements of unit `unit`'s fp32 vector pack per owner; 0 otherwise.
  size_t pack_count(size_t unit) const { return pack_count_.empty() ? 0 : pack_count_.at(unit); }
  DataType copy_type() const { return copy_type_; }

 private:
  int expect(int unit, UnitPass pass, const char* where) const {
    const std::vector<UnitUse>& uses = s_.units_.uses;
    if (next_use_ >= uses.size() || uses[next_use_].unit != unit || uses[next_use_].pass != pass)
      throw RuntimeError(std::string("fully_sharded: the model's ") + where + "_unit(" + s_.units_.units.at(unit).name +
                         ", " + pass_name(pass) + ") is not use " + std::to_string(next_use_) +
                         " of the uses it declared");
    return static_cast<int>(next_use_);
  }

  void allocate_slots() {
    const UnitSlotPlan& plan = s_.plan_;
    const MemoryTag gathered{MemoryCategory::parameters, "fully_sharded gathered units"};
    const bool mixed = copy_type_ != DataType::f32;
    for (size_t elements : plan.parameter_slot_elements) {
      parameter_slots_.push_back(
          device_.allocate(std::max<size_t>(mixed ? largest_vectors_ : elements, 1) * sizeof(float), gathered));
      if (mixed) half_slots_.push_back(device_.allocate(elements * data_type_bytes(copy_type_), gathered));
    }
    if (mixed) {
      const MemoryTag packs{MemoryCategory::communication, "fully_sharded vector packs"};
      size_t largest_pack = 0;
      for (size_t count : pack_count_) largest_pack = std::max(largest_pack, count);
      pack_send_ = device_.allocate(std::max<size_t>(largest_pack, 1) * sizeof(float), packs);
      pack_received_ = device_.allocate(
          std::max<size_t>(largest_pack * static_cast<size_t>(s_.group_size()), 1) * sizeof(float), packs);
    }
    const MemoryTag unit_gradients{MemoryCategory::gradients, "fully_sharded unit gradients"};
    for (size_t elements : plan.gradient_slot_elements) {
      gradient_slots_.push_back(device_.allocate(elements * sizeof(float), unit_gradients));
      reduced_.push_back(device_.create_event(false));
    }
    if (s_.options_.reduce_precision == ReducePrecision::bf16) {
      const MemoryTag staging{MemoryCategory::communication, "fully_sharded bf16 reduction"};
      size_t largest = 0, largest_chunk = 0;
      for (size_t elements : plan.gradient_slot_elements) largest = std::max(largest, elements);
      for (size_t chunk : s_.chunk_) largest_chunk = std::max(largest_chunk, chunk);
      reduce_staging_ = device_.allocate(std::max<size_t>(largest, 1) * 2, staging);
      shard_staging_ = device_.allocate(std::max<size_t>(largest_chunk, 1) * 2, staging);
    }
  }

  void wait_for(const Event& event) {
    meter().begin_wait();
    device_.wait(StreamKind::compute, event);
    meter().end_wait();
  }

  // Use k's unit into its slot, on the communication stream.
  void gather(int k) {
    const PlannedUse& use = s_.plan_.uses[static_cast<size_t>(k)];
    const size_t u = static_cast<size_t>(use.unit);
    if (use.slot_freed_by >= 0) device_.wait(StreamKind::communication, *use_done_[static_cast<size_t>(use.slot_freed_by)]);
    const size_t chunk = s_.chunk_[u], k_ranks = static_cast<size_t>(s_.group_size());
    float* slot = parameter_slots_[static_cast<size_t>(use.parameter_slot)].as<float>();
    if (device_.trace().recording())
      meter().label_next_transfer("all-gather " + s_.units_.units[u].name,
                                  {{"unit", s_.units_.units[u].name}, {"bytes", chunk * k_ranks * sizeof(float)}});
    meter().begin_transfer(StreamKind::communication);
    Communicator& group = s_.shard_group(replica_.index);
    const int rank = s_.shard_rank(replica_.index);
    ParameterSet& params = *replica_.parameters;
    if (copy_type_ == DataType::f32) {
      group.all_gather(rank, params.parameters() + s_.shard_offset_[u], slot, chunk, DataType::f32,
                       StreamKind::communication);
    } else {  // Note [what travels]: the 16-bit copy, and the vectors' fp32 values packed
      const size_t half = data_type_bytes(copy_type_);
      group.all_gather(rank, static_cast<char*>(params.weight_copy()) + s_.shard_offset_[u] * half,
                       half_slots_[static_cast<size_t>(use.parameter_slot)].data(), chunk, copy_type_,
                       StreamKind::communication);
      const size_t pack = pack_count_[u];
      if (pack > 0) {
        Backend& ops = device_.ops(StreamKind::communication);
        float* send = pack_send_.as<float>();
        float* received = pack_received_.as<float>();
        const size_t own_start = static_cast<size_t>(rank) * chunk;
        for (const VectorPiece& piece : pieces_[u])
          if (piece.rank == rank)
            ops.copy(send + piece.pack_offset,
                     params.parameters() + s_.shard_offset_[u] + (piece.unit_offset - own_start),
                     piece.count * sizeof(float));
        group.all_gather(rank, send, received, pack, DataType::f32, StreamKind::communication);
        for (const VectorPiece& piece : pieces_[u])
          ops.copy(slot + piece.slot_offset, received + static_cast<size_t>(piece.rank) * pack + piece.pack_offset,
                   piece.count * sizeof(float));
      }
    }
    meter().end_transfer(StreamKind::communication);
    gathered_[static_cast<size_t>(k)]->record(StreamKind::communication);
  }

  // Use j was its unit's last gradient-writing use: its gradients go to their owners.
  void reduce(int j) {
    const PlannedUse& use = s_.plan_.uses[static_cast<size_t>(j)];
    const size_t u = static_cast<size_t>(use.unit);
    const int index = replica_.index;
    device_.wait(StreamKind::communication, *use_done_[static_cast<size_t>(j)]);
    if (device_.trace().recording())
      meter().label_next_transfer((whole_ ? "all-reduce " : "reduce-scatter ") + s_.units_.units[u].name,
                                  {{"unit", s_.units_.units[u].name}});
    meter().begin_transfer(StreamKind::communication);
    ParameterSet& params = *replica_.parameters;
    const size_t chunk = s_.chunk_[u], padded = chunk * static_cast<size_t>(s_.group_size());
    float* own = params.gradients() + (whole_ ? s_.units_.units[u].range.offset : s_.shard_offset_[u]);
    if (!whole_) {
      float* unit_gradients = gradient_slots_[static_cast<size_t>(use.gradient_slot)].as<float>();
      Communicator& group = s_.shard_group(index);
      if (s_.options_.reduce_precision == ReducePrecision::bf16) {
        Backend& ops = device_.ops(StreamKind::communication);
        ops.convert(DataType::f32, unit_gradients, DataType::bf16, reduce_staging_.data(), padded);
        group.reduce_scatter(s_.shard_rank(index), reduce_staging_.data(), shard_staging_.data(), chunk, DataType::bf16,
                             ReduceOp::average, StreamKind::communication);
        ops.convert(DataType::bf16, shard_staging_.data(), DataType::f32, own, chunk);
      } else {
        group.reduce_scatter(s_.shard_rank(index), unit_gradients, own, chunk, DataType::f32, ReduceOp::average,
                             StreamKind::communication);
      }
    }
    if (s_.crosses_groups())
      s_.replica_group(index).all_reduce(s_.replica_rank(index), own, own, whole_ ? s_.units_.units[u].range.count : chunk,
                                         DataType::f32, ReduceOp::average, StreamKind::communication);
    meter().end_transfer(StreamKind::communication);
    if (!whole_) {
      reduced_[static_cast<size_t>(use.gradient_slot)]->record(StreamKind::communication);
      gradient_slot_of_[u] = -1;
    }
  }

  // Under fp16/bf16: each unit's vectors (rank-1 tensors: biases, norm scales) cut at the
  // owners' chunk boundaries, each piece's place in its owner's pack and in the slot's compact
  // fp32 part (the unit's vectors one after the other).
  void plan_vector_pieces() {
    const size_t k = static_cast<size_t>(s_.group_size());
    vector_offset_.assign(layout_.tensors().size(), kNotAVector);
    pieces_.assign(s_.units_.units.size(), {});
    pack_count_.assign(s_.units_.units.size(), 0);
    for (size_t u = 0; u < s_.units_.units.size(); ++u) {
      const GradientRange& range = s_.units_.units[u].range;
      const size_t chunk = s_.chunk_[u];
      std::vector<size_t> packed(k, 0);
      size_t compact = 0;
      for (size_t id = layout_.tensors().size(); id-- > 0;) {  // in layout order
        const TensorView& tensor = layout_.tensor(static_cast<int>(id));
        if (unit_of_tensor_[id] != static_cast<int>(u) || tensor.shape.size() != 1) continue;
        vector_offset_[id] = compact;
        const size_t begin = tensor.offset - range.offset, end = begin + tensor.count;
        for (size_t at = begin; at < end;) {
          const size_t owner = at / chunk, stop = std::min(end, (owner + 1) * chunk);
          pieces_[u].push_back(VectorPiece{static_cast<int>(owner), at, stop - at, packed[owner], compact + (at - begin)});
          packed[owner] += stop - at;
          at = stop;
        }
        compact += tensor.count;
      }
      pack_count_[u] = *std::max_element(packed.begin(), packed.end());
      largest_vectors_ = std::max(largest_vectors_, compact);
    }
  }

  int unit_of(int tensor_id) const { return unit_of_tensor_.at(static_cast<size_t>(tensor_id)); }
  size_t element_in_unit(int tensor_id) const {
    return layout_.tensor(tensor_id).offset - s_.units_.units[static_cast<size_t>(unit_of(tensor_id))].range.offset;
  }
  [[noreturn]] void outside(int tensor_id, const char* what) const {
    throw RuntimeError(std::string("fully_sharded: the model ") + what + " '" + layout_.tensor(tensor_id).name +
                       "' outside a use of its unit (" + s_.units_.units[static_cast<size_t>(unit_of(tensor_id))].name +
                       "): bracket it with the unit's hooks");
  }
  float* slot_parameters(int tensor_id, DataType type, const std::vector<Buffer>& slots) const {
    const int slot = parameter_slot_of_[static_cast<size_t>(unit_of(tensor_id))];
    if (slot < 0) outside(tensor_id, "reads");
    char* base = static_cast<char*>(slots[static_cast<size_t>(slot)].data());
    return reinterpret_cast<float*>(base + element_in_unit(tensor_id) * data_type_bytes(type));
  }

  FullyShardedStrategy& s_;
  Replica replica_;
  Device& device_;
  const ParameterLayout& layout_;
  const bool whole_;
  const DataType copy_type_;
  std::vector<int> unit_of_tensor_;
  struct VectorPiece {
    int rank = 0;             // its owner in the shard group
    size_t unit_offset = 0;   // where it starts in the unit
    size_t count = 0;
    size_t pack_offset = 0;   // where it sits in its owner's pack
    size_t slot_offset = 0;   // where it goes in the slot's compact fp32 part
  };
  static constexpr size_t kNotAVector = static_cast<size_t>(-1);
  std::vector<size_t> vector_offset_;  // per tensor: its place in a slot's compact fp32 part
  std::vector<std::vector<VectorPiece>> pieces_;  // per unit
  std::vector<size_t> pack_count_;                // per unit: the largest owner's pack
  size_t largest_vectors_ = 0;
  Buffer pack_send_, pack_received_;
  std::vector<int> parameter_slot_of_, gradient_slot_of_;  // per unit: its slot now; -1: none
  std::vector<Buffer> parameter_slots_, half_slots_, gradient_slots_;
  Buffer reduce_staging_, shard_staging_;
  std::vector<std::unique_ptr<Event>> use_done_, gathered_, reduced_;
  std::unique_ptr<Event> step_started_, exchanged_;
  size_t next_use_ = 0;
};

FullyShardedStrategy::FullyShardedStrategy(const StrategyOptions& options, const DevicePlacement& placement)
    : options_(options), world_(placement.world_devices()) {
  if (placement.num_processes > 1)
    throw ConfigError("--variable_update=fully_sharded runs in one process (one process driving every GPU) for now");
}

FullyShardedStrategy::~FullyShardedStrategy() = default;

int FullyShardedStrategy::group_size() const {
  return options_.shard_group_size > 0 ? options_.shard_group_size : world_;
}

std::vector<std::vector<ResidentChunk>> FullyShardedStrategy::plan_shards(const ParameterLayout& layout,
                                                                          const ParameterUnits& units,
                                                                          int num_replicas) {
  world_ = num_replicas;
  if (units.empty()) {
    // On one device nothing is gathered or reduced (Note [a group of one]): the whole model is one unit.
    if (world_ > 1)
      throw ConfigError("--variable_update=fully_sharded: this model is not cut into parameter units (gpt and the "
                        "transformer are), so it runs on one device only; use --variable_update=replicated "
                        "--sharded_update=true for it");
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
    const size_t q = static_cast<size_t>(r % k);
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
  const int k = group_size();
  if (k > 1)
    for (int g = 0; g < world_ / k; ++g) {
      std::vector<Device*> devices;
      for (int q = 0; q < k; ++q) devices.push_back(replicas[static_cast<size_t>(g * k + q)].device);
      shard_groups_.push_back(create_communicator(devices));
    }
  if (crosses_groups())
    for (int q = 0; q < k; ++q) {
      std::vector<Device*> devices;
      for (int g = 0; g < world_ / k; ++g) devices.push_back(replicas[static_cast<size_t>(g * k + q)].device);
      replica_groups_.push_back(create_communicator(devices));
    }
  for (const Replica& replica : replicas) {
    replica.device->make_current();
    meters_.push_back(std::make_unique<ExchangeMeter>(*replica.device));
    state_.push_back(std::make_unique<ReplicaUnits>(*this, replica, layout));
    if (k > 1) replica.parameters->set_residence(state_.back().get());
  }
  measured_from_.resize(replicas.size());
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
    if (copy != DataType::f32) {  // Note [what travels]: the 16-bit copy, then the vectors' pack
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
  double transfer_ms = 0, transfer_min_ms = 0, wait_ms = 0, wait_max_ms = 0;
  for (size_t r = 0; r < meters_.size(); ++r) {
    const ExchangeTimes now = meters_[r]->totals();
    const double transfer = (now.transfer_ms - measured_from_[r].transfer_ms) / measured_steps;
    const double wait = (now.wait_ms - measured_from_[r].wait_ms) / measured_steps;
    transfer_ms += transfer / meters_.size();
    transfer_min_ms = r == 0 ? transfer : std::min(transfer_min_ms, transfer);
    wait_ms += wait / meters_.size();
    wait_max_ms = std::max(wait_max_ms, wait);
  }
  comm["transfer_ms_per_step"] = transfer_ms;
  comm["transfer_ms_per_step_min"] = transfer_min_ms;
  comm["exposed_comm_ms_per_step"] = wait_ms;
  comm["exposed_comm_ms_per_step_max"] = wait_max_ms;
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

std::vector<float> FullyShardedStrategy::assembled_parameters(int replica) const {
  const int k = group_size();
  if (k == 1) return {};
  const ParameterLayout& layout = replicas_.front().parameters->layout();
  std::vector<float> whole(layout.total_count(), 0.0f);
  const int group = replica / k;
  for (int q = 0; q < k; ++q) {
    const Replica& owner = replicas_.at(static_cast<size_t>(group * k + q));
    owner.device->make_current();
    const std::vector<float> shard = owner.parameters->download();
    size_t at = 0;
    for (const ResidentChunk& chunk : owner.parameters->chunks()) {
      std::copy_n(shard.begin() + static_cast<std::ptrdiff_t>(at), chunk.count,
                  whole.begin() + static_cast<std::ptrdiff_t>(chunk.layout_offset));
      at += chunk.padded_count;
    }
  }
  return whole;
}

}  // namespace dpbench
