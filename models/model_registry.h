// The model zoo's table: every --model value, whether it is built yet, its defaults and factory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model.h"
#include "engine/run_config.h"

namespace dpbench {

struct ModelDefaults {
  int batch_size = 32;             // per device
  std::string optimizer = "sgd";   // sgd | momentum | adam
  double learning_rate = 0.01;
};

struct ModelEntry {
  std::string name;
  std::string description;
  bool implemented = false;  // planned models are listed so the error can say "not built yet"
  bool mixed_precision = false;  // runs --precision=fp16|bf16 (16-bit activations)
  ModelDefaults defaults;
  std::function<std::unique_ptr<Model>(const RunConfig&)> create;  // empty when not implemented
  // The sequence-model flags (RunConfig::sequence) this model takes, with its defaults; a
  // model rejects the ones it does not list.
  std::vector<std::pair<std::string, std::string>> sequence_flags = {};
};

// Every sequence-model flag, in --help order.
const std::vector<std::string>& sequence_flag_names();

const std::vector<ModelEntry>& model_registry();
// nullptr when the name is not in the table at all.
const ModelEntry* find_model(const std::string& name);

}  // namespace dpbench
