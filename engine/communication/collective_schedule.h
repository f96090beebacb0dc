// What an exchange issues, as data: per gradient range, its schedule of collectives (which
// `Collective`, how many bytes, over which ranks, on which stream, after what). Every exchange
// method and the parameter server publish one (strategies/), and everything that counts or prices
// an exchange reads it: the result's traffic (traffic_of, here), `dpbench predict`'s simulation
// (reports/step_prediction.h), the tests that hold each schedule to what the run moved. It is a
// plain record in the engine because both the strategies that write it and the reports that price
// it may include the engine and neither may include the other; a copy that the CLI converted
// would be a second description to keep in step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/communication/collective_traffic.h"

namespace dpbench {

// The device stream a step runs on (engine/backend/device.h's StreamKind, less what no exchange uses).
enum class ScheduleStream { compute, communication, host_copy };

// What a step waits for besides the step before it on its stream (the first step of a range
// waits for the range's gradients).
enum class StepAfter {
  previous,  // nothing more
  backward,  // the whole backward (--overlap_comm=false)
  update,    // the optimizer's update of the range: the parameters travelling back
  // A gather of the range's parameters before one of its uses (fully_sharded's units): when it
  // is issued and what it waits for are StepSchedule::uses'; each such step is one gather.
  unit_use,
  // Part of the unit_use step before it: issued with that gather, after it (fully_sharded's fp32
  // vectors beside a unit gathered in 16 bits, Note [what travels] in strategies/fully_sharded.h).
  with_gather,
};

// The ranks a step spans: the whole job's, those of one host, or one rank of each host (the
// hierarchical all-reduce's middle step).
enum class StepRanks { job, inside_host, across_hosts };

struct ScheduledCollective {
  Collective collective = Collective::all_reduce;
  double bytes = 0;  // its size as nccl-tests counts it (collective_traffic.h), in the type it travels in
  double width = 1;  // bytes of that type per fp32 byte (0.5 for fp16, bf16): bus bytes count fp32
  int ranks = 1;     // ranks taking part (a copy between devices: 2; to or from the host: 1)
  StepRanks span = StepRanks::job;
  // How many such steps run at once through one host's network: across hosts every rank of a
  // host issues its own (the ranks per host), together the host's whole share.
  int concurrent = 1;
  ScheduleStream stream = ScheduleStream::communication;
  StepAfter after = StepAfter::previous;
};

// One gradient range's exchange on one device, per step, in the order the device issues it.
struct RangeSchedule {
  double message_bytes = 0;  // the logical message: fp32 bytes this replica contributes (algbw's)
  std::vector<ScheduledCollective> steps;
  // Set where a method counts its bus bandwidth as the flat collective it replaces, over
  // `busbw_ranks` ranks with `message_bytes` as its size, so that a series compares the two (the
  // hierarchical all-reduce, the host's sum): otherwise each step's own bus bytes add up.
  std::optional<Collective> busbw_as;
  int busbw_ranks = 1;
};

// One use of a range in the model's step, in the model's order (fully_sharded: a unit's use in
// forward or backward, Note [parameter units] in engine/training/model.h), with the collectives
// its slot plan issues around it: before the use's compute, the gathers it issues (for itself or,
// prefetched, for later uses), on the communication stream in that order; after it, where it is
// the unit's last writing use, the range's other steps (the reduction).
struct ScheduledUse {
  int range = 0;          // index into StepSchedule::ranges
  bool backward = false;  // its pass
  bool gathers = false;   // its range is gathered for it (else its slot still holds it)
  std::vector<int> issues_gathers_of;  // the uses whose gathers start when this use begins
  int gather_waits_for = -1;  // its own gather waits for this use's compute (its slot's holder); -1: none
  bool reduces = false;       // its range's reduction steps follow its compute
};

// Where a strategy's optimizer update runs against its exchanges.
enum class UpdatePlacement {
  each_range,   // a range's update follows its own exchange on the compute stream
  after_all,    // one update once every exchange is done
  in_exchange,  // inside each range's exchange, between its steps (the sharded update)
  at_owners,    // on the owners of the master copy, at once, each its own tensors
};

// A step's exchange on one device: every planned range's schedule, and where the update runs.
struct StepSchedule {
  std::vector<RangeSchedule> ranges;  // in the plan's order (the order backward produces them)
  // Where the ranges are units gathered before their uses: every use of the step, in order.
  // Empty: each range's steps start once backward has produced its gradients.
  std::vector<ScheduledUse> uses;
  UpdatePlacement update = UpdatePlacement::after_all;
  // The share of one device's whole update that the busiest device runs: at_owners, the largest
  // owner's share; in_exchange, 1 / update_split (each device updates its 1/N of every range).
  double update_share = 1;
  int update_split = 1;
  // Non-empty where the exchange runs in one process, on one host: why ("the host parameter
  // server runs in one process").
  std::string one_host_only;
};

// The shape of the job a schedule is for: its ranks and how they sit on hosts.
struct ScheduleShape {
  int world = 1;          // ranks (replicas) of the whole job
  int ranks_per_host = 1;
  int hosts = 1;
};

// What a device's exchanges cost per step, summed over ranges.
struct ScheduleTraffic {
  double bytes = 0;         // the logical message: fp32 gradient bytes each replica contributes
  double bytes_sent = 0;    // bytes one device sends, on average (collective_send_factor)
  double bus_bytes = 0;     // busbw x transfer time: each step's nccl-tests size (fp32) x bus factor
  int64_t collectives = 0;  // collective calls (or copies of our own) per device
};

// The one place where a schedule becomes traffic. Sizes of one collective over one rank count and
// width are summed before a factor multiplies them, so a schedule of many steps rounds as one sum.
ScheduleTraffic traffic_of(const std::vector<RangeSchedule>& ranges);

}  // namespace dpbench
