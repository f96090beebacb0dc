// MemoryLedger and its name table (see memory_ledger.h).
#include "engine/machine/memory_ledger.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace dpbench {

const std::array<MemoryCategoryInfo, kNumMemoryCategories>& memory_categories() {
  // Workspaces grow with the batch too: cuDNN's convolution and LSTM workspaces are sized by the
  // shapes they run. Communication does not: the exchanges move gradients, whatever the batch.
  static const std::array<MemoryCategoryInfo, kNumMemoryCategories> table = {{
      {MemoryCategory::parameters, "parameters", "parameters", false},
      {MemoryCategory::gradients, "gradients", "gradients", false},
      {MemoryCategory::optimizer_state, "optimizer_state", "optimizer", false},
      {MemoryCategory::activations, "activations", "activations", true},
      {MemoryCategory::scratch, "scratch", "scratch", true},
      {MemoryCategory::workspaces, "workspaces", "workspaces", true},
      {MemoryCategory::communication, "communication", "communication", false},
      {MemoryCategory::data, "data", "data", true},
      {MemoryCategory::trace, "trace", "trace", false},
  }};
  return table;
}

const MemoryCategoryInfo& memory_category_info(MemoryCategory category) {
  return memory_categories()[static_cast<size_t>(category)];
}

uint64_t total_bytes(const CategoryBytes& bytes) {
  return std::accumulate(bytes.begin(), bytes.end(), uint64_t{0});
}

CategoryBytes device_bytes_under(const StrategyMemory& strategy, const CategoryBytes& replica) {
  CategoryBytes bytes{};
  for (size_t c = 0; c < bytes.size(); ++c)
    bytes[c] = static_cast<uint64_t>(std::llround(static_cast<double>(replica[c]) * strategy.kept[c])) + strategy.added[c];
  return bytes;
}

int64_t largest_batch_that_fits(uint64_t available, const std::function<uint64_t(int64_t)>& need, int64_t most) {
  if (most < 1 || need(1) > available) return 0;
  int64_t fits = 1, too_large = most + 1;  // need(fits) fits; need(too_large) does not (or past most)
  if (need(most) <= available) return most;
  too_large = most;
  while (too_large - fits > 1) {
    const int64_t middle = fits + (too_large - fits) / 2;
    (need(middle) <= available ? fits : too_large) = middle;
  }
  return fits;
}

LedgerEntry& LedgerEntry::operator=(LedgerEntry&& other) noexcept {
  if (this != &other) {
    release();
    ledger_ = std::move(other.ledger_);
    line_ = other.line_;
    bytes_ = other.bytes_;
    other.ledger_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void LedgerEntry::release() {
  if (ledger_) ledger_->take_off(line_, bytes_);
  ledger_.reset();
  bytes_ = 0;
}

std::shared_ptr<MemoryLedger> MemoryLedger::create() { return std::shared_ptr<MemoryLedger>(new MemoryLedger()); }

int MemoryLedger::line_of(const MemoryTag& tag, MemoryPlace place) {
  const auto key = std::make_tuple(tag.owner, static_cast<int>(tag.category), static_cast<int>(place));
  const auto found = line_index_.find(key);
  if (found != line_index_.end()) return found->second;
  lines_.push_back(Line{tag.owner, tag.category, place, 0});
  const int line = static_cast<int>(lines_.size()) - 1;
  line_index_.emplace(key, line);
  return line;
}

LedgerEntry MemoryLedger::record(const MemoryTag& tag, MemoryPlace place, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int line = line_of(tag, place);
  lines_[static_cast<size_t>(line)].held += bytes;
  const size_t category = static_cast<size_t>(tag.category);
  if (place == MemoryPlace::pinned_host) {
    figures_.pinned_host_held[category] += bytes;
    figures_.pinned_host_peak_bytes = std::max(figures_.pinned_host_peak_bytes, total_bytes(figures_.pinned_host_held));
  } else {
    figures_.held[category] += bytes;
    const uint64_t held = total_bytes(figures_.held);
    if (held > figures_.peak_bytes) {
      figures_.peak_bytes = held;
      figures_.at_peak = figures_.held;
    }
    if (held > figures_.window_peak_bytes) {
      figures_.window_peak_bytes = held;
      figures_.at_window_peak = figures_.held;
    }
  }
  return LedgerEntry(shared_from_this(), line, bytes);
}

void MemoryLedger::take_off(int line, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Line& entry = lines_[static_cast<size_t>(line)];
  entry.held -= bytes;
  CategoryBytes& held = entry.place == MemoryPlace::pinned_host ? figures_.pinned_host_held : figures_.held;
  held[static_cast<size_t>(entry.category)] -= bytes;
}

void MemoryLedger::begin_window() {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.window_peak_bytes = total_bytes(figures_.held);
  figures_.at_window_peak = figures_.held;
}

void MemoryLedger::set_limit(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = bytes;
}

uint64_t MemoryLedger::room_for_transients() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (limit_ == 0) return std::numeric_limits<uint64_t>::max();
  const uint64_t held = total_bytes(figures_.held);
  return limit_ > held ? limit_ - held : 0;
}

MemoryFigures MemoryLedger::figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return figures_;
}

std::map<std::pair<std::string, MemoryCategory>, uint64_t> MemoryLedger::held_by_owner(MemoryPlace place) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::pair<std::string, MemoryCategory>, uint64_t> held;
  for (const Line& line : lines_)
    if (line.place == place && line.held > 0) held[{line.owner, line.category}] += line.held;
  return held;
}

}  // namespace dpbench
