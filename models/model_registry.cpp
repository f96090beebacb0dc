// The model zoo's table. Planned models are listed (implemented = false) so that asking for one
// gives "not implemented yet" rather than "unknown model".
#include "models/model_registry.h"

#include "models/cnn_model.h"
#include "models/sequence/gpt.h"
#include "models/sequence/sequence_models.h"
#include "models/trivial.h"

namespace dpbench {

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> entries = {
      {"trivial", "tiny dense network (32x32x3 -> 256 -> 10) for smoke tests", true, false,
       ModelDefaults{64, "sgd", 0.05},
       [](const ModelSettings& config) { return create_trivial_model(config); }, trivial_inputs()},
      {"resnet50", "ResNet-50 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const ModelSettings& config) { return create_resnet50_model(config); },
       cnn_inputs(CnnDataSets::cifar10), {}, "its bottleneck blocks"},
      {"resnet101", "ResNet-101 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const ModelSettings& config) { return create_resnet101_model(config); },
       cnn_inputs(CnnDataSets::cifar10), {}, "its bottleneck blocks"},
      {"resnet152", "ResNet-152 v1.5, 224x224", true, true, {64, "momentum", 0.1},
       [](const ModelSettings& config) { return create_resnet152_model(config); },
       cnn_inputs(CnnDataSets::cifar10), {}, "its bottleneck blocks"},
      {"inception3", "Inception-v3, 299x299", true, true, {64, "momentum", 0.1},
       [](const ModelSettings& config) { return create_inception3_model(config); },
       cnn_inputs(CnnDataSets::synthetic_only), {}, "its Inception modules"},
      {"vgg16", "VGG-16, 224x224", true, true, {64, "momentum", 0.01},
       [](const ModelSettings& config) { return create_vgg16_model(config); },
       cnn_inputs(CnnDataSets::synthetic_only)},
      {"cifar10_cnn", "Keras CIFAR-10 CNN, 32x32", true, true, {128, "momentum", 0.01},
       [](const ModelSettings& config) { return create_cifar10_cnn_model(config); },
       cnn_inputs(CnnDataSets::cifar10)},
      {"nmt", "NMT encoder-decoder: LSTMs without attention (the seed runs' configuration) or the Transformer", true,
       true, {384, "adam", 1e-3},
       [](const ModelSettings& config) { return create_nmt_model(config); }, nmt_inputs(),
       {{"encoder_type", "dynamic"}, {"direction", "bi"}, {"src_vocab_size", "50000"},
        {"tgt_vocab_size", "50000"}, {"embedding_dim", "512"}, {"num_units", "512"},
        {"num_encoder_layers", "4"}, {"num_decoder_layers", "4"}, {"src_max_len", "100"},
        {"tgt_max_len", "100"}, {"loss_chunk_rows", "0"}, {"lstm_algorithm", "fastest"},
        {"num_heads", "8"}, {"ffn_units", "2048"}, {"dropout", "0.1"}},
       "its encoder and decoder layers", "transformer"},
      {"rnnlm", "LSTM language model (vocabulary 10001, 2 x 128 units)", true, true,
       {512, "adam", 1e-3}, [](const ModelSettings& config) { return create_rnnlm_model(config); }, rnnlm_inputs(),
       {{"encoder_type", "cudnn_lstm"}, {"vocab_size", "10001"}, {"embedding_dim", "32"},
        {"num_units", "128"}, {"num_layers", "2"}, {"seq_len", "50"}, {"loss_chunk_rows", "0"},
        {"lstm_algorithm", "fastest"}}},
      // The 124m preset's shape; another --gpt_size replaces num_layers, num_heads and hidden_size
      // where they are not given (cli/flags_validation.cpp).
      {"gpt", "GPT-2 decoder language model (nanoGPT's shape; --gpt_size 124m to 1558m)", true, true,
       {16, "adamw", 1e-3}, [](const ModelSettings& config) { return create_gpt_model(config); }, gpt_inputs(),
       {{"gpt_size", "124m"}, {"vocab_size", std::to_string(kGptVocabulary)}, {"num_layers", "12"},
        {"num_heads", "12"}, {"hidden_size", "768"}, {"seq_len", "1024"}, {"dropout", "0"},
        // 4096 tokens' logits at a time: at 124m, batch 16, the step kept its speed (564,111
        // against 560,155 tokens/s in one chunk, one H200) and its peak fell by 1.15 GiB.
        {"loss_chunk_rows", "4096"}},
       "its blocks", nullptr, "its transformer blocks"},
  };
  return entries;
}

const std::vector<std::string>& sequence_flag_names() {
  static const std::vector<std::string> names = {
      "encoder_type", "direction",          "src_vocab_size",     "tgt_vocab_size",
      "vocab_size",   "embedding_dim",      "num_units",          "num_encoder_layers",
      "num_decoder_layers", "num_layers",   "src_max_len",        "tgt_max_len",
      "seq_len",      "loss_chunk_rows",    "lstm_algorithm",     "num_heads",
      "ffn_units",    "dropout",            "gpt_size",           "hidden_size"};
  return names;
}

int default_batch_size(const ModelEntry& model, const SequenceConfig& sequence) {
  if (model.name == "nmt" && sequence.encoder_type == "transformer") return 128;
  return model.defaults.batch_size;
}

std::string why_blocks_are_not_recomputed(const ModelEntry& model, const SequenceConfig& sequence) {
  const bool takes = model.recomputed_blocks != nullptr &&
                     (model.recomputed_blocks_encoder == nullptr || sequence.encoder_type == model.recomputed_blocks_encoder);
  if (takes) return "";
  std::string takers;
  for (const ModelEntry& entry : model_registry()) {
    if (entry.recomputed_blocks == nullptr) continue;
    takers += (takers.empty() ? "" : "; ") + entry.name;
    if (entry.recomputed_blocks_encoder != nullptr)
      takers += std::string(" with --encoder_type=") + entry.recomputed_blocks_encoder;
    takers += std::string(" (") + entry.recomputed_blocks + ")";
  }
  const std::string what = model.recomputed_blocks != nullptr
                               ? "--model=" + model.name + " with --encoder_type=" + sequence.encoder_type
                               : "--model=" + model.name;
  return what + " has no blocks it recomputes; it is taken by " + takers;
}

const ModelEntry* find_model(const std::string& name) {
  for (const ModelEntry& entry : model_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

const DataSetReader* find_data_set(const ModelEntry& model, const std::string& data_name) {
  for (const DataSetReader& reader : model.inputs.data_sets)
    if (reader.data_name == data_name) return &reader;
  return nullptr;
}

std::string why_data_set_cannot_feed(const std::string& model, const std::string& data_name) {
  const ModelEntry* entry = find_model(model);
  if (entry != nullptr && find_data_set(*entry, data_name) != nullptr) return "";
  std::string readers;
  for (const ModelEntry& other : model_registry())
    if (find_data_set(other, data_name) != nullptr) readers += (readers.empty() ? "" : ", ") + other.name;
  return "cannot feed --model=" + model + "; it feeds " + (readers.empty() ? "no model" : readers);
}

}  // namespace dpbench
