// fully_sharded's side of one replica (strategies/fully_sharded.h): its slots and events, the
// hooks its model calls around each use of a unit (gathers, reductions), and the residence that
// resolves the model's tensors into the slots. Included by fully_sharded.cpp only.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/step_trace.h"
#include "engine/errors.h"
#include "strategies/fully_sharded.h"

namespace dpbench {

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
    // Automatic loss scaling: each device holds its shard's gradients only; the shard group sums
    // their flags, so every device skips or applies the step as one look at every gradient would
    // (the replica groups' all-reduce already gave each group the same shards).
    if (whole_) {
      optimizer.begin_update(params.gradients(), params.count());
    } else {
      const Seat& seat = s_.shard_seat(replica_.index);
      optimizer.begin_shared_update(params.gradients(), params.count(), [&](float* flag) {
        seat.group->all_reduce(seat.rank, flag, flag, 1, DataType::f32, ReduceOp::sum, StreamKind::compute);
      });
    }
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
                         ", " + (pass == UnitPass::forward ? "forward" : "backward") + ") is not use " + std::to_string(next_use_) +
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
    if (mixed && replica_.parameters->weight_copy() == nullptr) {
      size_t largest_chunk = 0;
      for (size_t chunk : s_.chunk_) largest_chunk = std::max(largest_chunk, chunk);
      gather_staging_ = device_.allocate(std::max<size_t>(largest_chunk, 1) * data_type_bytes(copy_type_),
                                         MemoryTag{MemoryCategory::communication, "fully_sharded 16-bit gather staging"});
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
    const Seat& seat = s_.shard_seat(replica_.index);
    Communicator& group = *seat.group;
    const int rank = s_.shard_rank(replica_.index);
    ParameterSet& params = *replica_.parameters;
    if (copy_type_ == DataType::f32) {
      group.all_gather(seat.rank, params.parameters() + s_.shard_offset_[u], slot, chunk, DataType::f32,
                       StreamKind::communication);
    } else {  // Note [what travels]: the chunk in 16 bits, and the vectors' fp32 values packed
      Backend& ops = device_.ops(StreamKind::communication);
      const size_t half = data_type_bytes(copy_type_);
      const void* own = static_cast<const char*>(params.weight_copy()) + s_.shard_offset_[u] * half;
      if (params.weight_copy() == nullptr) {
        // One staging buffer serves every gather: the stream rounds each after the gather before.
        ops.convert(DataType::f32, params.parameters() + s_.shard_offset_[u], copy_type_, gather_staging_.data(), chunk);
        own = gather_staging_.data();
      }
      group.all_gather(seat.rank, own, half_slots_[static_cast<size_t>(use.parameter_slot)].data(), chunk, copy_type_,
                       StreamKind::communication);
      const size_t pack = pack_count_[u];
      if (pack > 0) {
        float* send = pack_send_.as<float>();
        float* received = pack_received_.as<float>();
        const size_t own_start = static_cast<size_t>(rank) * chunk;
        for (const VectorPiece& piece : pieces_[u])
          if (piece.rank == rank)
            ops.copy(send + piece.pack_offset,
                     params.parameters() + s_.shard_offset_[u] + (piece.unit_offset - own_start),
                     piece.count * sizeof(float));
        group.all_gather(seat.rank, send, received, pack, DataType::f32, StreamKind::communication);
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
      const Seat& seat = s_.shard_seat(index);
      if (s_.options_.reduce_precision == ReducePrecision::bf16) {
        Backend& ops = device_.ops(StreamKind::communication);
        ops.convert(DataType::f32, unit_gradients, DataType::bf16, reduce_staging_.data(), padded);
        seat.group->reduce_scatter(seat.rank, reduce_staging_.data(), shard_staging_.data(), chunk, DataType::bf16,
                                   ReduceOp::average, StreamKind::communication);
        ops.convert(DataType::bf16, shard_staging_.data(), DataType::f32, own, chunk);
      } else {
        seat.group->reduce_scatter(seat.rank, unit_gradients, own, chunk, DataType::f32, ReduceOp::average,
                                   StreamKind::communication);
      }
    }
    if (s_.crosses_groups()) {
      const Seat& across = s_.replica_seat(index);
      across.group->all_reduce(across.rank, own, own, whole_ ? s_.units_.units[u].range.count : chunk, DataType::f32,
                               ReduceOp::average, StreamKind::communication);
    }
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
  Buffer gather_staging_;  // --shard_weight_copy=false: the own chunk rounded, the all-gather's input
  std::vector<int> parameter_slot_of_, gradient_slot_of_;  // per unit: its slot now; -1: none
  std::vector<Buffer> parameter_slots_, half_slots_, gradient_slots_;
  Buffer reduce_staging_, shard_staging_;
  std::vector<std::unique_ptr<Event>> use_done_, gathered_, reduced_;
  std::unique_ptr<Event> step_started_, exchanged_;
  size_t next_use_ = 0;
};

}  // namespace dpbench
