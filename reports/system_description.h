// System files (systems/*.json, format in systems/README.md): the target machine of `dpbench
// predict` as the step simulation needs it (reports/step_prediction.h: GPUs per host, bandwidth
// and latency inside a host, across hosts and to host memory, NCCL's algorithm, whether
// communication overlaps compute). Every value carries its source, so a prediction can be traced
// back to a datasheet or a measurement; a field this dpbench does not know is an error, not
// silently ignored.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "reports/step_prediction.h"

namespace dpbench {

struct SystemDescription {
  SystemModel model;
  std::string description;
  std::map<std::string, std::string> sources;  // field -> where its value comes from
};

// Throws RuntimeError naming `path` and the field at fault (unknown, missing, of the wrong type or
// out of range, a value without its source) and what is accepted.
SystemDescription parse_system_description(const nlohmann::json& document, const std::string& path);

// The file at `path`, read and parsed; the same errors, and one for a file that is not JSON.
SystemDescription load_system_description(const std::string& path);

}  // namespace dpbench
