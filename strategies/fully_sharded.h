// `fully_sharded` (ZeRO-3, PyTorch FSDP): each device keeps 1/K of every unit's fp32 parameters,
// gradients and optimizer state (K = --shard_group_size, every device by default) as one flat
// shard. Before the model uses a unit (Note [parameter units] in engine/training/model.h) the
// unit is all-gathered into a slot of a fixed pool on the communication stream,
// --prefetch_units uses ahead; after its last use in a step its gradients are reduce-scattered
// into the owners' shards (--reduce_precision), and each device updates its own shard. With
// K < N the shards' gradients are then all-reduced across the N/K groups (hybrid sharding).
//
// Note [what travels]: under fp32 a unit is gathered as its fp32 values. Under fp16/bf16 it is
// gathered in 16 bits: by default from each shard's 16-bit copy, which the update refreshes (as
// ZeRO-3 keeps its partitioned 16-bit parameters); with --shard_weight_copy=false each owner
// rounds its fp32 chunk into a staging buffer just before the gather instead, as FSDP2 casts at
// each all-gather: a third less parameter memory per device (no copy between steps) for a
// rounding pass over the chunk per gather, measured 1% (gpt 124m) to 5% (blocks of width 4096)
// slower on 2 H200 (docs/BENCHMARKS.md). Either way the 16 bits are the same; but dpbench's layers read biases and norm scales in fp32 beside the 16-bit weights, so
// a unit's vectors (its rank-1 tensors) also travel in fp32: each owner packs the pieces of them
// in its chunk, the packs are all-gathered, and the pieces are copied into the slot's compact
// fp32 part. A layer reading a matrix in fp32 under fp16/bf16 is refused. The layers then read
// exactly what replicated's read, so training is bit for bit the same.
//
// Note [a group of one]: with K = 1 every device holds whole units, so nothing is gathered:
// the replica's ordinary buffers serve the model and only the all-reduce across groups (if any)
// is left, after each unit's last gradient-writing use. N = 1 is then exactly one device
// training alone, with nothing but the hooks' bookkeeping added.
//
// Note [groups across processes]: under a launcher (one process per GPU) device w of the job is
// process w's only device, and its groups are the same as in one process: shard group w / K
// (ranks w - w % K ... + K - 1), replica group w % K (every K-th rank). Each is a communicator
// over a ProcessSubgroup of the job (the whole job where a group spans it), which every rank
// makes in the same order and then calls in the same order: every rank runs the same plan.
#pragma once

#include <memory>
#include <vector>

#include "engine/backend/device_placement.h"
#include "engine/communication/collective_schedule.h"
#include "engine/communication/communicator.h"
#include "engine/communication/process_subgroup.h"
#include "engine/training/strategy.h"
#include "strategies/exchange_meter.h"
#include "strategies/strategy_options.h"
#include "strategies/unit_slots.h"

namespace dpbench {

class FullyShardedStrategy final : public Strategy {
 public:
  FullyShardedStrategy(const StrategyOptions& options, const DevicePlacement& placement);
  ~FullyShardedStrategy() override;
  std::string name() const override { return "fully_sharded"; }
  std::vector<std::vector<ResidentChunk>> plan_shards(const ParameterLayout& layout, const ParameterUnits& units,
                                                      int num_replicas) override;
  void setup(const ParameterLayout& layout, std::vector<Replica>& replicas) override;
  UnitHooks* unit_hooks(int replica) override;
  void on_gradients_ready(int replica, GradientRange range, const Event& ready) override {}
  void finish_step(int replica, int64_t step) override;
  bool step_is_replayable() const override;
  bool shards_keep_weight_copy() const override { return options_.shard_weight_copy; }
  void begin_measurement() override;
  nlohmann::json communication_summary(int64_t measured_steps) const override;
  std::vector<double> exposed_comm_ms_per_step(int64_t measured_steps) const override;
  std::vector<float> assembled_parameters(int replica) const override;
  void abort() override;

