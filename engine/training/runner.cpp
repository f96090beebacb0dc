// The step runner (see runner.h for the protocol).
#include "engine/training/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "engine/backend/step_trace.h"
#include "engine/communication/thread_barrier.h"
#include "engine/errors.h"
#include "engine/machine/host_memory.h"

namespace dpbench {
namespace {

using Clock = std::chrono::steady_clock;

// Records an event at each announced range and passes both to the strategy. Events come from a
// pool made before the run, one per tensor at most, so announcing allocates nothing.
class EventAnnouncer : public GradientAnnouncer {
 public:
  EventAnnouncer(Device& device, Strategy& strategy, int replica, size_t max_announcements)
      : device_(device), strategy_(strategy), replica_(replica) {
    for (size_t i = 0; i < max_announcements; ++i) events_.push_back(device.create_event(false));
  }
  void begin_step() { next_ = 0; }
  UnitHooks* unit_hooks() override { return strategy_.unit_hooks(replica_); }
  void announce(GradientRange range) override {
    if (next_ == events_.size())
      throw RuntimeError("model announced more gradient ranges than it has tensors");
    Event& ready = *events_[next_++];
    ready.record(StreamKind::compute);
    StepTrace& trace = device_.trace();
    if (trace.recording())
      trace.instant(StreamKind::compute, kGradientsProducedInstant, {{"offset", range.offset}, {"count", range.count}});
    strategy_.on_gradients_ready(replica_, range, ready);
  }

 private:
  Device& device_;
  Strategy& strategy_;
  int replica_;
  std::vector<std::unique_ptr<Event>> events_;
  size_t next_ = 0;
};

// Swallows announcements: for a capture that only counts the model's kernels.
class SilentAnnouncer : public GradientAnnouncer {
 public:
  void announce(GradientRange) override {}
};

std::string describe_failure(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown failure";
  }
}

// The laps of a step's stopwatch: data, forward, backward, and a recomputation inside backward.
constexpr int kPhases = kStepParts;
enum PhaseSlot {
  kDataPhase = static_cast<int>(StepPart::data),
  kForwardPhase = static_cast<int>(StepPart::forward),
  kBackwardPhase = static_cast<int>(StepPart::backward),
  kRecomputePhase = static_cast<int>(StepPart::recompute)
};

std::vector<int64_t> read_totals(Device& device, const Buffer& totals) {
  std::vector<int64_t> values(kPhases);
  device.make_current();
  device.copy_to_host(values.data(), totals.data(), sizeof(int64_t) * kPhases);
  return values;
}

DeviceMemoryRecord memory_record(const Device& device) {
  DeviceMemoryRecord record;
  record.device_index = device.index();
  record.figures = device.memory().figures();
  const auto as_bytes = [](std::optional<uint64_t> reported) {
    return reported ? static_cast<int64_t>(*reported) : int64_t{-1};
  };
  record.reported_used_bytes = as_bytes(device.reported_memory_used());
  record.reported_used_at_creation_bytes = as_bytes(device.reported_memory_used_at_creation());
  return record;
}

// A step as the trace names it: measured steps from 1, warm-up steps apart.
std::string step_label(int64_t step, int64_t warmup) {
  return step < warmup ? "warm-up step " + std::to_string(step + 1) : "step " + std::to_string(step - warmup + 1);
}

}  // namespace

struct Runner::ReplicaState {
  int index = 0;
  int world_rank = 0;  // among every process's replicas: its data shard
  Device* device = nullptr;
  std::unique_ptr<ParameterSet> parameters;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<ModelReplica> model;
  std::unique_ptr<EventAnnouncer> announcer;
  std::unique_ptr<DeviceFeed> feed;  // with host-fed data
  std::vector<std::unique_ptr<Event>> step_start, step_stop;  // one pair per step
  Buffer losses;                                               // host-visible, one float per step
  Buffer loss;                                                 // the step's loss, on the device
  Buffer loss_cursor;                                          // int32: next step's slot in `losses`
  Buffer norm_scratch;  // the final parameter norm's partial sums (sum_squares_scratch_bytes)
  std::unique_ptr<CapturedWork> replayable_step;               // the step as a CUDA graph
  // The step's stopwatch (int64 ns, on the device): the clock of the last lap, and the laps'
  // totals over every step so far: data, forward, backward (StepPhases); read when idle.
  // Only the timed steps (RunState::times_parts) add to the totals, so they hold measured steps only.
  Buffer phase_clock, phase_totals;
  std::unique_ptr<CapturedWork> replayable_timed_step;  // the step as a CUDA graph, with the laps
  // Per traced step (by row), its own graph, with the stamps that go to its row of the trace
  // (nullptr for step 0, which runs before any capture); made with step 1's capture.
  std::vector<std::unique_ptr<CapturedWork>> traced_steps;
  int64_t kernels_per_step = -1;  // kernel nodes of the captured step; -1: not captured
  std::atomic<int64_t> steps_enqueued{0};
};

CategoryBytes ReplicaMemoryFit::need(int batch) const {
  CategoryBytes bytes = at_one_sample;
  for (const MemoryCategoryInfo& category : memory_categories()) {
    const size_t c = static_cast<size_t>(category.category);
    if (category.scales_with_batch) bytes[c] += per_sample[c] * static_cast<uint64_t>(std::max(0, batch - 1));
  }
  return bytes;
}

