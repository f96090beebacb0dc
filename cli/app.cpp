// Subcommand dispatch and the one place that turns exceptions into an error line and exit code.
#include "cli/app.h"

#include <exception>
#include <new>

#include "cli/comm_bench_command.h"
#include "cli/compare_command.h"
#include "cli/completion_command.h"
#include "cli/end_with_process.h"
#include "cli/flags.h"
#include "cli/interrupt_signals.h"
#include "cli/log.h"
#include "cli/predict_command.h"
#include "cli/process_exit.h"
#include "cli/report_command.h"
#include "cli/run_command.h"
#include "cli/strategies_command.h"
#include "engine/backends.h"
#include "engine/communication/process_group.h"
#include "engine/errors.h"
#include "engine/machine/host_memory.h"
#include "reports/text_file.h"
#include "dpbench_version.h"

namespace dpbench {
namespace {

// What to do when the host runs out of memory depends on what the command was holding: a run its
// model and batches, the offline commands the results they read.
std::string out_of_memory_remedy(const std::vector<std::string>& args) {
  const std::string command = args.empty() ? "" : args.front();
  if (command == "report" || command == "compare" || command == "predict")
    return "give " + command + " fewer result files or folders at once, or free memory";
  if (command == "comm_bench") return "lower --max_bytes, or free memory";
  return std::string(kLowerHostMemory) + ", or free memory";
}

}  // namespace

int dpbench_main(const std::vector<std::string>& args) {
  try {
    std::vector<std::string> run_args = args;
    // report, compare and predict read files only: no device probing, so they run anywhere.
    if (!run_args.empty() && run_args.front() == "report") {
      run_report_command({run_args.begin() + 1, run_args.end()});
      return 0;
    }
    if (!run_args.empty() && run_args.front() == "compare")
      return run_compare_command({run_args.begin() + 1, run_args.end()});
    if (!run_args.empty() && run_args.front() == "predict")
      return run_predict_command({run_args.begin() + 1, run_args.end()});
    if (!run_args.empty() && run_args.front() == "strategies") {
      run_strategies_command({run_args.begin() + 1, run_args.end()});
      return 0;
    }
    if (!run_args.empty() && run_args.front() == "completion") {
      run_completion_command({run_args.begin() + 1, run_args.end()});
      return 0;
    }
    if (!run_args.empty() && run_args.front() == "run") run_args.erase(run_args.begin());

    end_with_process_from_environment();
    watch_process_group_collectives(RunConfig().collective_timeout);  // until the flags say otherwise
    DeviceInventory inventory;
    inventory.cuda_gpus = cuda_device_count(&inventory.why_no_gpu);
    if (!run_args.empty() && run_args.front() == "comm_bench") {
      run_comm_bench_command({run_args.begin() + 1, run_args.end()}, inventory);
      return 0;
    }
    ParsedRunFlags parsed = parse_run_flags(run_args, inventory);
    parsed.arguments = args;
    // Written like any output: a closed or full standard output is an error, not a silent exit 0.
    if (parsed.help) {
      write_text_atomically("-", run_help_text(), "the help");
      return 0;
    }
    if (parsed.version) {
      write_text_atomically("-", std::string("dpbench ") + DPBENCH_VERSION + " (git " + DPBENCH_GIT_SHA + ")\n",
                            "the version");
      return 0;
    }
    watch_process_group_collectives(parsed.config.collective_timeout);
    const ProcessGroup* group = process_group();
    const bool speaks = group == nullptr || group->rank() == 0;
    install_interrupt_handlers(speaks);
    try {
      run_benchmark(parsed);
    } catch (const RunStoppedBeforeMeasuring& stopped) {
      if (speaks) error_log().warn(std::string(stopped.what()));
      return interrupted_exit_code(stopped.signal_number);
    }
    // A stop the job agreed on through another rank's signal ends this rank normally.
    if (const int signal_number = interrupt_signal(); signal_number != 0) return interrupted_exit_code(signal_number);
    return 0;
  } catch (const ConfigError& error) {
    print_error(error.what());
    return 2;
  } catch (const std::bad_alloc&) {
    print_error("out of host memory: an allocation failed; " + out_of_memory_remedy(args));
    return 1;
  } catch (const std::exception& error) {
    print_error(error.what());
    return 1;
  }
}

}  // namespace dpbench
