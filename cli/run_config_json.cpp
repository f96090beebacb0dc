// The resolved `run` configuration as JSON, the result's "config": every flag under its
// command-line name, and of the sequence, synchronisation and data flags only those that apply.
#include "cli/flags.h"

#include <map>

#include "cli/trace_output.h"
#include "models/model_registry.h"
#include "strategies/strategy_registry.h"
#include "strategies/synchronisation_options.h"

namespace dpbench {
namespace {

// Only the sequence flags the model takes (an image model's result carries none of them).
void add_sequence_flags(const RunConfig& config, nlohmann::json& json) {
  const ModelEntry* model = find_model(config.model);
  if (model == nullptr) return;
  const SequenceConfig& q = config.sequence;
  const std::map<std::string, nlohmann::json> values = {
      {"encoder_type", q.encoder_type},       {"direction", q.direction},
      {"src_vocab_size", q.src_vocab_size},   {"tgt_vocab_size", q.tgt_vocab_size},
      {"vocab_size", q.vocab_size},           {"embedding_dim", q.embedding_dim},
      {"num_units", q.num_units},             {"num_encoder_layers", q.num_encoder_layers},
      {"num_decoder_layers", q.num_decoder_layers}, {"num_layers", q.num_layers},
      {"src_max_len", q.src_max_len},         {"tgt_max_len", q.tgt_max_len},
      {"seq_len", q.seq_len},                 {"loss_chunk_rows", q.loss_chunk_rows},
      {"lstm_algorithm", q.lstm_algorithm},   {"num_heads", q.num_heads},
      {"ffn_units", q.ffn_units},             {"dropout", q.dropout},
      {"gpt_size", q.gpt_size},               {"hidden_size", q.hidden_size}};
  for (const auto& [name, unused] : model->sequence_flags) json[name] = values.at(name);
}

// Only the options the strategy takes (its description's): independent records none.
void add_synchronisation_flags(const RunConfig& config, nlohmann::json& json) {
  const StrategyEntry* strategy = find_strategy(config.variable_update);
  if (strategy == nullptr) return;
  for (const SynchronisationOption& option : synchronisation_options())
    if (strategy->accepts(option.flag)) json[option.flag] = option.recorded(config);
}

// Only what applies: synthetic on-device runs carry the feed alone.
void add_data_flags(const RunConfig& config, nlohmann::json& json) {
  const DataConfig& data = config.data;
  json["data_feed"] = data.data_feed;
  if (!data.data_name.empty()) json["data_name"] = data.data_name;
  if (!data.data_dir.empty()) json["data_dir"] = data.data_dir;
  if (data.host_feed()) {
    json["prefetch_data_to_device"] = data.prefetch_data_to_device;
    json["prefetch_depth"] = data.prefetch_depth;
    json["datasets_num_private_threads"] = data.datasets_num_private_threads;
  }
  if (data.data_dir.empty()) return;
  json["shuffle"] = data.shuffle;
  json["num_epochs"] = data.num_epochs;
  if (data.num_epochs > 0) json["timed_epochs"] = std::to_string(data.timed_epoch_first) + ":" + std::to_string(data.timed_epoch_last);
  if (data.data_name == "ptb" && !data.vocab_file.empty()) json["vocab_file"] = data.vocab_file;
  if (data.data_name == "parallel_text") {
    json["train_prefix"] = data.train_prefix;
    json["vocab_prefix"] = data.vocab_prefix;
    json["src"] = data.src;
    json["tgt"] = data.tgt;
    json["num_buckets"] = data.num_buckets;
  }
}

}  // namespace

nlohmann::json config_to_json(const RunConfig& config) {
  nlohmann::json json = {
      {"model", config.model},
      {"batch_size", config.batch_size},
      {"total_batch_size", config.total_batch_size},
      {"data_format", config.data_format},
      {"precision", precision_name(config.precision)},
      {"use_fp16", config.use_fp16},
      {"forward_only", config.forward_only},
      {"fuse_batch_norm_statistics", config.fuse_batch_norm_statistics},
      {"activation_checkpointing", config.activation_checkpointing},
      {"fp16_loss_scale", config.fp16_loss_scale},
      {"fp16_enable_auto_loss_scale", config.fp16_enable_auto_loss_scale},
      {"fp16_inc_loss_scale_every_n", config.fp16_inc_loss_scale_every_n},
      {"device", config.device},
      {"backend", backend_name(config.backend)},
      {"num_gpus", config.num_gpus},
      {"gpu_indices", config.gpu_indices},
      {"variable_update", config.variable_update},
      {"independent_replica", config.independent_replica},
      {"optimizer", config.optimizer},
      {"learning_rate", config.learning_rate},
      {"momentum", config.momentum},
      {"adam_beta1", config.adam_beta1},
      {"adam_beta2", config.adam_beta2},
      {"adam_epsilon", config.adam_epsilon},
      {"weight_decay", config.weight_decay},
      {"seed", config.seed},
      {"num_batches", config.num_batches},
      {"num_warmup_batches", config.num_warmup_batches},
      {"display_every", config.display_every},
      {"cuda_graph", config.cuda_graph},
      {"cudnn_benchmark", config.cudnn_benchmark},
      {"deterministic", config.deterministic},
      {"profile_step", config.profile_step},
      {"collective_timeout", config.collective_timeout},
      {"rendezvous_port", config.rendezvous_port},
      {"peak_tflops", config.peak_tflops},
      {"device_memory", config.device_memory},
      {"result_file", config.result_file},
      {"trace_file", config.trace_file},
      {"trace_format", trace_format_name(config.trace_format)},
      {"trace_steps", config.trace_steps},
      {"nvtx", config.nvtx},
  };
  add_sequence_flags(config, json);
  add_synchronisation_flags(config, json);
  add_data_flags(config, json);
  return json;
}

}  // namespace dpbench
