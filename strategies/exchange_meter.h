// Device-side clocks of one replica's exchange, so that replayed CUDA graphs time themselves:
// how long the communication stream was busy transferring (from the start of each exchange, once
// its gradients are ready, to its end) and how long the compute stream stood waiting for
// communication (exposed communication). Totals accumulate on the device; the host reads them
// only when every device is idle (start of measurement, end of run).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/device.h"
#include "engine/backend/step_trace.h"

namespace dpbench {

struct ExchangeTimes {
  double transfer_ms = 0;  // communication busy, summed
  double wait_ms = 0;      // compute stream waiting on communication, summed
};

class ExchangeMeter {
 public:
  // What each meter holds on its device (trace): the strategies' memory rules add it.
  static constexpr size_t kDeviceBytes = 4 * sizeof(int64_t);
  explicit ExchangeMeter(Device& device);
  // What the next transfer is, for a trace (engine/backend/step_trace.h): its span's name and args and
  // the "gradient ready" instant its arrow comes from (-1: none). begin_transfer takes it; set it
  // only while the device's trace records.
  void label_next_transfer(std::string name, nlohmann::json args, int ready_instant = -1);
  // Around the transfers of one exchange, on the stream that runs them; a traced step gets a
  // span for each, ending in an "exchange done" instant.
  void begin_transfer(StreamKind stream);
  void end_transfer(StreamKind stream);
  // Around the compute stream's wait for communication.
  void begin_wait();
  void end_wait();
  // Blocking reads; the device must be idle.
  ExchangeTimes totals() const;

 private:
  Device* device_;
  // int64 nanoseconds: transfer start, transfer total, wait start, wait total. A stamp and its
  // total are written by one stream, in order, so one slot per kind is enough.
  Buffer clocks_;
  std::string next_name_ = "transfer";
  nlohmann::json next_args_;
  int next_ready_instant_ = -1;
  StepTrace::Span transfer_span_, wait_span_;
};

// The measured steps' exchange times of every replica (their meters' totals less `measured_from`,
// the totals when measurement began), per step, into `comm` (summary.comm): transfer_ms_per_step
// (the mean over replicas) and its _min, exposed_comm_ms_per_step (the mean) and its _max.
// Returns the least transfer time, the figure bandwidths are computed from.
double record_measured_exchange_times(const std::vector<std::unique_ptr<ExchangeMeter>>& meters,
                                      const std::vector<ExchangeTimes>& measured_from, int64_t measured_steps,
                                      nlohmann::json& comm);

}  // namespace dpbench
