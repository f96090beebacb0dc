// An exchange method: how one range of gradients travels between the replicas (dense all-reduce,
// half-width transfer, sharded update, sparse embedding rows, our peer algorithms). Each method
// is a unit of its own in this folder, in the spirit of PyTorch DDP's communication hooks: it
// prepares its buffers, enqueues the exchange of one range for one replica on the communication
// stream, and publishes what it issues for a range as data, its schedule of collectives
// (engine/communication/collective_schedule.h), from which its traffic, `dpbench predict` and the tests all
// price it. Strategies compose methods (strategies/replicated.h); exchange_methods.cpp is where
// they are chosen, for the run and for predict alike.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/communication/collective_schedule.h"
#include "engine/communication/communicator.h"
#include "engine/training/strategy.h"
#include "strategies/exchange_meter.h"

namespace dpbench {

// What the methods of one strategy share, fixed once the strategy has its replicas.
struct ExchangeContext {
  std::vector<Replica> replicas;        // this process's
  int world_size = 1;                   // replicas of the whole run (every process's)
  int first_world_rank = 0;             // world rank of replicas[0]
  std::vector<ExchangeMeter*> meters;   // per replica: its transfer and wait clocks
  Communicator* communicator = nullptr; // the strategy's, for methods that use one
  int world_rank(int replica) const { return first_world_rank + replica; }
};

// What exchanging some ranges once each costs one device (a step's worth, summed by the strategy
// into its TrafficModel, strategies/bucketed_exchange.h), computed from the method's schedule.
using ExchangeTraffic = ScheduleTraffic;

// What a method's buffers take on one device: device bytes, and page-locked host bytes the device
// reads and writes (counted beside its memory).
struct ExchangeBuffers {
  uint64_t device = 0;
  uint64_t pinned_host = 0;
};

class ExchangeMethod {
 public:
  virtual ~ExchangeMethod() = default;

  // For summary.comm: what travels ("all-reduce (nccl)") and through what ("nccl 2.28.3").
  virtual std::string description() const = 0;
  virtual std::string communicator_description() const = 0;
  // Whether the method exchanges through the strategy's communicator (context.communicator).
  virtual bool uses_communicator() const { return true; }
  // Buffers and events, once, before any step; `largest` bounds the elements of any range it
  // will be given. Throws ConfigError for a combination it cannot run.
  virtual void prepare(const ExchangeContext& context, size_t largest) = 0;

  // Whether exchange() itself orders every device's communication stream after its gradients'
  // `ready` event and runs the transfer clocks (a method that enqueues for all devices at once).
  // Otherwise the strategy has made the replica's communication stream wait on `ready` and
  // started its transfer clock before the call, and stops the clock after it.
  virtual bool orders_devices_itself() const { return false; }
  // Enqueues the exchange of `range` for `replica`, whose gradients there are complete at `ready`
  // (an event on its compute stream): afterwards the mean of the replicas' gradients over `range`
  // lands in the replica's gradients (or, updates_parameters(), the updated parameters in its
  // parameters). Every replica calls it for the same ranges in the same order; it never blocks
  // on a device and reads nothing back to the host, so a capturable communicator's step stays
  // capturable.
  virtual void exchange(int replica, GradientRange range, const Event& ready) = 0;
  // Once per step, after every exchange of the step was enqueued: makes `replica`'s compute
  // stream wait for them (for the methods on the communicator: for everything its communication
  // stream holds so far).
  virtual void wait_until_done(int replica) = 0;
  // Whether the exchange also applies the optimizer to its ranges (the strategy then does not).
  virtual bool updates_parameters() const { return false; }
  // A device thread failed: an exchange blocked on other replicas must throw, not hang.
  virtual void abort() {}

  // What exchanging `range` once issues on one device of a job of `shape`, as data: its
  // collectives, their sizes, streams and order. It reads only the method's own settings (spec,
  // transfer type), never its devices, so it answers before prepare and for rank counts the run
  // does not have (`dpbench predict`); a method whose schedule depends on what prepare found says
  // so (the sparse rows: the tables).
  virtual RangeSchedule schedule(GradientRange range, const ScheduleShape& shape) const = 0;
  // What prepare() allocates on the fullest device for ranges of up to `largest` elements on a job
  // of `shape`, read from its own settings as schedule() is: the strategy's memory rule
  // (StrategyMemory) adds it. None by default (a method on the communicator's buffers alone).
  virtual ExchangeBuffers buffer_bytes(size_t largest, const ScheduleShape& shape) const { return {}; }
  // The shape of the run the method was prepared for.
  virtual ScheduleShape run_shape() const = 0;
  // The cost of exchanging each of `ranges` once in this run: the schedules' traffic
  // (engine/communication/collective_schedule.h); busbw_formula says how bus_bytes is derived.
  ExchangeTraffic traffic(const std::vector<GradientRange>& ranges) const;
  virtual std::string busbw_formula() const = 0;
  // Further summary.comm fields of the method.
  virtual void add_details(nlohmann::json& details) const {}
};

// A step of a schedule on the communication stream, after the one before it.
inline ScheduledCollective collective_step(Collective collective, double bytes, int ranks, double width = 1.0) {
  ScheduledCollective step;
  step.collective = collective;
  step.bytes = bytes;
  step.width = width;
  step.ranks = ranks;
  return step;
}

// The common part of the methods that travel through the strategy's communicator: they keep the
// context, cut each range into the spec's shards ("nccl#k": k independent exchanges), and the
// compute stream waits for the communication stream once per step. Each range is complete once
// the replica's own communication stream has run what exchange() enqueued for it, which the
// replicated strategy's update by bucket relies on (Note [update by bucket] in
// strategies/replicated.h).
class CommunicatorExchange : public ExchangeMethod {
 public:
  explicit CommunicatorExchange(int shards) : shards_(shards) {}
  std::string communicator_description() const override { return context_.communicator->description(); }
  void prepare(const ExchangeContext& context, size_t largest) final;
  void exchange(int replica, GradientRange range, const Event& ready) final;
  void wait_until_done(int replica) override;
  // The job's ranks, all on one host as far as the method is concerned.
  ScheduleShape run_shape() const override;

 protected:
  // The method's own buffers, with context() ready.
  virtual void allocate(size_t largest) {}
  // Enqueues one shard's exchange on the replica's communication stream.
  virtual void exchange_shard(int replica, GradientRange shard) = 0;
  std::vector<GradientRange> shards_of(GradientRange range) const;
  const ExchangeContext& context() const { return context_; }
  const Replica& replica_at(int replica) const { return context_.replicas[replica]; }
  Communicator& communicator() const { return *context_.communicator; }
  size_t world_size() const { return static_cast<size_t>(context_.world_size); }

 private:
  int shards_;
  ExchangeContext context_;
  std::vector<std::unique_ptr<Event>> exchanged_;  // per replica, on its communication stream
};

}  // namespace dpbench
