// The host-side batches of a run (engine/data/batch_source.h), as the model's registry entry
// provides them (models/model_inputs.h): its synthetic batches, identical to those it makes on the
// device (so host feeding trains exactly what on-device data trains), or the data set --data_dir
// holds. Each replica gets its shard of every global batch (engine/data/epoch_sampler.h), padded
// to the model's fixed lengths, with loss weights that mask the padding.
#pragma once

#include <memory>

#include "engine/data/batch_source.h"
#include "engine/training/model.h"
#include "models/model_settings.h"

namespace dpbench {

// ConfigError for a data set the model cannot read (naming the models that can), a missing or
// corrupt file, a vocabulary of another size than the model's, or a data set smaller than one
// global batch. `config` is resolved (data_name set where data_dir is); `model` is what
// config.model's entry made from it.
std::unique_ptr<BatchSource> create_batch_source(const ModelSettings& config, const Model& model);

}  // namespace dpbench
