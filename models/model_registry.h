// The model zoo's table: every --model value, whether it is built yet, its defaults, its factory
// and its inputs (the synthetic batches it trains on and the data sets it reads).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/training/model.h"
#include "models/model_inputs.h"
#include "models/model_settings.h"

namespace dpbench {

struct ModelDefaults {
  int batch_size = 32;             // per device
  // sgd | momentum | adam | adamw. A C string: a std::string member with a default in this aggregate,
  // brace-initialised in the registry's table, made GCC 12 warn (falsely) of an uninitialized use.
  const char* optimizer = "sgd";
  double learning_rate = 0.01;
};

struct ModelEntry {
  std::string name;
  std::string description;
  bool implemented = false;  // planned models are listed so the error can say "not built yet"
  bool mixed_precision = false;  // runs --precision=fp16|bf16 (16-bit activations)
  ModelDefaults defaults;
  std::function<std::unique_ptr<Model>(const ModelSettings&)> create;  // empty when not implemented
  ModelInputs inputs;  // the host batches of the models `create` makes
  // The sequence-model flags (ModelSettings::sequence) this model takes, with its defaults; a
  // model rejects the ones it does not list.
  std::vector<std::pair<std::string, std::string>> sequence_flags = {};
  // What --activation_checkpointing=blocks recomputes, in words ("its blocks"); nullptr: the
  // model has nothing it can recompute and refuses the flag.
  const char* recomputed_blocks = nullptr;
  // Only with this --encoder_type (nullptr: any).
  const char* recomputed_blocks_encoder = nullptr;
  // The identical blocks --num_layers counts, in words ("its blocks"), where the rest of the model
  // does not change with their number: `dpbench predict --num_layers` scales a run's per-block time
  // and memory to another depth (Model::activation_bytes_outside_blocks says what stays). nullptr:
  // predict refuses --num_layers for the model.
  const char* repeated_blocks = nullptr;
};

// The --activation_checkpointing values; blocks needs a model (and encoder) that names its blocks.
inline const std::vector<std::string> kActivationCheckpointingNames = {"none", "blocks"};
// "" where `model` with `sequence` recomputes its blocks; else why not, naming what does.
std::string why_blocks_are_not_recomputed(const ModelEntry& model, const SequenceConfig& sequence);

// Every sequence-model flag, in --help order.
const std::vector<std::string>& sequence_flag_names();

const std::vector<ModelEntry>& model_registry();
// The per-device batch where none is given: the model's, or its variant's (nmt's transformer
// trains 128 sentence pairs, as the Transformer benchmarks do, where the LSTMs train 384).
int default_batch_size(const ModelEntry& model, const SequenceConfig& sequence);
// nullptr when the name is not in the table at all.
const ModelEntry* find_model(const std::string& name);
// The model's reader of --data_name=`data_name`; nullptr where it reads no such data set.
const DataSetReader* find_data_set(const ModelEntry& model, const std::string& data_name);
// "" where `model` reads --data_name=`data_name`; else why not, naming the models that read it
// ("cannot feed --model=nmt; it feeds trivial, resnet50, ...").
std::string why_data_set_cannot_feed(const std::string& model, const std::string& data_name);

}  // namespace dpbench
