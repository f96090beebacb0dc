// The model zoo's table. Planned models are listed (implemented = false) so that asking for one
// gives "not implemented yet" rather than "unknown model".
#include "models/model_registry.h"

#include "models/cnn_model.h"
#include "models/sequence/sequence_models.h"
#include "models/trivial.h"

namespace dpbench {

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> entries = {
      {"trivial", "tiny dense network (32x32x3 -> 256 -> 10) for smoke tests", true, false,
       ModelDefaults{64, "sgd", 0.05},
       [](const RunConfig& config) { return create_trivial_model(config); }},
      {"resnet50", "ResNet-50 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const RunConfig& config) { return create_resnet50_model(config); }},
      {"resnet101", "ResNet-101 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const RunConfig& config) { return create_resnet101_model(config); }},
      {"resnet152", "ResNet-152 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const RunConfig& config) { return create_resnet152_model(config); }},
      {"inception3", "Inception-v3, 299x299", true, true, {64, "momentum", 0.1},
       [](const RunConfig& config) { return create_inception3_model(config); }},
      {"vgg16", "VGG-16, 224x224", true, true, {64, "momentum", 0.01},
       [](const RunConfig& config) { return create_vgg16_model(config); }},
      {"cifar10_cnn", "Keras CIFAR-10 CNN, 32x32", true, true, {128, "momentum", 0.01},
       [](const RunConfig& config) { return create_cifar10_cnn_model(config); }},
      {"nmt", "LSTM encoder-decoder NMT without attention (the seed runs' configuration)", true,
       false, {384, "adam", 1e-3},
       [](const RunConfig& config) { return create_nmt_model(config); },
       {{"encoder_type", "dynamic"}, {"direction", "bi"}, {"src_vocab_size", "50000"},
        {"tgt_vocab_size", "50000"}, {"embedding_dim", "512"}, {"num_units", "512"},
        {"num_encoder_layers", "4"}, {"num_decoder_layers", "4"}, {"src_max_len", "100"},
        {"tgt_max_len", "100"}, {"loss_chunk_rows", "0"}}},
      {"rnnlm", "LSTM language model (vocabulary 10001, 2 x 128 units)", true, false,
       {512, "adam", 1e-3}, [](const RunConfig& config) { return create_rnnlm_model(config); },
       {{"encoder_type", "cudnn_lstm"}, {"vocab_size", "10001"}, {"embedding_dim", "32"},
        {"num_units", "128"}, {"num_layers", "2"}, {"seq_len", "50"}, {"loss_chunk_rows", "0"}}},
  };
  return entries;
}

const std::vector<std::string>& sequence_flag_names() {
  static const std::vector<std::string> names = {
      "encoder_type", "direction",          "src_vocab_size",     "tgt_vocab_size",
      "vocab_size",   "embedding_dim",      "num_units",          "num_encoder_layers",
      "num_decoder_layers", "num_layers",   "src_max_len",        "tgt_max_len",
      "seq_len",      "loss_chunk_rows"};
  return names;
}

const ModelEntry* find_model(const std::string& name) {
  for (const ModelEntry& entry : model_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

}  // namespace dpbench
