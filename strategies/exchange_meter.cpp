// ExchangeMeter: timestamps written by the streams themselves (Backend::write_timestamp).
#include "strategies/exchange_meter.h"

namespace dpbench {
namespace {
enum Slot { kTransferStart = 0, kTransferTotal = 1, kWaitStart = 2, kWaitTotal = 3, kSlots = 4 };
}

ExchangeMeter::ExchangeMeter(Device& device) : device_(&device) {
  clocks_ = device.allocate(kSlots * sizeof(int64_t));
  const int64_t zeros[kSlots] = {0, 0, 0, 0};
  device.copy_from_host(clocks_.data(), zeros, sizeof(zeros));
}

void ExchangeMeter::begin_transfer(StreamKind stream) {
  device_->ops(stream).write_timestamp(clocks_.as<int64_t>() + kTransferStart);
}

void ExchangeMeter::end_transfer(StreamKind stream) {
  int64_t* clocks = clocks_.as<int64_t>();
  device_->ops(stream).add_elapsed_since(clocks + kTransferStart, clocks + kTransferTotal);
}

void ExchangeMeter::begin_wait() {
  device_->ops(StreamKind::compute).write_timestamp(clocks_.as<int64_t>() + kWaitStart);
}

void ExchangeMeter::end_wait() {
  int64_t* clocks = clocks_.as<int64_t>();
  device_->ops(StreamKind::compute).add_elapsed_since(clocks + kWaitStart, clocks + kWaitTotal);
}

ExchangeTimes ExchangeMeter::totals() const {
  int64_t clocks[kSlots];
  device_->copy_to_host(clocks, clocks_.data(), sizeof(clocks));
  return ExchangeTimes{clocks[kTransferTotal] * 1e-6, clocks[kWaitTotal] * 1e-6};
}

}  // namespace dpbench