Runner::Runner(const Model& model, Strategy& strategy, std::vector<std::unique_ptr<Device>>& devices,
               RunnerSettings settings)
    : model_(model), strategy_(strategy), devices_(devices), settings_(settings) {
  try {
    set_up(model, strategy, devices);
  } catch (const OutOfDeviceMemory& error) {
    // Note [too little memory]
    const std::string refused = error.what();
    Device* failed = devices.front().get();
    int world_rank = settings_.process_rank * static_cast<int>(devices.size());
    for (size_t r = 0; r < devices.size(); ++r)
      if (devices[r]->index() == error.device_index()) {
        failed = devices[r].get();
        world_rank = settings_.process_rank * static_cast<int>(devices.size()) + static_cast<int>(r);
      }
    for (auto& device : devices) device->synchronize();
    replicas_.clear();
    const int world_size = static_cast<int>(devices.size()) * settings_.num_processes;
    throw TooLittleDeviceMemory(size_replica_memory(model, *failed, settings_, world_rank, world_size, refused));
  }
}

std::optional<CategoryBytes> Runner::size_replica_at(const Model& model, Device& device,
                                                    const RunnerSettings& settings, int world_rank, int world_size,
                                                    int batch) {
  device.make_current();
  MemoryLedger& ledger = device.memory();
  const uint64_t limit = device.memory_limit();
  device.set_memory_limit(0);
  const CategoryBytes before = ledger.figures().held;
  CategoryBytes sized{};
  bool fitted = true;
  try {
    ParameterSet parameters(device, model.layout(), settings.weight_copy_type);
    Optimizer optimizer(device, settings.optimizer, model.layout().total_count());
    const ReplicaShard shard{world_rank, world_size, batch, settings.seed};
    const std::unique_ptr<Model> rebuilt = settings.model_for_batch ? settings.model_for_batch(batch) : nullptr;
    std::unique_ptr<ModelReplica> replica = (rebuilt ? *rebuilt : model).create_replica(device, parameters, shard);
    ReplicaState bookkeeping;
    allocate_bookkeeping(device, bookkeeping);
    device.synchronize();
    // Once set up: what the steps hold (they allocate nothing); the set-up's transients are left
    // out (Note [too little memory]).
    const CategoryBytes held = ledger.figures().held;
    for (size_t c = 0; c < sized.size(); ++c) sized[c] = held[c] > before[c] ? held[c] - before[c] : 0;
  } catch (const OutOfDeviceMemory&) {
    fitted = false;
  }
  device.set_memory_limit(limit);
  if (!fitted) return std::nullopt;
  return sized;
}

ReplicaMemoryFit Runner::size_replica_memory(const Model& model, Device& device, const RunnerSettings& settings,
                                             int world_rank, int world_size, const std::string& refused) {
  ReplicaMemoryFit fit;
  fit.device_index = device.index();
  fit.limit_bytes = device.memory_limit();
  fit.batch_size = settings.batch_size;
  fit.refused = refused;
  device.make_current();
  fit.held_bytes = total_bytes(device.memory().figures().held);
  const size_t count = model.layout().total_count();
  fit.model_state = ParameterSet::bytes_for(count, settings.weight_copy_type);
  const CategoryBytes optimizer_state = Optimizer::bytes_for(settings.optimizer, count);
  for (size_t c = 0; c < fit.model_state.size(); ++c) fit.model_state[c] += optimizer_state[c];
  const std::optional<CategoryBytes> one = size_replica_at(model, device, settings, world_rank, world_size, 1);
  const std::optional<CategoryBytes> two =
      one ? size_replica_at(model, device, settings, world_rank, world_size, 2) : std::nullopt;
  fit.fitted = one && two;
  if (fit.fitted) {
    fit.at_one_sample = *one;
    for (size_t c = 0; c < one->size(); ++c) fit.per_sample[c] = (*two)[c] > (*one)[c] ? (*two)[c] - (*one)[c] : 0;
  }
  return fit;
}

