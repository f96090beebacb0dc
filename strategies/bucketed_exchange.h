// The common skeleton of the strategies that exchange gradients (replicated, parameter_server):
// the step's exchange plan (strategies/exchange_plan.h), per-replica readiness tracking, starting
// each planned range's exchange as soon as backward has produced it (or, with --overlap_comm=false,
// all of them after backward), device-side clocks (exchange_meter.h) and the summary.comm fields
// they share, and the count of the work the exchange enqueues (Note [counted launches] in
// engine/backend/device.h). Subclasses say how one range is exchanged and how a step completes.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device_placement.h"
#include "engine/communication/communicator.h"
#include "engine/training/strategy.h"
#include "strategies/exchange_meter.h"
#include "strategies/exchange_plan.h"
#include "strategies/strategy_options.h"

namespace dpbench {

// What a subclass reports about its traffic, per device and step.
struct TrafficModel {
  std::string exchange;             // e.g. "all-reduce (nccl)"
  std::string communicator;         // e.g. "nccl 2.28.3"
  double bytes_per_step = 0;        // the logical message: gradient bytes each replica contributes
  double bytes_sent_per_device = 0; // bytes one device sends per step, by the algorithm's formula
  double busbw_factor = 0;          // busbw = algbw x this (nccl-tests' convention)
  std::string busbw_formula;        // how the factor is derived, for readers of the result
  int64_t collectives_per_step = 0; // collective calls (or transfers of our own) per device
  std::string transfer_type = "fp32";
  std::string embedding_exchange = "dense";  // "sparse": embedding tables as gathered touched rows
  nlohmann::json details = nlohmann::json::object();  // further summary.comm fields of the subclass
};

class BucketedExchangeStrategy : public Strategy {
 public:
  BucketedExchangeStrategy(const StrategyOptions& options, const DevicePlacement& placement);
  void setup(const ParameterLayout& layout, std::vector<Replica>& replicas) final;
  void on_gradients_ready(int replica, GradientRange range, const Event& ready) final;
  void finish_step(int replica, int64_t step) final;
  void begin_measurement() final;
  nlohmann::json communication_summary(int64_t measured_steps) const final;
  std::vector<double> exposed_comm_ms_per_step(int64_t measured_steps) const override;
  int64_t launches_per_step() const final;
  // Replayable when the exchange is nothing but the communicator's collectives, captured.
  bool step_is_replayable() const override;
  void abort() final;

 protected:
  // Called at the end of setup, with plan() and replicas() ready.
  virtual void prepare(const ParameterLayout& layout) = 0;
  // Enqueues the exchange of plan()[index] for `replica`, whose gradients there are complete at
  // `ready` (an event on its compute stream). Every replica calls it for the same ranges in the
  // same order.
  virtual void exchange(int replica, size_t index, const Event& ready) = 0;
  // After every exchange of the step was enqueued: leaves the replica's parameters updated for
  // the next forward (waits through meter(replica).begin_wait/end_wait).
  virtual void complete_step(int replica, int64_t step) = 0;
  virtual TrafficModel traffic() const = 0;
  // Whether a lone replica still exchanges (the parameter server on the host does: its update
  // runs there); otherwise the mean of one replica's gradients is those gradients and a single
  // device updates directly, as independent does.
  virtual bool exchanges_alone() const { return false; }
  // abort() for what the subclass waits on besides the communicator (rendezvous of its threads).
  virtual void abort_exchanges() {}

  const std::vector<GradientRange>& plan() const { return plan_; }
  const std::vector<Replica>& replicas() const { return replicas_; }
  int num_replicas() const { return static_cast<int>(replicas_.size()); }
  // The replicas of the whole run: this process's, or those of every process when mpirun
  // started one per GPU (distributed_all_reduce, distributed_replicated). Averages, traffic and
  // owners count these.
  int world_size() const { return num_replicas() * num_processes_; }
  int world_rank(int replica) const { return process_rank_ * num_replicas() + replica; }
  // The communicator of the exchange, over this process's devices or across the processes; made
  // once, kept by this class (communicator() afterwards).
  Communicator& create_exchange_communicator();
  Communicator* communicator() const { return communicator_.get(); }
  ExchangeMeter& meter(int replica) const { return *meters_.at(replica); }
  const StrategyOptions& options() const { return options_; }

 private:
  // Runs one of replica 0's hooks of its first step, counting the work it enqueues on the
  // compute stream (the communication stream is counted whole: only the exchange uses it).
  template <typename Hook>
  void counting_first_step(int replica, Hook&& hook);
  // finish_step's work: the exchanges left (--overlap_comm=false), then complete_step.
  void finish_exchanges(int replica, int64_t step);
  // exchange(), its transfer labelled for a traced step: "exchange <index>", with an arrow from
  // the range's "gradient ready" instant.
  void start_exchange(int replica, size_t index, const Event& ready);

  StrategyOptions options_;
  int num_processes_ = 1, process_rank_ = 0;  // the run's DevicePlacement
  std::vector<GradientRange> plan_;
  std::vector<Replica> replicas_;
  std::unique_ptr<Communicator> communicator_;
  std::vector<std::unique_ptr<ReadinessTracker>> trackers_;
  std::vector<std::unique_ptr<ExchangeMeter>> meters_;
  std::vector<std::unique_ptr<Event>> backward_done_;  // --overlap_comm=false: the exchanges wait on it
  std::vector<ExchangeTimes> measured_from_;
  bool alone_ = false;  // one replica and nothing to exchange
  // Replica 0's first step: its communication stream's count when it began, the work its hooks
  // enqueued on the compute stream, and the total once it ended (-1 until then).
  int64_t first_step_communication_start_ = 0;
  int64_t first_step_compute_ = 0;
  std::atomic<int64_t> kernels_first_step_{-1};
  std::string exchange_name_;  // traffic().exchange, for the trace's spans
  // Per replica, per planned range: this step's "gradient ready" instant in the trace (-1: none).
  std::vector<std::vector<int>> ready_instants_;
};

// Options of plan_exchanges from the strategy's options.
ExchangePlanOptions exchange_plan_options(const StrategyOptions& options);

}  // namespace dpbench
