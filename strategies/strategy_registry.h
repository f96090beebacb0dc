// The strategies' table: every --variable_update value with its whole description, so that the
// command line, the recorded config, the console, the reports and scripts/sweep.sh (through
// `dpbench strategies`) all read one place and none of them compares strategy names.
// Adding a strategy: its class in one file, one entry in strategy_registry.cpp.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device_placement.h"
#include "engine/communication/collective_schedule.h"
#include "engine/training/model.h"
#include "engine/training/strategy.h"
#include "strategies/strategy_options.h"

namespace dpbench {

enum class StrategyFamily {
  independent,       // nothing exchanged
  parameter_server,  // owners of the master copy reduce, update and send back
  all_reduce,        // every replica all-reduces the gradients and updates alike
  fully_sharded,     // each device keeps a shard of every unit; units gathered, gradients reduce-scattered
};
const char* family_name(StrategyFamily family);  // "independent", "parameter server", "all-reduce"

enum class ProcessLayout {
  one_process,           // one process drives every device
  one_process_per_gpu,   // mpirun starts one process per GPU; each drives one
  either,                // either of the two, as the run is started
};

// What a strategy's validation sees: the resolved options, the option flags as typed, and the
// facts of the run its rules depend on.
struct StrategyRequest {
  std::string strategy;  // the entry's name (an alias resolved)
  const StrategyOptions& options;
  std::map<std::string, std::string> given;  // option flags on the command line: name -> text
  bool automatic_loss_scale = false;         // --precision=fp16 with --fp16_enable_auto_loss_scale
  int world_devices = 1;                     // devices of the whole run

  bool was_given(const std::string& flag) const { return given.count(flag) > 0; }
  // "--flag=text" as the user typed it (or as resolved, when not given), for messages.
  std::string typed(const std::string& flag) const;
};

struct StrategyEntry {
  std::string name;         // the --variable_update value
  std::string description;  // one line for --help and `dpbench strategies`
  StrategyFamily family = StrategyFamily::independent;
  ProcessLayout processes = ProcessLayout::one_process;
  // Another spelling of the entry named here (horovod is distributed_all_reduce): resolved to it
  // on the command line and not listed as a strategy of its own.
  std::string alias_of;
  // The synchronisation options (strategies/synchronisation_options.h) it takes: the flags the
  // command line accepts with it and the keys its result records. Any other is refused.
  std::vector<std::string> options;
  // The sweep token NAME:VALUE sets this option to VALUE; empty: the token is the name alone.
  std::string token_option;
  // Rules between its options and the run (one line naming both flags and the fix); throws
  // ConfigError. The options' own ranges are checked before.
  std::function<void(const StrategyRequest&)> validate;
  std::function<std::unique_ptr<Strategy>(const StrategyOptions&, const DevicePlacement&)> create;
  // What it issues per step for `plan` of `layout` on a job of `shape`, as data
  // (engine/communication/collective_schedule.h), without devices: what `dpbench predict` prices. Null where
  // nothing is exchanged. `units`: the model's parameter units and their uses (Note [parameter
  // units]), for a strategy that exchanges by unit; empty where unknown (it then takes the plan's
  // ranges for units).
  std::function<StepSchedule(const StrategyOptions&, const ParameterLayout&, const std::vector<GradientRange>& plan,
                             const ScheduleShape&, const ParameterUnits& units)>
      schedule;
  // What one device holds under it, from one replica's bytes alone, for `plan` of `layout` on a
  // job of `shape` (StrategyMemory, engine/machine/memory_ledger.h): which categories it shards
  // and which buffers it adds. `dpbench predict` and the run's too-little-memory line read it.
  std::function<StrategyMemory(const StrategyOptions&, const ParameterLayout&, const std::vector<GradientRange>& plan,
                               const ScheduleShape&, const ParameterUnits& units)>
      memory;
  // The one-process entry that issues the same schedule (distributed_all_reduce: replicated):
  // `dpbench predict` compares this entry's measured runs with that one's rows where it has none
  // of its own. Empty: none.
  std::string predicted_as;
  // Options it does not take for a reason of its own (flag -> the reason and the fix, which the
  // line refusing the flag says after the strategy's name); the others are refused by naming the
  // strategies that take them.
  std::map<std::string, std::string> refused_because;

  bool accepts(const std::string& option) const;
  // Whether it runs in `layout` (one_process or one_process_per_gpu).
  bool runs_in(ProcessLayout layout) const { return processes == layout || processes == ProcessLayout::either; }
  bool is_alias() const { return !alias_of.empty(); }
};

// Every entry, in the column order of the reports' comparison tables (aliases last).
const std::vector<StrategyEntry>& strategy_registry();
const StrategyEntry* find_strategy(const std::string& name);  // null when unknown
// The entry a name means, following an alias; null when unknown.
const StrategyEntry* resolve_strategy_name(const std::string& name);
// "independent, parameter_server, ..." (aliases as "horovod (= distributed_all_reduce)").
std::string strategy_names();

// The flags a sweep token stands for ("replicated:xring" -> --variable_update=replicated
// --all_reduce_spec=xring); throws ConfigError naming the token and the accepted forms.
std::vector<std::string> flags_of_sweep_token(const std::string& token);
// The configurations `dpbench predict` shows, in its row order: a strategy and the options that
// differ from the defaults. A strategy with a schedule is predicted by adding its line here.
struct PredictedVariant {
  std::string strategy;  // an entry's name
  std::function<void(StrategyOptions&)> options;
};
const std::vector<PredictedVariant>& predicted_variants();
// The options of `variant` as a result records them (for its label), and as the strategy reads them.
StrategyOptions options_of(const PredictedVariant& variant);
std::map<std::string, std::string> recorded_options(const std::string& strategy, const StrategyOptions& options);
// The labels of predict's rows, one per variant in its order, with no option beyond the variant's.
std::vector<std::string> predicted_variant_labels();

// "replicated[:SPEC]" for the entry, as `dpbench strategies` lists it.
std::string sweep_token_form(const StrategyEntry& entry);

// "replicated (nccl, bucket 10 MB)": the strategy and its recorded options (config key -> value as
// the result's JSON writes it). `every_option`: the console's full description (defaults too);
// otherwise only what differs from the defaults, as report columns read best.
std::string strategy_label(const std::string& strategy, const std::map<std::string, std::string>& options,
                           bool every_option);

}  // namespace dpbench