void Runner::set_up(const Model& model, Strategy& strategy, std::vector<std::unique_ptr<Device>>& devices) {
  const RunnerSettings& settings = settings_;
  const int num_replicas = static_cast<int>(devices.size());
  const int64_t total_steps = settings.num_warmup_batches + settings.num_batches + settings.num_trailing_batches;
  const HostMemoryReservation initial_bytes(model.layout().total_count() * sizeof(float),
                                           "the model's initial parameters (a host copy)",
                                           "the model is too large for this host: lower its size flags (layers, "
                                           "units, vocabularies)");
  const std::vector<float> initial = model.initial_parameters(settings.seed);
  const std::vector<std::vector<ResidentChunk>> shards =
      strategy.plan_shards(model.layout(), model.parameter_units(), num_replicas);
  for (int r = 0; r < num_replicas; ++r) {
    auto state = std::make_unique<ReplicaState>();
    Device& device = *devices[r];
    device.make_current();
    // First, so that a refused set-up's device still holds the trace's rows, which its fit then
    // counts as held (Note [too little memory]).
    if (settings.first_traced_step >= 0 || settings.nvtx)
      device.trace().prepare(settings.first_traced_step < 0 ? 0
                                 : static_cast<int>(settings.last_traced_step - settings.first_traced_step + 1),
                             settings.nvtx);
    state->index = r;
    state->world_rank = settings.process_rank * num_replicas + r;
    state->device = &device;
    state->parameters = std::make_unique<ParameterSet>(device, model.layout(), settings.weight_copy_type,
                                                       shards.empty() ? std::vector<ResidentChunk>{} : shards.at(r),
                                                       strategy.shards_keep_weight_copy());
    state->parameters->upload(initial);  // every replica starts from the same values (or its shard of them)
    state->optimizer = std::make_unique<Optimizer>(device, settings.optimizer, state->parameters->count());
    replicas_.push_back(std::move(state));
  }
  create_model_replicas(num_replicas);
  std::vector<Replica> strategy_view;
  for (auto& state : replicas_) {
    Device& device = *state->device;
    device.make_current();
    if (settings.data != nullptr)
      state->feed = std::make_unique<DeviceFeed>(device, state->world_rank, *settings.data, state->model->inputs(),
                                                 total_steps, settings.feed);
    state->announcer =
        std::make_unique<EventAnnouncer>(device, strategy, state->index, model.layout().tensors().size());
    for (int64_t s = 0; s < total_steps; ++s) {
      state->step_start.push_back(device.create_event(true));
      state->step_stop.push_back(device.create_event(true));
    }
    state->losses =
        device.allocate_host_visible(sizeof(float) * total_steps, MemoryTag{MemoryCategory::trace, "runner"});
    std::fill_n(state->losses.as<float>(), total_steps, std::nanf(""));
    allocate_bookkeeping(device, *state);
    // During a step's update the cursor still holds the step's number (append_scalar advances
    // it last), so Adam reads its step there and the whole step stays replayable.
    state->optimizer->set_device_step(state->loss_cursor.as<int32_t>());
    strategy_view.push_back(Replica{state->index, &device, state->parameters.get(), state->optimizer.get(),
                                    state->model->sparse_gradients()});
  }
  strategy.setup(model.layout(), strategy_view);
  for (auto& state : replicas_) state->device->synchronize();
}

void Runner::allocate_bookkeeping(Device& device, ReplicaState& state) {
  const MemoryTag bookkeeping{MemoryCategory::trace, "runner"};
  state.loss = device.allocate(sizeof(float), bookkeeping);
  state.phase_clock = device.allocate(sizeof(int64_t), bookkeeping);
  state.phase_totals = device.allocate(sizeof(int64_t) * kPhases, bookkeeping);
  const std::vector<int64_t> no_time(kPhases + 1, 0);
  device.copy_from_host(state.phase_clock.data(), no_time.data(), sizeof(int64_t));
  device.copy_from_host(state.phase_totals.data(), no_time.data(), sizeof(int64_t) * kPhases);
  state.loss_cursor = device.allocate(sizeof(int32_t), bookkeeping);
  const int32_t first_slot = 0;
  device.copy_from_host(state.loss_cursor.data(), &first_slot, sizeof(first_slot));
  // Made here rather than when the norm is taken after the steps: an allocation then could pass
  // the memory limit that the set-up's fit promised the run would stay within.
  state.norm_scratch = device.allocate(std::max<size_t>(device.ops().sum_squares_scratch_bytes(), 8),
                                       MemoryTag{MemoryCategory::trace, "parameter norm"});
}

Runner::~Runner() = default;

// Building a replica is where a GPU backend plans, and often times, every convolution and
// pooling for its device: seconds per GPU, which one after the other grew a 4-GPU VGG-16 run's
// set-up to three times a 1-GPU run's. So each device builds its own on a thread of its own; the
// model is only read. A failure on any device (too little memory, say) is rethrown here, the
// lowest device's first, once every builder has ended.
void Runner::create_model_replicas(int num_replicas) {
  auto create = [this, num_replicas](ReplicaState& state) {
    state.device->make_current();
    const ReplicaShard shard{state.world_rank, num_replicas * settings_.num_processes, settings_.batch_size,
                             settings_.seed};
    state.model = model_.create_replica(*state.device, *state.parameters, shard);
  };
  if (replicas_.size() == 1) return create(*replicas_.front());
  std::vector<std::exception_ptr> failures(replicas_.size());
  std::vector<std::thread> builders;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    builders.emplace_back([&, r] {
      try {
        create(*replicas_[r]);
      } catch (...) {
        failures[r] = std::current_exception();
      }
    });
  }
  for (std::thread& builder : builders) builder.join();
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

double Runner::step_time_ms(int64_t step) const {
  double slowest = 0;
  for (const auto& state : replicas_)
    slowest = std::max(slowest, state->step_stop[step]->elapsed_ms_since(*state->step_start[step]));
  return slowest;
}

std::vector<float> Runner::parameters_of(int replica) const {
  const ReplicaState& state = *replicas_.at(replica);
  if (state.parameters->sharded()) return strategy_.assembled_parameters(replica);
  state.device->make_current();
  return state.parameters->download();
}

double Runner::step_loss(int64_t step) const {
  double sum = 0;
  for (const auto& state : replicas_) sum += static_cast<volatile float*>(state->losses.as<float>())[step];
  return sum / static_cast<double>(replicas_.size());
}

