// `parameter_server`: one master copy of each parameter tensor. Each step the replicas' gradients
// travel to the tensor's owner, are averaged there, the optimizer runs there (only the owner keeps
// optimizer state that matters), and the updated values travel back to every replica.
//   --local_parameter_device=gpu: tensors are spread over the GPUs, each to the least loaded one
//     by bytes (largest first). Gradients go to the owner with a reduce, values come back with a
//     broadcast (Communicator: NCCL on GPUs), per planned range as soon as backward produced it.
//   --local_parameter_device=cpu: the master copy and the optimizer state live in pinned host
//     memory. Every device copies its gradients there; host threads average them and run the
//     update (enqueued with Device::enqueue_host_function, so no device thread blocks); every
//     device then copies the parameters back.
#pragma once

#include <memory>

#include "engine/communication/collective_schedule.h"
#include "strategies/bucketed_exchange.h"
#include "strategies/host_thread_pool.h"
#include "strategies/rendezvous.h"

namespace dpbench {

// Owner of each tensor (indexed by tensor id): largest tensors first, each to the device with
// the fewest bytes so far (lowest index on ties).
std::vector<int> place_tensors(const ParameterLayout& layout, int num_devices);
// The parameters (by count) each device owns, given each tensor's owner.
std::vector<size_t> owned_counts(const ParameterLayout& layout, const std::vector<int>& owner_of_tensor,
                                 int num_devices);
// The largest share of the parameters that one device owns under place_tensors: the owners
// update their tensors at once, so the most loaded one sets the update's pace.
double largest_owned_share(const ParameterLayout& layout, int num_devices);

class ParameterServerStrategy final : public BucketedExchangeStrategy {
 public:
  ParameterServerStrategy(const StrategyOptions& options, const DevicePlacement& placement);
  ~ParameterServerStrategy() override;
  std::string name() const override { return "parameter_server"; }
  // What it issues per step for `plan` of `layout` on a job of `shape`, as data
  // (engine/communication/collective_schedule.h), without devices: on the GPUs a reduce of each run of one
  // owner's tensors to that owner during backward and its broadcast back after the owners'
  // updates; on the host a copy of each range up to the host and, after the host's update, one of
  // every parameter back.
  static StepSchedule schedule_for(const StrategyOptions& options, const ParameterLayout& layout,
                                   const std::vector<GradientRange>& plan, const ScheduleShape& shape);
  // Its memory rule (StrategyMemory): on the GPUs every device holds a whole replica with its
  // optimizer state (each owner updates only the tensors it owns, but the runner gives every
  // replica the whole state), nothing added; on the host the master copy and the gradients' sum
  // beside device 0 and each device's staging, all in page-locked host memory.
  static StrategyMemory memory_for(const StrategyOptions& options, const ParameterLayout& layout,
                                   const std::vector<GradientRange>& plan, const ScheduleShape& shape);

 protected:
  void prepare(const ParameterLayout& layout) override;
  void exchange(int replica, size_t index, const Event& ready) override;
  void complete_step(int replica, int64_t step) override;
  TrafficModel traffic() const override;
  bool exchanges_alone() const override { return on_cpu_; }
  void abort_exchanges() override;

 private:
  struct OwnedRange {
    GradientRange range;
    int owner = 0;
  };
  struct HostServer;
  // Each range of `plan` as runs of consecutive tensors of one owner, in buffer order.
  static std::vector<std::vector<OwnedRange>> runs_of(const ParameterLayout& layout, const std::vector<int>& owner_of_tensor,
                                                      const std::vector<GradientRange>& plan);
  void exchange_on_gpus(int replica, size_t index, const Event& ready);
  void complete_on_gpus(int replica, int64_t step);
  void exchange_through_host(int replica, size_t index, const Event& ready);
  void complete_through_host(int replica, int64_t step);

  bool on_cpu_ = false;
  // gpu: per planned range, its tensors merged into runs of one owner, in buffer order.
  std::vector<std::vector<OwnedRange>> runs_;
  std::vector<int> owner_of_tensor_;
  std::vector<size_t> bytes_owned_;
  StepSchedule schedule_;  // this run's, from prepare
  std::vector<std::unique_ptr<Event>> reduced_, updated_, broadcast_;
  std::unique_ptr<HostServer> host_;  // cpu
};

}  // namespace dpbench
