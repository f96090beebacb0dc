// --trace_file (see the header).
#include "cli/trace_output.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "engine/communication/process_group.h"
#include "reports/chrome_trace.h"
#include "reports/hta_trace.h"
#include "reports/text_file.h"
#include "dpbench_version.h"

namespace dpbench {
namespace {

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// What HTA's folder reader takes for a trace.
bool read_by_hta(const std::string& name) { return ends_with(name, ".json") || ends_with(name, ".gz"); }

// The HTA rank of this process's device at `position`: devices are numbered over the job.
int hta_rank_of(const RunConfig& config, int position) { return config.process_rank * config.num_devices() + position; }

void check_hta_folder(const RunConfig& config, const std::string& result_path) {
  namespace fs = std::filesystem;
  const std::string& folder = config.trace_file;
  const std::string what = "--trace_format=hta writes a folder of one trace per device, for HTA's "
                           "TraceAnalysis(trace_dir=FOLDER)";
  if (folder == "-") reject("trace_file", folder, what + ", not standard output");
  std::error_code error;
  if (fs::exists(folder, error)) {
    if (!fs::is_directory(folder, error)) reject("trace_file", folder, "is not a folder; " + what);
  } else {
    const fs::path parent = fs::path(folder).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, error))
      reject("trace_file", folder, "its parent folder does not exist; " + what);
    // Under mpirun every rank may make it: one of them does, the others find it made.
    if (!fs::create_directory(folder, error) && !fs::is_directory(folder))
      reject("trace_file", folder, "cannot be made (" + error.message() + "); " + what);
  }
  std::set<std::string> ours;
  for (int rank = 0; rank < config.world_devices(); ++rank) ours.insert(hta_trace_file_name(rank));
  std::vector<std::string> others;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (read_by_hta(name) && ours.count(name) == 0) others.push_back(name);
  }
  if (!others.empty())
    reject("trace_file", folder,
           "holds " + std::to_string(others.size()) + " other .json or .gz file(s), e.g. " + quoted_argument(others.front()) +
               ": HTA reads every one in the folder as a rank's trace; give an empty or new folder");
  if (!result_path.empty() && read_by_hta(result_path) &&
      fs::equivalent(fs::absolute(result_path).parent_path(), folder, error))
    reject("trace_file", folder,
           "would hold --result_file=" + quoted_argument(result_path) +
               ", which HTA would read as a rank's trace; write the result elsewhere");
  for (int position = 0; position < config.num_devices(); ++position)
    check_output_path((fs::path(folder) / hta_trace_file_name(hta_rank_of(config, position))).string(), "--trace_file");
}

}  // namespace

const std::vector<Choice<TraceFormat>>& trace_format_choices() {
  static const std::vector<Choice<TraceFormat>> choices = {{"perfetto", TraceFormat::perfetto},
                                                          {"hta", TraceFormat::hta}};
  return choices;
}

const char* trace_format_name(TraceFormat format) {
  for (const Choice<TraceFormat>& choice : trace_format_choices())
    if (choice.value == format) return choice.name;
  return "?";
}

void check_trace_destination(const RunConfig& config, const std::string& result_path) {
  if (config.trace_format == TraceFormat::hta) {
    check_hta_folder(config, result_path);
  } else if (config.process_rank == 0) {
    check_output_path(config.trace_file, "--trace_file");  // rank 0 writes it
  }
}

std::string write_run_trace(const RunConfig& config, const std::vector<DeviceTimeline>& timelines,
                            int devices_per_rank, int64_t warmup_steps) {
  const ProcessGroup* group = process_group();
  TraceOrigin origin;
  origin.devices_per_rank = devices_per_rank;
  if (group != nullptr) {
    origin.rank = group->rank();
    origin.num_ranks = group->size();
    origin.host = group->hostnames().at(static_cast<size_t>(group->rank()));
    const auto [shift, uncertainty] = clock_shift_to_rank0(*group);
    origin.clock_shift_ns = shift;
    origin.clock_uncertainty_ns = uncertainty;
  }
  size_t spans = 0;
  int64_t first = -1, last = -1;
  for (const DeviceTimeline& timeline : timelines)
    for (const TracedStep& step : timeline.steps) {
      spans += step.spans.size();
      first = first < 0 ? step.step : std::min(first, step.step);
      last = std::max(last, step.step);
    }
  auto label = [&](int64_t step) {
    return step < warmup_steps ? "w" + std::to_string(step + 1) : std::to_string(step - warmup_steps + 1);
  };
  nlohmann::json metadata = {
      {"tool", "dpbench"},
      {"version", DPBENCH_VERSION},
      {"git_sha", DPBENCH_GIT_SHA},
      {"model", config.model},
      {"variable_update", config.variable_update},
      {"num_devices", config.world_devices()},
      {"batch_size_per_device", config.batch_size},
      {"trace_steps", first < 0 ? "" : label(first) + ":" + label(last)},
      {"clock", "device timestamps written by each stream (CUDA: %globaltimer) aligned to the host's steady "
                "clock per device; under mpirun every rank aligned to rank 0's"},
  };
  const int64_t steps = first < 0 ? 0 : last - first + 1;
  const std::string counts = std::to_string(steps) + " steps, " + std::to_string(spans) + " spans on this process's devices";

  if (config.trace_format == TraceFormat::hta) {
    // Each process writes its own devices' files: no gathering, and ranks on other hosts write
    // where their --trace_file folder is.
    for (size_t position = 0; position < timelines.size(); ++position) {
      HtaRank rank;
      rank.rank = hta_rank_of(config, static_cast<int>(position));
      rank.world_size = config.world_devices();
      rank.host_process_id = static_cast<int>(::getpid());
      const std::string path = (std::filesystem::path(config.trace_file) / hta_trace_file_name(rank.rank)).string();
      write_text_atomically(path, hta_trace_document(timelines[position], rank, origin, metadata), "trace");
    }
    if (origin.rank != 0) return "";
    return "Traces written to " + config.trace_file + " (" + std::to_string(config.world_devices()) +
           " files, one per device: rank0.json...; " + counts +
           "; analyse them with HTA's TraceAnalysis(trace_dir=...), or open one in https://ui.perfetto.dev)\n";
  }

  const nlohmann::json mine = trace_events(timelines, origin);
  std::vector<nlohmann::json> events_by_rank;
  if (group == nullptr) {
    events_by_rank.push_back(mine);
  } else {
    for (const std::string& text : group->all_gather_text(mine.dump())) events_by_rank.push_back(nlohmann::json::parse(text));
    if (group->rank() != 0) return "";
  }
  write_text_atomically(config.trace_file, chrome_trace_document(events_by_rank, metadata), "trace");
  return "Trace written to " + config.trace_file + " (" + counts +
         "; open it in https://ui.perfetto.dev or chrome://tracing)\n";
}

}  // namespace dpbench