// Watches that the run moves: a device enqueued another step, or another step's stop event
// completed. poll() is cheap (event queries) and runs in the progress thread's waits.
class Runner::StallWatch {
 public:
  StallWatch(const std::vector<std::unique_ptr<ReplicaState>>& replicas, const RunnerSettings& settings)
      : replicas_(replicas), settings_(settings), finished_(replicas.size(), 0), last_move_(Clock::now()) {}

  void poll() {
    if (!settings_.on_no_progress || settings_.no_progress_timeout.count() <= 0) return;
    int64_t seen = 0;
    for (size_t r = 0; r < replicas_.size(); ++r) {
      const int64_t enqueued = replicas_[r]->steps_enqueued.load(std::memory_order_acquire);
      while (finished_[r] < enqueued && replicas_[r]->step_stop[finished_[r]]->query()) ++finished_[r];
      seen += enqueued + finished_[r];
    }
    const Clock::time_point now = Clock::now();
    if (seen != seen_) {
      seen_ = seen;
      last_move_ = now;
      return;
    }
    if (now - last_move_ < settings_.no_progress_timeout) return;
    const int64_t slowest = *std::min_element(finished_.begin(), finished_.end());
    settings_.on_no_progress("step " + std::to_string(slowest + 1) + " of the run");
    last_move_ = now;  // only if the callback returned
  }

 private:
  const std::vector<std::unique_ptr<ReplicaState>>& replicas_;
  const RunnerSettings& settings_;
  std::vector<int64_t> finished_;  // per replica: steps whose stop event completed
  int64_t seen_ = -1;
  Clock::time_point last_move_;
};

// Note [stopping early]
// A stop request (Ctrl-C) must end every device after the same step: a device that began one
// more step than its peers would wait forever in that step's collective, and the step's record
// would be half-made. So the devices ask a StopGate before each step. In one process, the first
// thread that sees the request fixes the stop at the most steps any device has begun (the
// threads share a mutex; the others run up to it). Across processes nothing is shared, so every
// process votes at every step whether it was asked to stop (ProcessGroup::Vote) and reads the
// vote of kVoteLag steps before: a yes there stops every process before the same step, and by
// then the vote has long completed, so the steps never wait for it.
class Runner::StopGate {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  static constexpr size_t kVoteLag = 3;

  StopGate(const RunnerSettings& settings, int num_replicas)
      : stop_requested_(settings.stop_requested),
        votes_from_(settings.num_processes > 1 ? settings.processes : nullptr),
        begun_(static_cast<size_t>(num_replicas), 0) {}

  // Whether `replica` may begin `step` (its steps come in order); false from the agreed stop on.
  bool may_begin(int replica, int64_t step) {
    if (!stop_requested_) return true;
    if (votes_from_ != nullptr) return vote_on(step);
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_at_ == kNever && stop_requested_())
      stop_at_.store(*std::max_element(begun_.begin(), begun_.end()), std::memory_order_release);
    if (step >= stop_at_.load(std::memory_order_relaxed)) return false;
    begun_[static_cast<size_t>(replica)] = step + 1;
    return true;
  }
  // The step every device stops before (all of them begin the steps below it); kNever: none.
  int64_t stop_at() const { return stop_at_.load(std::memory_order_acquire); }
  // The run's end: votes still in flight complete (every process started the same ones).
  void settle() {
    for (auto& vote : votes_) vote->any_yes();
    votes_.clear();
  }

 private:
  bool vote_on(int64_t step) {  // one device per process: only its thread comes here
    if (votes_.size() == kVoteLag) {
      const bool stop = votes_.front()->any_yes();
      votes_.pop_front();
      if (stop) {
        stop_at_.store(step, std::memory_order_release);
        settle();
        return false;
      }
    }
    votes_.push_back(votes_from_->start_vote(stop_requested_()));
    return true;
  }

  const std::function<bool()>& stop_requested_;
  const ProcessGroup* votes_from_;
  std::mutex mutex_;
  std::vector<int64_t> begun_;  // per replica: steps begun
  std::atomic<int64_t> stop_at_{kNever};
  std::deque<std::unique_ptr<ProcessGroup::Vote>> votes_;
};

// What the threads of one run share: the step counts, the barrier, the clock marks, and the first
// failure (after which every thread stops at its next chance).
struct Runner::RunState {
  RunState(const RunnerSettings& settings, int num_replicas, bool capturable)
      : warmup(settings.num_warmup_batches),
        measured_end(warmup + settings.num_batches),
        total_steps(measured_end + settings.num_trailing_batches),
        steps_per_epoch(settings.steps_per_epoch),
        capturable(capturable),
        replay(settings.cuda_graph && capturable),
        barrier(num_replicas),
        stop_gate(settings, num_replicas),
        timed_every(std::max(1, settings.time_parts_every)),
        timed_offset(std::min<int64_t>(timed_every / 2, settings.num_batches - 1)),
        first_traced(settings.first_traced_step),
        last_traced(settings.last_traced_step),
        threads_running(num_replicas) {}

