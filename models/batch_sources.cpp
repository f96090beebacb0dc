// Picks the host batches of a run from the model's registry entry (see batch_sources.h).
#include "models/batch_sources.h"

#include "engine/errors.h"
#include "models/model_registry.h"

namespace dpbench {

std::unique_ptr<BatchSource> create_batch_source(const ModelSettings& config, const Model& model) {
  const ModelEntry* entry = find_model(config.model);
  if (entry == nullptr || !entry->inputs.synthetic)
    throw ConfigError("--model=" + config.model + " has no host data feed");
  const DataConfig& data = config.data;
  if (data.data_dir.empty()) return entry->inputs.synthetic(config, model);
  const DataSetReader* reader = find_data_set(*entry, data.data_name);
  if (reader == nullptr)
    throw ConfigError("--data_name=" + data.data_name + ": " + why_data_set_cannot_feed(config.model, data.data_name));
  return reader->create(config, model);
}

}  // namespace dpbench
