// Host memory that a run takes for its devices (every buffer of a reference device, the pinned
// batches and loss slots of a GPU) is counted against what the machine can give, before each
// allocation: an oversized run stops at set-up with one line naming the need and the fix, instead
// of being killed by the kernel's out-of-memory killer minutes later with no message.
// (Linux overcommits: malloc of 100 GiB "succeeds", and the process dies when it touches it.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dpbench {

// What this process may still take: MemAvailable from /proc/meminfo, lowered by a cgroup memory
// limit where one applies. 0 where neither can be read (then nothing is refused).
uint64_t available_host_memory_bytes();

// What lowers a run's host memory in general; a caller that knows what it allocates names the
// flags that size it instead (a model's initial parameters: its size flags, not the batch).
inline constexpr const char* kLowerHostMemory =
    "lower --batch_size, --prefetch_depth, the model's size flags or the number of devices";
// Throws RuntimeError "out of host memory: X more for <who>, ... free; <remedy>, or free memory"
// when `bytes` more would pass the allowance: 90% of what was available when the first allocation
// was counted. Otherwise counts `pointer` (already allocated, or about to be) as `bytes` in use.
void check_host_allocation(size_t bytes, const std::string& who, const std::string& remedy = kLowerHostMemory);
void count_host_allocation(const void* pointer, size_t bytes);
// Forgets a counted pointer (a no-op for pointers never counted).
void uncount_host_allocation(const void* pointer);

// Bytes counted now, for tests and messages.
uint64_t counted_host_bytes();

// Checks and counts `bytes` that a host container (a model's initial parameters) holds for as
// long as this object lives.
class HostMemoryReservation {
 public:
  HostMemoryReservation(size_t bytes, const std::string& who, const std::string& remedy = kLowerHostMemory) {
    check_host_allocation(bytes, who, remedy);
    count_host_allocation(this, bytes);
  }
  ~HostMemoryReservation() { uncount_host_allocation(this); }
  HostMemoryReservation(const HostMemoryReservation&) = delete;
  HostMemoryReservation& operator=(const HostMemoryReservation&) = delete;
};

}  // namespace dpbench