  const int64_t warmup, measured_end, total_steps, steps_per_epoch;
  // Note [timed parts of a step]: the stopwatch that splits a step into its parts (StepPhases)
  // costs a few tiny kernels, a visible share of a step of tens of microseconds, so it runs on
  // one measured step in `timed_every` only (a second CUDA graph, with the laps, is replayed
  // then); the parts' means come from those steps.
  bool times_parts(int64_t step) const {
    return step >= warmup && step < measured_end && (step - warmup) % timed_every == timed_offset;
  }
  // A step can be captured when nothing in it changes from step to step on the host side: the
  // strategy says so for its hooks (Adam reads its step on the device). A captured step is
  // replayed with --cuda_graph; without it the capture only counts the step's kernels.
  const bool capturable, replay;
  ThreadBarrier barrier;
  StopGate stop_gate;
  const int timed_every;
  const int64_t timed_offset;
  const int64_t first_traced, last_traced;
  bool traces(int64_t step) const { return first_traced >= 0 && step >= first_traced && step <= last_traced; }
  Clock::time_point wall_start, wall_end;
  bool measurement_ended = false;  // wall_end is set
  std::vector<Clock::time_point> epoch_marks;  // the run's start, then every epoch's end

  std::mutex mutex;                    // guards what follows, but `failed`
  std::exception_ptr failure;
  Clock::time_point failed_at;
  std::condition_variable thread_finished;
  int threads_running;
  std::atomic<bool> failed{false};
};

void Runner::fail(RunState& run, std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(run.mutex);
    if (!run.failure) {
      run.failure = error;
      run.failed_at = Clock::now();
    }
  }
  run.failed = true;
  run.barrier.abort();
  strategy_.abort();
}

// Runs on the last thread to reach the end of warm-up, every device idle. The memory ledgers'
// window starts here too, so the measured steps' peak leaves out set-up's transients (the
// algorithm searches' scratch, the synthetic data's staging).
void Runner::start_measurement(RunState& run, Clock::time_point now) {
  strategy_.begin_measurement();
  for (const auto& state : replicas_) state->device->memory().begin_window();
  run.wall_start = now;
}

// Note [traced steps]: a traced step's spans end in stamps its streams write into the step's own
// row of the device's trace (engine/backend/step_trace.h). A replayed graph cannot change where it writes,
// so each traced step of a replayed run is captured as a graph of its own, with the stamps in,
// and launched once when its step comes; the untraced steps replay the graph without them and
// cost nothing more. The graphs are captured with step 1's, before the measured steps: captured
// at their own step, the host's capture would leave the GPU idle inside the step it times. The
// step's own span and the data feed's are enqueued around the launch, outside the graph.
void Runner::capture_traced_steps(ReplicaState& state, const RunState& run,
                                  const std::function<void(int64_t step, bool timed)>& enqueue_step) {
  if (run.first_traced < 0) return;
  StepTrace& trace = state.device->trace();
  for (int64_t step = run.first_traced; step <= run.last_traced; ++step) {
    const int row = static_cast<int>(step - run.first_traced);
    std::unique_ptr<CapturedWork> captured;
    if (step >= 1) {  // step 0 runs before any capture, eagerly
      trace.begin_capture(row, step, step >= run.warmup);
      try {
        captured = state.device->capture([&] { enqueue_step(step, run.times_parts(step)); });
      } catch (...) {
        trace.end_step();
        throw;
      }
      trace.end_step();
      if (!captured) throw RuntimeError("traced step " + std::to_string(step) + " could not be captured");
    }
    state.traced_steps.push_back(std::move(captured));
  }
}

//
// Step 1's work recorded once: replayed from then on with --cuda_graph, else only counted (its
// kernels, without the stopwatch's). Step 0 runs eagerly before, so libraries finish their lazy
// set-up outside the capture; the capture itself runs nothing, the replay right after it is
// step 1. The timed steps replay a second capture, with the laps.
void Runner::capture_step(ReplicaState& state, const RunState& run,
                          const std::function<void(bool timed)>& enqueue_step) {
  Device& device = *state.device;
  if (run.capturable) {
    std::unique_ptr<CapturedWork> captured = device.capture([&] { enqueue_step(false); });
    if (captured) state.kernels_per_step = captured->kernel_count();
    if (run.replay && captured) {
      state.replayable_step = std::move(captured);
      state.replayable_timed_step = device.capture([&] { enqueue_step(true); });
    }
  } else if (strategy_.launches_per_step() >= 0) {
    // The step cannot be replayed (its exchange makes host decisions), but its kernels can still
    // be counted: the model's forward and backward from a capture that is never launched, plus
    // the work the devices counted the strategy's hooks enqueuing (Note [counted launches] in
    // engine/backend/device.h).
    SilentAnnouncer silent;
    std::unique_ptr<CapturedWork> captured = device.capture([&] {
      state.model->forward(StepContext{state.loss.as<float>(), state.loss_cursor.as<int32_t>(),
                                       state.optimizer->loss_scale()});
      if (!settings_.forward_only) state.model->backward(silent);
    });
    if (captured)
      state.kernels_per_step = captured->kernel_count() + (settings_.forward_only ? 0 : strategy_.launches_per_step());
  }
}

