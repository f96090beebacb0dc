// The host's steady clock in nanoseconds: the one clock every timeline (a device's traced steps,
// the processes' clock agreement) is resolved to.
#pragma once

#include <chrono>
#include <cstdint>

namespace dpbench {

inline int64_t host_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace dpbench
