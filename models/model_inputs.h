// ModelInputs: what a model trains on, as its registry entry (models/model_registry.h) states it:
// its synthetic batches recomputed on the host (for a host feed) and a reader for each data set it
// accepts. The model's own file provides them, so no central switch knows which model reads what.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/training/model.h"
#include "models/model_settings.h"

namespace dpbench {

// Builds the host batches of `model` (made by the same entry's factory from the same config).
// Throws ConfigError for a missing or corrupt file, a vocabulary of another size than the model's,
// or a data set smaller than one global batch. `config` is resolved (data_name set where data_dir is).
using BatchSourceFactory = std::function<std::unique_ptr<BatchSource>(const ModelSettings&, const Model&)>;

struct DataSetReader {
  std::string data_name;       // the --data_name value it reads
  BatchSourceFactory create;   // reads --data_dir
};

struct ModelInputs {
  // The synthetic batches the model makes on the device, element for element, built on the host.
  BatchSourceFactory synthetic;
  // The data sets it reads; the first is the one --data_dir alone means. Empty: synthetic only.
  std::vector<DataSetReader> data_sets = {};
};

}  // namespace dpbench
