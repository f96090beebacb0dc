// ExchangeMeter: timestamps written by the streams themselves (Backend::write_timestamp).
#include "strategies/exchange_meter.h"

#include <algorithm>

#include "engine/backend/step_trace.h"

namespace dpbench {
namespace {
enum Slot { kTransferStart = 0, kTransferTotal = 1, kWaitStart = 2, kWaitTotal = 3, kSlots = 4 };
static_assert(ExchangeMeter::kDeviceBytes == kSlots * sizeof(int64_t));
}

ExchangeMeter::ExchangeMeter(Device& device) : device_(&device) {
  clocks_ = device.allocate(kSlots * sizeof(int64_t), MemoryTag{MemoryCategory::trace, "exchange meter"});
  const int64_t zeros[kSlots] = {0, 0, 0, 0};
  device.copy_from_host(clocks_.data(), zeros, sizeof(zeros));
}

void ExchangeMeter::label_next_transfer(std::string name, nlohmann::json args, int ready_instant) {
  next_name_ = std::move(name);
  next_args_ = std::move(args);
  next_ready_instant_ = ready_instant;
}

void ExchangeMeter::begin_transfer(StreamKind stream) {
  device_->ops(stream).write_timestamp(clocks_.as<int64_t>() + kTransferStart);
  StepTrace& trace = device_->trace();
  if (trace.annotating()) {
    transfer_span_ = trace.begin(stream, next_name_, "communication", next_args_);
    trace.flow(next_ready_instant_, transfer_span_);
  }
  label_next_transfer("transfer", nullptr);
}

void ExchangeMeter::end_transfer(StreamKind stream) {
  int64_t* clocks = clocks_.as<int64_t>();
  device_->ops(stream).add_elapsed_since(clocks + kTransferStart, clocks + kTransferTotal);
  device_->trace().end_with_instant(transfer_span_, "exchange done");
  transfer_span_ = StepTrace::Span{};
}

void ExchangeMeter::begin_wait() {
  device_->ops(StreamKind::compute).write_timestamp(clocks_.as<int64_t>() + kWaitStart);
  StepTrace& trace = device_->trace();
  if (trace.annotating()) wait_span_ = trace.begin(StreamKind::compute, "wait for exchange", "exposed communication");
}

void ExchangeMeter::end_wait() {
  int64_t* clocks = clocks_.as<int64_t>();
  device_->trace().end(wait_span_);
  wait_span_ = StepTrace::Span{};
  device_->ops(StreamKind::compute).add_elapsed_since(clocks + kWaitStart, clocks + kWaitTotal);
}

ExchangeTimes ExchangeMeter::totals() const {
  int64_t clocks[kSlots];
  device_->copy_to_host(clocks, clocks_.data(), sizeof(clocks));
  return ExchangeTimes{clocks[kTransferTotal] * 1e-6, clocks[kWaitTotal] * 1e-6};
}

double record_measured_exchange_times(const std::vector<std::unique_ptr<ExchangeMeter>>& meters,
                                      const std::vector<ExchangeTimes>& measured_from, int64_t measured_steps,
                                      nlohmann::json& comm) {
  double transfer_ms = 0, transfer_min_ms = 0, wait_ms = 0, wait_max_ms = 0;
  const double replicas = static_cast<double>(meters.size());
  for (size_t r = 0; r < meters.size(); ++r) {
    const ExchangeTimes now = meters[r]->totals();
    const double transfer = (now.transfer_ms - measured_from[r].transfer_ms) / measured_steps;
    const double wait = (now.wait_ms - measured_from[r].wait_ms) / measured_steps;
    transfer_ms += transfer / replicas;
    transfer_min_ms = r == 0 ? transfer : std::min(transfer_min_ms, transfer);
    wait_ms += wait / replicas;
    wait_max_ms = std::max(wait_max_ms, wait);
  }
  comm["transfer_ms_per_step"] = transfer_ms;
  comm["transfer_ms_per_step_min"] = transfer_min_ms;
  comm["exposed_comm_ms_per_step"] = wait_ms;
  comm["exposed_comm_ms_per_step_max"] = wait_max_ms;
  return transfer_min_ms;
}

}  // namespace dpbench
