// Test helpers for the sequence models: the RunConfig the CLI would resolve for nmt, rnnlm or gpt, and
// a tiny nmt every backend can train in milliseconds.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cli/run_config.h"
#include "engine/training/model.h"
#include "models/model_registry.h"
#include "engine/reference/reference_device.h"
#include "tests/host/model_probe.h"
#include "tests/host/test_support.h"

namespace dpbench::testing {

// The config the CLI would resolve: the model's sequence defaults, then `overrides`.
inline RunConfig sequence_config(const std::string& model, int batch,
                                 const std::map<std::string, std::string>& overrides = {}) {
  const ModelEntry* entry = find_model(model);
  REQUIRE(entry != nullptr);
  std::map<std::string, std::string> values(entry->sequence_flags.begin(), entry->sequence_flags.end());
  for (const auto& [name, value] : overrides) values[name] = value;
  RunConfig config;
  config.model = model;
  config.batch_size = batch;
  SequenceConfig& q = config.sequence;
  const std::map<std::string, int*> integers = {
      {"src_vocab_size", &q.src_vocab_size}, {"tgt_vocab_size", &q.tgt_vocab_size},
      {"vocab_size", &q.vocab_size},         {"embedding_dim", &q.embedding_dim},
      {"num_units", &q.num_units},           {"num_encoder_layers", &q.num_encoder_layers},
      {"num_decoder_layers", &q.num_decoder_layers}, {"num_layers", &q.num_layers},
      {"src_max_len", &q.src_max_len},       {"tgt_max_len", &q.tgt_max_len},
      {"seq_len", &q.seq_len},               {"loss_chunk_rows", &q.loss_chunk_rows},
      {"num_heads", &q.num_heads},           {"ffn_units", &q.ffn_units},
      {"hidden_size", &q.hidden_size}};
  for (const auto& [name, value] : values) {
    if (name == "encoder_type") q.encoder_type = value;
    else if (name == "direction") q.direction = value;
    else if (name == "lstm_algorithm") q.lstm_algorithm = value;
    else if (name == "gpt_size") q.gpt_size = value;
    else if (name == "dropout") q.dropout = std::stod(value);
    else *integers.at(name) = std::stoi(value);
  }
  return config;
}

inline std::unique_ptr<Model> build_model(const RunConfig& config) {
  return find_model(config.model)->create(config);
}

// A tiny nmt: vocabularies 13 and 11, embedding 5, 4 units, 2 + 2 layers, 4 source and 3 target
// tokens; the loss chunks hold 4 of the 9 target rows, so three chunks (the last one short).
inline RunConfig tiny_nmt(const std::string& encoder_type, const std::string& direction) {
  return sequence_config("nmt", 3,
                         {{"encoder_type", encoder_type}, {"direction", direction},
                          {"src_vocab_size", "13"}, {"tgt_vocab_size", "11"}, {"embedding_dim", "5"},
                          {"num_units", "4"}, {"num_encoder_layers", "2"}, {"num_decoder_layers", "2"},
                          {"src_max_len", "4"}, {"tgt_max_len", "3"}, {"loss_chunk_rows", "4"}});
}

// dpbench run with `args` on the reference backend, no warm-up, its result read back from `dir`.
inline nlohmann::json train_on_reference(const TempDir& dir, const std::string& name, std::vector<std::string> args) {
  args.insert(args.end(), {"--device=cpu", "--display_every=1000", "--num_warmup_batches=0",
                           "--result_file=" + dir.file(name + ".json")});
  REQUIRE(run_cli(args) == 0);
  return read_json(dir.file(name + ".json"));
}

// The mean loss of steps [from, from + count) of a result's steps.
inline double mean_loss(const nlohmann::json& steps, size_t from, size_t count) {
  double sum = 0;
  for (size_t i = from; i < from + count; ++i) sum += steps[i]["loss"].get<double>();
  return sum / static_cast<double>(count);
}

// A tiny Transformer nmt: vocabularies 13 and 11, width 8 in 2 heads, feed-forward 12, 2 + 2
// layers, 5 source and 4 target tokens (the cross-attention is not square); the loss chunks hold
// 5 of the 12 target rows. Dropout as given (0: the network is a smooth function of its
// parameters except at ReLU's kinks, for finite differences).
inline RunConfig tiny_transformer(const std::string& dropout = "0") {
  return sequence_config("nmt", 3,
                         {{"encoder_type", "transformer"}, {"direction", ""}, {"src_vocab_size", "13"},
                          {"tgt_vocab_size", "11"}, {"embedding_dim", "8"}, {"num_units", "8"},
                          {"num_heads", "2"}, {"ffn_units", "12"}, {"num_encoder_layers", "2"},
                          {"num_decoder_layers", "2"}, {"src_max_len", "5"}, {"tgt_max_len", "4"},
                          {"loss_chunk_rows", "5"}, {"dropout", dropout}});
}

// A sequence model in bf16 and in fp16 against its fp32 network (check_16bit_matches_fp32), with
// dropout off and at 0.1: `fp32_config(dropout)` is the model's fp32 config, batch 3.
inline void check_16bit_sequence_model(const std::function<RunConfig(const std::string&)>& fp32_config,
                                       double bf16_tolerance, double fp16_tolerance) {
  for (const std::string dropout : {"0", "0.1"}) {
    const RunConfig fp32 = fp32_config(dropout);
    const auto fp32_model = build_model(fp32);
    ModelProbe fp32_probe(*fp32_model, create_reference_device(0), 3);
    const std::vector<float> values = fp32_model->initial_parameters(5);
    const double fp32_loss = fp32_probe.loss_at(values);
    const std::vector<float> fp32_gradients = fp32_probe.gradients();
    for (const auto& [precision, type, tolerance] : {std::tuple{Precision::bf16, DataType::bf16, bf16_tolerance},
                                                     std::tuple{Precision::fp16, DataType::f16, fp16_tolerance}}) {
      INFO("dropout " << dropout << ", " << precision_name(precision));
      RunConfig config = fp32;
      config.precision = precision;
      check_16bit_matches_fp32(*build_model(config), 3, type, values, fp32_loss, fp32_gradients, tolerance,
                               create_reference_device(0));
    }
  }
}

}  // namespace dpbench::testing