  // What it issues per step, as data (engine/communication/collective_schedule.h): each of
  // `units` all-gathered once (twice when resharded after forward), its gradients
  // reduce-scattered, and with groups smaller than the job the shard all-reduced across them.
  // `dpbench predict` passes its exchange plan's ranges as the units; not knowing the run's
  // precision, it prices fp32 gathers (a run's own summary.comm prices its 16-bit ones).
  static StepSchedule schedule_for(const StrategyOptions& options, const ParameterLayout& layout,
                                   const std::vector<GradientRange>& units, const ScheduleShape& shape);
  // The whole step as the run plans it, for `dpbench predict`: one range per unit of `units`
  // (the bucket plan's ranges standing in for units a model did not publish, used forward in
  // reverse and backward in order), its gathers those of the slot plan (plan_unit_slots, with
  // the options' prefetch and resharding) and the uses that issue them (StepSchedule::uses).
  static StepSchedule step_schedule(const StrategyOptions& options, const ParameterLayout& layout,
                                    const std::vector<GradientRange>& plan, const ScheduleShape& shape,
                                    const ParameterUnits& units);
  // Its memory rule (StrategyMemory): each device keeps 1/K (K: the shard group) of the
  // parameters, gradients and optimizer state, and adds the slots the slot plan allocates for
  // `units` (as step_schedule takes them): fp32 parameter slots and gradient slots, each as large
  // as the largest padded unit it holds.
  static StrategyMemory memory_for(const StrategyOptions& options, const ParameterLayout& layout,
                                   const std::vector<GradientRange>& plan, const ScheduleShape& shape,
                                   const ParameterUnits& units);

 private:
  class ReplicaUnits;
  // A replica's place in one of its groups: the group's communicator and the rank it calls it
  // as (its rank in the group in one process; 0, its process's one device, across processes).
  struct Seat {
    Communicator* group = nullptr;
    int rank = 0;
  };
  int group_size() const;  // K
  bool crosses_groups() const { return group_size() < world_; }
  // Replica `replica` of this process as a device of the job (Note [groups across processes]),
  // and which owner of each unit's chunks it is in its shard group.
  int world_index(int replica) const { return process_rank_ * local_replicas_ + replica; }
  int shard_rank(int replica) const { return world_index(replica) % group_size(); }
  // Its shard group (K devices) and its replica group (one device of each shard group, the same
  // owner in each).
  const Seat& shard_seat(int replica) const { return shard_seats_.at(static_cast<size_t>(replica)); }
  const Seat& replica_seat(int replica) const { return replica_seats_.at(static_cast<size_t>(replica)); }
  void create_groups(const std::vector<Replica>& replicas);
  void create_process_groups(Device& device);
  // Owner `owner`'s shard (its chunk of every unit, one after the other) into the whole layout.
  void place_shard(const float* shard, int owner, std::vector<float>& whole) const;
  RangeSchedule unit_schedule(const ParameterUnit& unit) const;
  double in_flight_bytes() const;
  std::string gathered_type() const;

  StrategyOptions options_;
  int num_processes_ = 1, process_rank_ = 0;  // the run's DevicePlacement
  int world_ = 1;
  int local_replicas_ = 1;  // this process's
  ParameterUnits units_;
  std::vector<size_t> chunk_;         // per unit: elements each device of a group keeps
  std::vector<size_t> shard_offset_;  // per unit: where its chunk starts in a device's shard
  UnitSlotPlan plan_;
  std::vector<Replica> replicas_;
  std::vector<std::unique_ptr<ReplicaUnits>> state_;
  std::vector<std::unique_ptr<ProcessSubgroup>> process_subgroups_;  // under the communicators below
  std::vector<std::unique_ptr<Communicator>> shard_groups_, replica_groups_;
  std::vector<Seat> shard_seats_, replica_seats_;                    // per replica of this process
  std::vector<std::unique_ptr<ExchangeMeter>> meters_;
  std::vector<ExchangeTimes> measured_from_;
};

}  // namespace dpbench
