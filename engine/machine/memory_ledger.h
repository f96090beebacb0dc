// Memory as a measurement: every allocation on a device is recorded in the device's MemoryLedger
// with what it holds (its MemoryCategory) and who holds it (its owner: a layer, a strategy, a
// backend's plans), and taken off again when it is freed. The ledger keeps the bytes held per
// category now, at the peak of their total, and at the peak within a window (the measured steps),
// so a run can say where each device byte went (DESIGN section 5, "Memory"; README, "Memory").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace dpbench {

// What an allocation holds. The order is the order of the result's and the console's listings.
enum class MemoryCategory : int {
  parameters,       // the fp32 parameters and their 16-bit copies (a parameter server's masters too)
  gradients,        // the gradient buffer, and a parameter server's gradient sums
  optimizer_state,  // momentum, Adam's moments, the loss scale's state
  activations,      // what forward keeps for backward, and the layers' outputs
  scratch,          // transients of a pass: gradients of activations, staging, partial sums
  workspaces,       // what libraries ask for (cuDNN, cuBLAS(Lt)) and the plans they keep
  communication,    // exchange buffers and staging of the strategies and communicators
  data,             // input batches: the synthetic batch, the feed's slots
  trace,            // step timing, trace stamps, loss slots
};
inline constexpr int kNumMemoryCategories = 9;

// The one name table: each category's JSON key (summary.memory), its word in the console line,
// and whether its bytes grow with the batch per device (what a memory prediction scales).
struct MemoryCategoryInfo {
  MemoryCategory category;
  const char* key;
  const char* console_word;
  bool scales_with_batch;
};
const std::array<MemoryCategoryInfo, kNumMemoryCategories>& memory_categories();
const MemoryCategoryInfo& memory_category_info(MemoryCategory category);
inline const char* memory_category_key(MemoryCategory category) { return memory_category_info(category).key; }

// What an allocation is and whose it is. The owner is a short name: a layer ("conv2d_3"), a
// strategy or exchange method ("parameter_server", "peer_all_reduce"), a backend part ("cudnn plans").
struct MemoryTag {
  MemoryCategory category;
  std::string owner;
};

// Where the bytes are: on the device, or in page-locked host memory the device reads and writes
// (loss slots, a parameter server's host copies). Note [pinned host memory in the ledger]: pinned
// pages are counted beside the device's, never in its total, so the device's figures compare
// with what the device reports; the reference backend counts its host-visible buffers there too,
// so both backends account the same allocations in the same place.
enum class MemoryPlace : int { device, pinned_host };
inline constexpr int kNumMemoryPlaces = 2;

using CategoryBytes = std::array<uint64_t, kNumMemoryCategories>;
uint64_t total_bytes(const CategoryBytes& bytes);

// How a strategy changes one device's memory from what one replica training alone holds: the
// share of each category every device keeps (1: a whole copy; 1/N: a shard), and the buffers the
// strategy's exchanges add on its fullest device. Each strategy states it beside its description
// in the strategies' table (strategies/strategy_registry.h, StrategyEntry::memory); `dpbench
// predict` and the run's too-little-memory line (Note [too little memory] in
// engine/training/runner.h) both read it there.
struct StrategyMemory {
  std::array<double, kNumMemoryCategories> kept = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  CategoryBytes added{};
  uint64_t pinned_host_added = 0;  // page-locked host memory, beside the device's (never in it)
  std::string rule;                // in words, for predict's output
};
// One device's bytes under `strategy`, from one replica's alone (which holds no exchange buffers).
CategoryBytes device_bytes_under(const StrategyMemory& strategy, const CategoryBytes& replica);

// The largest batch b in [1, most] whose `need` (bytes, growing with b) is at most `available`; 0
// where not even a batch of 1 fits.
int64_t largest_batch_that_fits(uint64_t available, const std::function<uint64_t(int64_t batch)>& need, int64_t most);

// A ledger's figures at one moment; plain numbers, so they travel between processes as bytes.
struct MemoryFigures {
  CategoryBytes held{};  // device bytes held now, per category
  // The most device bytes held at once since the ledger was made, and the categories then.
  uint64_t peak_bytes = 0;
  CategoryBytes at_peak{};
  // The same since the window began (MemoryLedger::begin_window; the whole life before that).
  uint64_t window_peak_bytes = 0;
  CategoryBytes at_window_peak{};
  // Pinned host memory of the device: held now, and the most held at once.
  CategoryBytes pinned_host_held{};
  uint64_t pinned_host_peak_bytes = 0;
};

class MemoryLedger;

// One allocation's line in a ledger: recorded when it is made, taken off when it is destroyed or
// released. Move-only, like the memory it stands for; it keeps its ledger alive, so memory freed
// after its device is gone is still taken off a ledger that exists.
class LedgerEntry {
 public:
  LedgerEntry() = default;
  ~LedgerEntry() { release(); }
  LedgerEntry(LedgerEntry&& other) noexcept { *this = std::move(other); }
  LedgerEntry& operator=(LedgerEntry&& other) noexcept;
  LedgerEntry(const LedgerEntry&) = delete;
  LedgerEntry& operator=(const LedgerEntry&) = delete;

  void release();
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return ledger_ != nullptr; }

 private:
  friend class MemoryLedger;
  LedgerEntry(std::shared_ptr<MemoryLedger> ledger, int line, size_t bytes)
      : ledger_(std::move(ledger)), line_(line), bytes_(bytes) {}
  std::shared_ptr<MemoryLedger> ledger_;
  int line_ = -1;
  size_t bytes_ = 0;
};

// Thread-safe: runner threads, communication threads and loader threads allocate. Made with
// create(), since its entries share it.
class MemoryLedger : public std::enable_shared_from_this<MemoryLedger> {
 public:
  static std::shared_ptr<MemoryLedger> create();

  // Records `bytes` (as asked for: the allocator's rounding is not the program's) of `tag` in
  // `place`, until the entry goes.
  LedgerEntry record(const MemoryTag& tag, MemoryPlace place, size_t bytes);

  // Starts the window over: its peak becomes the bytes held now. The runner calls it when the
  // measured steps begin, so set-up transients (algorithm timing, initial values) stay out of the
  // steps' peak.
  void begin_window();

  MemoryFigures figures() const;

  // The device's memory limit (Device::memory_limit; 0: none), so that what allocates on the
  // device outside Device::allocate can keep within it too.
  void set_limit(uint64_t bytes);
  // Device bytes a set-up transient (a backend's algorithm search or timing, Note [search memory]
  // in engine/cuda/device_memory.h) may take now without passing the limit; UINT64_MAX: no limit.
  uint64_t room_for_transients() const;

  // Bytes held now by each (owner, category) in `place`; owners holding nothing are left out.
  // For tests and diagnostics: which layer or strategy holds what.
  std::map<std::pair<std::string, MemoryCategory>, uint64_t> held_by_owner(MemoryPlace place) const;

 private:
  friend class LedgerEntry;
  MemoryLedger() = default;
  void take_off(int line, size_t bytes);
  // (owner, category, place) lines, found by key, so an entry carries an index, not a string.
  struct Line {
    std::string owner;
    MemoryCategory category;
    MemoryPlace place;
    uint64_t held = 0;
  };
  int line_of(const MemoryTag& tag, MemoryPlace place);

  mutable std::mutex mutex_;
  std::vector<Line> lines_;
  std::map<std::tuple<std::string, int, int>, int> line_index_;
  MemoryFigures figures_;
  uint64_t limit_ = 0;
};

}  // namespace dpbench
