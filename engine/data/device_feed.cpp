// DeviceFeed (see the header).
#include "engine/data/device_feed.h"

#include <chrono>

#include "engine/backend/step_trace.h"
#include "engine/errors.h"
#include "engine/machine/host_memory.h"

namespace dpbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

DeviceFeed::DeviceFeed(Device& device, int replica, const BatchSource& source, std::vector<InputBuffer> inputs,
                       int64_t total_steps, const FeedSettings& settings)
    : device_(device), replica_(replica), source_(source), inputs_(std::move(inputs)), settings_(settings) {
  const std::vector<InputSpec> specs = source.inputs();
  bool match = specs.size() == inputs_.size();
  for (size_t i = 0; match && i < specs.size(); ++i)
    match = specs[i].name == inputs_[i].name && specs[i].bytes == inputs_[i].bytes;
  if (!match) {
    auto list = [](const std::vector<std::string>& parts) {
      std::string text;
      for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
      return text;
    };
    std::vector<std::string> wanted, given;
    for (const InputBuffer& input : inputs_) wanted.push_back(input.name + " " + std::to_string(input.bytes) + " B");
    for (const InputSpec& spec : specs) given.push_back(spec.name + " " + std::to_string(spec.bytes) + " B");
    throw RuntimeError("the batches (" + list(given) + ") do not match the model's inputs (" + list(wanted) + ")");
  }
  for (const InputBuffer& input : inputs_) {
    offsets_.push_back(slot_bytes_);
    slot_bytes_ += (input.bytes + 255) / 256 * 256;  // every input aligned for vector loads
  }
  items_.assign(static_cast<size_t>(total_steps), 0);
  for (int64_t step = 0; step < total_steps; ++step) ready_.push_back(device.create_event(true));

  const int slots = settings.mode == FeedMode::prefetch ? settings.depth : 1;
  // All the slots at once: a depth too large for the host is refused before one page is pinned.
  check_host_allocation(static_cast<size_t>(slots) * slot_bytes_,
                        "device " + std::to_string(device.index()) + "'s " + std::to_string(slots) + " batch slots",
                        "lower --prefetch_depth or --batch_size");
  for (int slot = 0; slot < slots; ++slot)
    host_slots_.push_back(device.allocate_host_visible(slot_bytes_, MemoryTag{MemoryCategory::data, "data feed"}));
  if (settings.mode == FeedMode::on_device) {
    // One batch, once: the data set's first batch (or the synthetic one) stays in device memory.
    build_into(0, host_slots_[0].as<char>());
    for (int64_t step = 1; step < total_steps; ++step) items_[static_cast<size_t>(step)] = items_[0];
    copy_slot_to_inputs(host_slots_[0].as<char>(), device.ops());
    device.synchronize();
    host_slots_.clear();
  } else if (settings.mode == FeedMode::prefetch) {
    for (int slot = 0; slot < slots; ++slot) {
      device_slots_.push_back(device.allocate(slot_bytes_, MemoryTag{MemoryCategory::data, "data feed"}));
      copied_.push_back(device.create_event(false));
      consumed_.push_back(device.create_event(false));
    }
    pipeline_ = std::make_unique<PrefetchPipeline>(
        total_steps, settings.depth, settings.threads,
        [this](int64_t step, int slot) { build_into(step, host_slots_[static_cast<size_t>(slot)].as<char>()); });
  }
}

DeviceFeed::~DeviceFeed() {
  // Host functions on the copy stream release slots of the pipeline: let them run first.
  try {
    device_.synchronize();
  } catch (...) {
  }
  pipeline_.reset();
}

void DeviceFeed::build_into(int64_t step, char* base) {
  std::vector<void*> into;
  for (size_t offset : offsets_) into.push_back(base + offset);
  items_[static_cast<size_t>(step)] = source_.build(step, replica_, into);
}

void DeviceFeed::copy_slot_to_inputs(const char* slot, Backend& ops) {
  for (size_t i = 0; i < inputs_.size(); ++i) ops.copy(inputs_[i].data, slot + offsets_[i], inputs_[i].bytes);
}

void DeviceFeed::enqueue(int64_t step) {
  StepTrace& trace = device_.trace();
  if (settings_.mode == FeedMode::synchronous) {
    const Clock::time_point start = Clock::now();
    const StepTrace::Span build = trace.begin_host(HostTrack::device_thread, "build batch", "data");
    build_into(step, host_slots_[0].as<char>());  // the previous step has finished (after_step)
    trace.end_host(build);
    host_wait_seconds_ += seconds_since(start);
    TracedSpan copy(device_, StreamKind::compute, "batch copy", "data");
    copy_slot_to_inputs(host_slots_[0].as<char>(), device_.ops());
  } else if (settings_.mode == FeedMode::prefetch) {
    double waited = 0;
    const StepTrace::Span wait = trace.begin_host(HostTrack::device_thread, "wait for loaders", "data");
    const int slot = pipeline_->acquire(step, &waited);
    trace.end_host(wait);
    host_wait_seconds_ += waited;
    const size_t k = static_cast<size_t>(slot);
    // The staging slot is free once the compute stream has moved its previous batch out.
    if (step >= settings_.depth) device_.wait(StreamKind::copy, *consumed_[k]);
    {
      // The args only for a traced step: no allocation on the others.
      TracedSpan copy(device_, StreamKind::copy, "batch copy to the device", "data",
                      trace.recording() ? nlohmann::json{{"bytes", slot_bytes_}} : nlohmann::json());
      device_.ops(StreamKind::copy).copy(device_slots_[k].data(), host_slots_[k].data(), slot_bytes_);
    }
    copied_[k]->record(StreamKind::copy);
    PrefetchPipeline* pipeline = pipeline_.get();
    device_.enqueue_host_function(StreamKind::copy, [pipeline, step] { pipeline->release(step); });
    // The compute stream's span holds its wait for the copy: the step's data wait.
    TracedSpan data(device_, StreamKind::compute, "data wait and move", "data");
    device_.wait(StreamKind::compute, *copied_[k]);
    copy_slot_to_inputs(device_slots_[k].as<char>(), device_.ops());
    consumed_[k]->record(StreamKind::compute);
  }
  ready_[static_cast<size_t>(step)]->record(StreamKind::compute);
}

void DeviceFeed::after_step(int64_t) {
  if (settings_.mode == FeedMode::synchronous) device_.synchronize();
}

}  // namespace dpbench
