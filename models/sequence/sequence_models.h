// The sequence models of the zoo: nmt (LSTM encoder-decoder without attention, or the
// Transformer) and rnnlm (LSTM language model), built from embeddings, LstmStacks or Transformer
// layers, and the chunked vocabulary loss. The
// factories read ModelSettings::sequence, already resolved (models/model_registry.cpp has the
// defaults); they throw ConfigError for shapes that cannot form the network.
#pragma once

#include <memory>

#include "engine/training/model.h"
#include "models/model_inputs.h"
#include "models/model_settings.h"
#include "models/sequence/lstm_stack.h"

namespace dpbench {

// "cudnn_lstm" -> fused, "dynamic" -> unrolled; throws ConfigError otherwise.
LstmImplementation parse_lstm_implementation(const std::string& encoder_type);

std::unique_ptr<Model> create_nmt_model(const ModelSettings& config);
// nmt with --encoder_type=transformer (nmt_transformer.cpp); create_nmt_model hands it on.
std::unique_ptr<Model> create_transformer_nmt_model(const ModelSettings& config);
std::unique_ptr<Model> create_rnnlm_model(const ModelSettings& config);

// A sequence model's replica is built for the batch its model was shaped for; throws
// RuntimeError naming `model` otherwise.
void check_replica_batch(const char* model, int built_for, const ReplicaShard& shard);

// A Replica of `model` (shaped for `built_for` sequences per device) on `device` for `shard`, once
// check_replica_batch has passed: every sequence model's create_replica.
template <typename Replica, typename ModelType>
std::unique_ptr<ModelReplica> checked_replica(const char* name, int built_for, const ModelType& model, Device& device,
                                              ParameterSet& params, const ReplicaShard& shard) {
  check_replica_batch(name, built_for, shard);
  return std::make_unique<Replica>(model, device, params, shard);
}

// Their inputs: synthetic sentence pairs or parallel text (nmt_inputs.cpp), synthetic token
// windows or PTB (rnnlm_inputs.cpp).
ModelInputs nmt_inputs();
ModelInputs rnnlm_inputs();

}  // namespace dpbench
