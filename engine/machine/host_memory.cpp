// Counting host memory against what the machine can give (see host_memory.h).
#include "engine/machine/host_memory.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/errors.h"

namespace dpbench {
namespace {

// The rest stays for what is not counted: data sets, threads, library workspaces, the OS.
constexpr double kAllowedShare = 0.9;

uint64_t meminfo_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// cgroup v2 (memory.max, memory.current): a container's limit can be far below the machine's.
uint64_t cgroup_headroom_bytes() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  uint64_t current = 0;
  if (!(max_file >> max_text) || max_text == "max" || !(current_file >> current)) return 0;
  const uint64_t limit = std::stoull(max_text);
  return limit > current ? limit - current : 1;
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

struct Ledger {
  std::mutex mutex;
  bool allowance_known = false;
  uint64_t allowance = 0;  // 0: unknown, nothing refused
  uint64_t in_use = 0;
  std::unordered_map<const void*, size_t> sizes;
};

Ledger& ledger() {
  static Ledger* instance = new Ledger();  // never destroyed: buffers may be freed during exit
  return *instance;
}

}  // namespace

uint64_t available_host_memory_bytes() {
  const uint64_t available = meminfo_available_bytes();
  const uint64_t headroom = cgroup_headroom_bytes();
  if (available == 0) return headroom;
  return headroom == 0 ? available : std::min(available, headroom);
}

void check_host_allocation(size_t bytes, const std::string& who, const std::string& remedy) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (!l.allowance_known) {
    l.allowance = static_cast<uint64_t>(static_cast<double>(available_host_memory_bytes()) * kAllowedShare);
    l.allowance_known = true;
  }
  if (l.allowance == 0 || l.in_use + bytes <= l.allowance) return;
  throw RuntimeError("out of host memory: " + gib(bytes) + " more for " + who + ", on top of the " +
                     gib(l.in_use) + " this run holds, passes the " + gib(l.allowance) +
                     " it may take (90% of the memory free when it started); " + remedy + ", or free memory");
}

void count_host_allocation(const void* pointer, size_t bytes) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.sizes[pointer] = bytes;
  l.in_use += bytes;
}

void uncount_host_allocation(const void* pointer) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  const auto found = l.sizes.find(pointer);
  if (found == l.sizes.end()) return;
  l.in_use -= found->second;
  l.sizes.erase(found);
}

uint64_t counted_host_bytes() {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.in_use;
}

}  // namespace dpbench