// One device's thread: every step enqueued in order, the devices meeting at the end of warm-up,
// of the measured steps and of every epoch.
void Runner::drive_device(ReplicaState& state, RunState& run) {
  struct FinishedSignal {  // however the thread ends, the joining thread learns of it
    RunState& run;
    ~FinishedSignal() {
      std::lock_guard<std::mutex> lock(run.mutex);
      --run.threads_running;
      run.thread_finished.notify_all();
    }
  } finished_signal{run};
  try {
    Device& device = *state.device;
    device.make_current();
    int64_t* clock = state.phase_clock.as<int64_t>();
    int64_t* phase_totals = state.phase_totals.as<int64_t>();
    // `timed`: with the stopwatch's laps after forward and backward (Note [timed parts of a step]).
    StepTrace& trace = device.trace();
    auto enqueue_step = [&](int64_t step, bool timed) {
      StepTrace::Span pass;
      if (timed) trace.set_stopwatch(clock, phase_totals);  // for the laps inside the passes
      if (trace.annotating()) pass = trace.begin(StreamKind::compute, "forward", "forward");
      // loss_cursor is also the step number: append_scalar advances it at the end of the step.
      state.model->forward(StepContext{state.loss.as<float>(), state.loss_cursor.as<int32_t>(),
                                       state.optimizer->loss_scale(), strategy_.unit_hooks(state.index)});
      if (timed) device.ops().lap(clock, phase_totals + kForwardPhase);
      if (!settings_.forward_only) {
        if (trace.annotating()) pass = trace.next(pass, "backward", "backward");
        state.announcer->begin_step();
        state.model->backward(*state.announcer);
        if (timed) device.ops().lap(clock, phase_totals + kBackwardPhase);
        trace.end(pass);
        pass = StepTrace::Span{};
        strategy_.finish_step(state.index, step + 1);
      }
      trace.end(pass);
      trace.set_stopwatch(nullptr, nullptr);
      device.ops().append_scalar(state.loss.as<float>(), state.losses.as<float>(), state.loss_cursor.as<int32_t>());
    };
    if (run.warmup == 0 || run.steps_per_epoch > 0) {
      run.barrier.arrive_and_wait([&] {
        const Clock::time_point now = Clock::now();
        if (run.steps_per_epoch > 0) run.epoch_marks.push_back(now);
        if (run.warmup == 0) start_measurement(run, now);
      });
    }
    for (int64_t step = 0; step < run.total_steps; ++step) {
      if (!run.stop_gate.may_begin(state.index, step)) break;
      if (step == 1) {
        capture_step(state, run, [&](bool timed) { enqueue_step(step, timed); });
        if (state.replayable_step) capture_traced_steps(state, run, enqueue_step);
      }
      const bool timed = run.times_parts(step);
      const bool profiled = settings_.profile_step > 0 && step == run.warmup + settings_.profile_step - 1;
      if (profiled) {
        device.synchronize();  // the range then holds this step's work and nothing before it
        device.set_profiler_capture(true);
      }
      const bool traced = run.traces(step);
      const size_t traced_row = traced ? static_cast<size_t>(step - run.first_traced) : 0;
      if (traced) trace.begin_step(static_cast<int>(traced_row), step, step >= run.warmup);
      StepTrace::Span host_span, step_span;
      if (trace.annotating()) {
        const std::string label = step_label(step, run.warmup);
        host_span = trace.begin_host(HostTrack::device_thread, "enqueue " + label, "host");
        step_span = trace.begin(StreamKind::compute, label, "step");
      }
      // The step's time includes waiting for its batch (the feed's copy, or its build).
      state.step_start[step]->record(StreamKind::compute);
      if (timed) device.ops().write_timestamp(clock);  // the stopwatch's start; laps follow each part
      if (state.feed) {
        state.feed->enqueue(step);
        if (timed) device.ops().lap(clock, phase_totals + kDataPhase);
      }
      if (state.replayable_step && traced) {
        state.traced_steps.at(traced_row)->launch();  // its own graph (Note [traced steps])
      } else if (state.replayable_step) {
        (timed && state.replayable_timed_step ? state.replayable_timed_step : state.replayable_step)->launch();
      } else {
        enqueue_step(step, timed);
      }
      trace.end(step_span);
      state.step_stop[step]->record(StreamKind::compute);
      trace.end_host(host_span);
      if (traced) trace.end_step();
      if (state.feed) state.feed->after_step(step);
      if (profiled) {
        device.synchronize();
        device.set_profiler_capture(false);
      }
      state.steps_enqueued.store(step + 1, std::memory_order_release);
      // End of warm-up (the measured wall clock starts), of the measured steps when untimed
      // ones follow, and of every epoch: every device drains, then the clock is read.
      const bool warmup_done = step + 1 == run.warmup;
      const bool measurement_done = step + 1 == run.measured_end && run.measured_end < run.total_steps;
      const bool epoch_done = run.steps_per_epoch > 0 && (step + 1) % run.steps_per_epoch == 0;
      if (warmup_done || measurement_done || epoch_done) {
        device.synchronize();
        run.barrier.arrive_and_wait([&] {
          const Clock::time_point now = Clock::now();
          if (epoch_done) run.epoch_marks.push_back(now);
          if (warmup_done) start_measurement(run, now);
          if (measurement_done) {
            run.wall_end = now;
            run.measurement_ended = true;
          }
        });
      }
      if (run.failed.load(std::memory_order_relaxed)) return;
    }
    run.stop_gate.settle();
    device.synchronize();
    run.barrier.arrive_and_wait([&] {
      if (!run.measurement_ended) {  // the last measured step, or a stop before it
        run.wall_end = Clock::now();
        run.measurement_ended = true;
      }
    });
  } catch (...) {
    fail(run, std::current_exception());
  }
}

