// The `run` command line: tf_cnn_benchmarks-style flags -> a validated, fully resolved RunConfig,
// the grouped --help text, and the resolved configuration as JSON (the result's "config").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/flag_reader.h"
#include "cli/run_config.h"

namespace dpbench {

// What the machine offers. main() fills it from cuda_device_count(); tests pass made-up ones, so
// flag validation never has to touch a driver.
struct DeviceInventory {
  int cuda_gpus = 0;
  std::string why_no_gpu;  // the driver's reason when cuda_gpus == 0 (may be empty)
};

struct ParsedRunFlags {
  RunConfig config;
  bool help = false;
  bool version = false;
  // --device=auto found no GPU and chose the reference backend; main() prints a one-line note.
  bool fell_back_to_reference = false;
  std::vector<std::string> arguments;  // as given, recorded in the result's "invocation"
  // One-line remarks on a valid but probably unintended command line; main() prints them.
  std::vector<std::string> notes;
};

// `args` excludes the program name and the "run" subcommand word. Throws ConfigError with one line
// naming the flag, the value and what is accepted. With --help or --version nothing is validated.
ParsedRunFlags parse_run_flags(const std::vector<std::string>& args, const DeviceInventory& inventory);

// Every flag of `run`: name, group, value hint, help and default, from RunConfig's initialisers
// and the registries.
FlagTable run_flag_table();

// Usage line, then the flags grouped by concern, each with its default.
std::string run_help_text();

// Every resolved flag under its command-line name.
nlohmann::json config_to_json(const RunConfig& config);

}  // namespace dpbench