// The calling thread meanwhile: at each displayed step, waits until every device has enqueued it,
// then polls its stop event (a blocking wait spins inside the driver, and this thread must cost the
// launching threads nothing) and reports progress.
void Runner::report_progress(RunState& run, StallWatch& stall_watch, const ProgressCallback& on_progress,
                             const PhaseCallback& on_phase) {
  std::vector<double> measured_ms;
  int64_t timed_until = run.warmup;  // measured steps [warmup, timed_until) are in measured_ms
  // Steps at or past an agreed early stop are never enqueued: stop waiting for them.
  auto stopped_before = [&](int64_t step) { return step >= run.stop_gate.stop_at(); };
  for (int64_t step = 0; step < run.measured_end && !run.failed; ++step) {
    const int64_t measured = step + 1 - run.warmup;
    const bool display =
        measured > 0 && (measured % settings_.display_every == 0 || step + 1 == run.measured_end);
    if (!display && !(step + 1 == run.warmup)) continue;
    for (auto& state : replicas_) {
      while (state->steps_enqueued.load(std::memory_order_acquire) <= step && !run.failed && !stopped_before(step)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        stall_watch.poll();
      }
    }
    if (run.failed) return;
    if (stopped_before(step)) {
      const int64_t done = std::max<int64_t>(0, run.stop_gate.stop_at() - run.warmup);
      if (on_phase)
        on_phase(done == 0 ? "Stopped early, before the first measured step"
                           : "Stopped early, after measured step " + std::to_string(done) + " of " +
                                 std::to_string(settings_.num_batches));
      return;
    }
    for (auto& state : replicas_) {
      while (!state->step_stop[step]->query() && !run.failed) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        stall_watch.poll();
      }
    }
    if (step + 1 == run.warmup) {
      if (on_phase) on_phase("Done warm up; measuring " + std::to_string(settings_.num_batches) + " steps");
      continue;
    }
    for (; timed_until <= step; ++timed_until) measured_ms.push_back(step_time_ms(timed_until));
    if (on_progress) on_progress(ProgressSnapshot{measured, measured_ms, step_loss(step)});
  }
  if (!run.failed && run.measured_end < run.total_steps && !stopped_before(run.measured_end) && on_phase)
    on_phase("Done measuring; running " + std::to_string(run.total_steps - run.measured_end) + " untimed steps");
}

// Waits for the device threads to end. Without a failure the stall watch keeps looking (the
// untimed steps, the final drain). After one, a device stuck where no abort reaches it (an NCCL
// wait for a failed peer) is given stuck_device_grace, then on_stuck_devices.
void Runner::wait_for_devices(RunState& run, StallWatch& stall_watch) {
  if (!settings_.on_stuck_devices && !settings_.on_no_progress) return;  // the joins wait
  const int num_replicas = static_cast<int>(replicas_.size());
  std::unique_lock<std::mutex> lock(run.mutex);
  while (run.threads_running > 0) {
    if (!run.failure) {
      run.thread_finished.wait_for(lock, std::chrono::milliseconds(100),
                                   [&] { return run.threads_running == 0 || run.failure != nullptr; });
      if (run.threads_running > 0 && !run.failure) {
        lock.unlock();
        stall_watch.poll();
        lock.lock();
      }
      continue;
    }
    if (!settings_.on_stuck_devices) {
      run.thread_finished.wait(lock, [&] { return run.threads_running == 0; });
      break;
    }
    const Clock::time_point deadline = run.failed_at + settings_.stuck_device_grace;
    if (run.thread_finished.wait_until(lock, deadline, [&] { return run.threads_running == 0; })) break;
    const int stuck = run.threads_running;
    const std::exception_ptr error = run.failure;
    lock.unlock();
    settings_.on_stuck_devices(describe_failure(error) + " (" + std::to_string(stuck) + " of " +
                               std::to_string(num_replicas) + " devices were still waiting for their peers " +
                               std::to_string(settings_.stuck_device_grace.count() / 1000) + " s later)");
    lock.lock();  // only if the callback returned: wait on as before
    run.thread_finished.wait(lock, [&] { return run.threads_running == 0; });
  }
}

// Every step's time and loss, the wall clock of the measured window, replica 0's final parameter
// norm, the strategy's traffic and the feed's waits: read once all devices are idle.
RunMeasurements Runner::collect_measurements(const RunState& run) {
  RunMeasurements result;
  const int64_t steps_run = std::min(run.total_steps, run.stop_gate.stop_at());
  result.stopped_early = steps_run < run.total_steps;
  result.warmup_steps = std::min(run.warmup, steps_run);
  const int64_t measured_steps = std::max<int64_t>(0, std::min(run.measured_end, steps_run) - run.warmup);
  for (int64_t step = 0; step < steps_run; ++step) {
    result.step_time_ms.push_back(step_time_ms(step));
    result.step_loss.push_back(step_loss(step));
  }
  if (measured_steps > 0) result.total_time_s = std::chrono::duration<double>(run.wall_end - run.wall_start).count();
  result.measured_from = run.wall_start;
  result.measured_until = run.wall_end;
  // Before a sharded run's whole parameters below: the steps' memory, as the steps left it.
  for (const auto& state : replicas_) result.memory.push_back(memory_record(*state->device));
  ReplicaState& first = *replicas_.front();
  first.device->make_current();
  void* scratch = first.norm_scratch.data();
  if (first.parameters->sharded()) {  // the norm of the whole parameters, summed as an unsharded run sums them
    const std::vector<float> whole = strategy_.assembled_parameters(0);
    first.device->make_current();
    // Where the whole parameters would pass the device's memory limit (the run was sized for its
    // shard), the host sums them instead, in another order: a last bit may differ.
    if (whole.size() * sizeof(float) > first.device->memory().room_for_transients()) {
      double sum = 0;
      for (float value : whole) sum += static_cast<double>(value) * value;
      result.param_norm = std::sqrt(sum);
    } else {
      Buffer values = first.device->allocate(whole.size() * sizeof(float),
                                             MemoryTag{MemoryCategory::scratch, "parameter norm"});
      first.device->copy_from_host(values.data(), whole.data(), whole.size() * sizeof(float));
      result.param_norm = std::sqrt(first.device->ops().sum_squares(values.as<float>(), whole.size(), scratch));
    }
  } else {
    result.param_norm = std::sqrt(first.device->ops().sum_squares(first.parameters->parameters(),
                                                                 first.parameters->count(), scratch));
  }
  result.num_parameters = static_cast<int64_t>(model_.layout().parameter_count());
  if (measured_steps > 0) result.comm = strategy_.communication_summary(measured_steps);
  result.cuda_graph = first.replayable_step != nullptr;
  result.kernels_per_step = first.kernels_per_step;
  result.final_loss_scale = first.optimizer->current_loss_scale();
  result.trailing_steps = std::max<int64_t>(0, steps_run - run.measured_end);
  if (settings_.data != nullptr) {
    for (int64_t step = 0; step < steps_run; ++step) {
      double waited = 0;
      int64_t items = 0;
      for (const auto& state : replicas_) {
        waited = std::max(waited, state->feed->ready(step).elapsed_ms_since(*state->step_start[step]));
        items += state->feed->items(step);
      }
      result.data_wait_ms.push_back(waited);
      result.step_items.push_back(items);
    }
    for (const auto& state : replicas_) result.host_wait_s = std::max(result.host_wait_s, state->feed->host_wait_seconds());
  }
  // The parts of the timed steps (Note [timed parts of a step]); each device's own step time over
  // the same steps, so its parts and its step belong together.
  std::vector<int64_t> timed_steps;
  for (int64_t step = run.warmup; step < run.warmup + measured_steps; ++step)
    if (run.times_parts(step)) timed_steps.push_back(step);
  if (!timed_steps.empty()) {
    const std::vector<double> exposed = strategy_.exposed_comm_ms_per_step(measured_steps);
    const double timed = static_cast<double>(timed_steps.size());
    for (size_t r = 0; r < replicas_.size(); ++r) {
      ReplicaState& state = *replicas_[r];
      const std::vector<int64_t> totals = read_totals(*state.device, state.phase_totals);
      StepPhases phases;
      phases.data_ms = static_cast<double>(totals[kDataPhase]) / 1e6 / timed;
      phases.forward_ms = static_cast<double>(totals[kForwardPhase]) / 1e6 / timed;
      // Backward includes the blocks it recomputed, which the recompute lap also gives apart.
      phases.backward_ms = static_cast<double>(totals[kBackwardPhase] + totals[kRecomputePhase]) / 1e6 / timed;
      phases.recompute_ms = static_cast<double>(totals[kRecomputePhase]) / 1e6 / timed;
      for (int64_t step : timed_steps)
        phases.own_step_ms += state.step_stop[step]->elapsed_ms_since(*state.step_start[step]) / timed;
      if (r < exposed.size()) phases.exposed_comm_ms = exposed[r];
      result.step_phases.push_back(phases);
    }
  }
  if (run.first_traced >= 0)
    for (const auto& state : replicas_)
      result.timelines.push_back(state->device->trace().collect(state->device->index(), state->device->description().name));
  for (size_t e = 1; e < run.epoch_marks.size(); ++e)
    result.epoch_time_s.push_back(std::chrono::duration<double>(run.epoch_marks[e] - run.epoch_marks[e - 1]).count());
  return result;
}

RunMeasurements Runner::run(const ProgressCallback& on_progress, const PhaseCallback& on_phase) {
  RunState run(settings_, static_cast<int>(replicas_.size()), strategy_.step_is_replayable());
  if (on_phase)
    on_phase(run.warmup > 0 ? "Running warm up (" + std::to_string(run.warmup) + " steps)" : "No warm-up steps");
  std::vector<std::thread> threads;
  threads.reserve(replicas_.size());
  for (auto& state : replicas_) threads.emplace_back([this, &state, &run] { drive_device(*state, run); });
  StallWatch stall_watch(replicas_, settings_);
  try {
    report_progress(run, stall_watch, on_progress, on_phase);
  } catch (...) {
    fail(run, std::current_exception());
  }
  wait_for_devices(run, stall_watch);
  for (std::thread& thread : threads) thread.join();
  if (run.failure) std::rethrow_exception(run.failure);
  RunMeasurements measured = collect_measurements(run);
  if (settings_.processes != nullptr) combine_across_processes(*settings_.processes, measured);
  return measured;
}

}  // namespace dpbench
