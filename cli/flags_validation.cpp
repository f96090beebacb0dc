// Checking and resolving the run flags: every bad value or combination becomes one ConfigError line
// of the form "--flag=value: what is wrong; what is accepted", and defaults that depend on other
// flags (the model's batch size and optimizer, the device list, the backend) are filled in here.
#include "cli/flags_validation.h"
#include "cli/trace_output.h"
#include "cli/traced_steps.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>

#include "cli/flag_limits.h"
#include "cli/flag_parsing.h"
#include "cli/launch_flags.h"
#include "engine/communication/process_group.h"
#include "engine/errors.h"
#include "models/model_registry.h"
#include "models/sequence/gpt.h"
#include "reports/text_file.h"
#include "strategies/all_reduce_spec.h"
#include "strategies/strategy_registry.h"

namespace dpbench {
namespace {

const ModelEntry& resolve_model(const std::string& name) {
  const ModelEntry* entry = find_model(name);
  if (entry == nullptr) {
    reject("model", name, "unknown model; accepted: " + describe_choices(model_registry(), false));
  }
  if (!entry->implemented) {
    reject("model", name, "not implemented yet; accepted now: " + describe_choices(model_registry(), true));
  }
  return *entry;
}

std::string count_gpus(int count) {
  return std::to_string(count) + (count == 1 ? " CUDA GPU is" : " CUDA GPUs are");
}

std::vector<int> parse_gpu_indices(const std::string& text) {
  const std::string accepted = "accepted: a comma-separated list of distinct device indices, e.g. 0,2";
  if (text.empty()) reject("gpu_indices", text, "names no device; " + accepted);
  std::vector<int> indices;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    int index = -1;
    if (!parse_integer_text(item, &index) || index < 0) {
      reject("gpu_indices", text, "'" + item + "' is not a device index; " + accepted);
    }
    if (std::find(indices.begin(), indices.end(), index) != indices.end()) {
      reject("gpu_indices", text, "index " + std::to_string(index) + " appears twice; " + accepted);
    }
    indices.push_back(index);
    start = comma + 1;
  }
  return indices;
}

// Backend, device count and indices, from --device, --num_gpus and --gpu_indices together.
void resolve_devices(const GivenFlags& flags, const DeviceInventory& inventory, RunConfig* config,
                     bool* fell_back_to_reference) {
  config->device = flags.text("device");
  require_one_of("device", config->device, {"auto", "gpu", "cpu"}, "device");
  *fell_back_to_reference = false;
  if (config->device == "gpu" && inventory.cuda_gpus <= 0) {
    std::string why = inventory.why_no_gpu.empty() ? "" : " (" + inventory.why_no_gpu + ")";
    throw ConfigError("--device=gpu: no CUDA GPU is present" + why +
                      "; use --device=cpu for the reference backend");
  }
  if (config->device == "cpu") {
    config->backend = BackendKind::reference;
  } else if (config->device == "gpu" || inventory.cuda_gpus > 0) {
    config->backend = BackendKind::cuda;
  } else {
    config->backend = BackendKind::reference;
    *fell_back_to_reference = true;
  }
  const bool on_cuda = config->backend == BackendKind::cuda;
  const int device_limit = on_cuda ? inventory.cuda_gpus : kMaxReferenceDevices;
  // Under mpirun each process drives its own device: by default the one its host-local rank names.
  if (const ProcessGroup* group = process_group()) {
    config->num_processes = group->size();
    config->process_rank = group->rank();
  }

  const std::string num_gpus_text = flags.text("num_gpus");
  int num_gpus = parse_int_at_least("num_gpus", num_gpus_text, 1, "must be at least 1");

  if (flags.was_given("gpu_indices")) {
    const std::string indices_text = flags.text("gpu_indices");
    std::vector<int> indices = parse_gpu_indices(indices_text);
    if (flags.was_given("num_gpus") && num_gpus != static_cast<int>(indices.size())) {
      throw ConfigError("--gpu_indices=" + indices_text + " names " + std::to_string(indices.size()) +
                        " devices but --num_gpus=" + num_gpus_text +
                        "; give only one of them, or make them agree");
    }
    for (int index : indices) {
      if (index < device_limit) continue;
      std::string present = on_cuda ? count_gpus(device_limit) + " present"
                                    : "the reference backend has host devices";
      reject("gpu_indices", indices_text,
             "index " + std::to_string(index) + " is out of range; " + present + " (indices 0.." +
                 std::to_string(device_limit - 1) + ")");
    }
    config->gpu_indices = indices;
  } else {
    if (num_gpus > device_limit) {
      if (on_cuda) {
        reject("num_gpus", num_gpus_text,
               "only " + count_gpus(device_limit) + " present; use --num_gpus<=" +
                   std::to_string(device_limit) + ", or --device=cpu for the reference backend");
      }
      reject("num_gpus", num_gpus_text,
             "the reference backend runs at most " + std::to_string(kMaxReferenceDevices) +
                 " host devices; use --num_gpus<=" + std::to_string(kMaxReferenceDevices));
    }
    config->gpu_indices.clear();
    // One process per GPU: a process that sees a single GPU (srun --gpus-per-task=1, or
    // CUDA_VISIBLE_DEVICES set per process) takes it; one that sees several takes its host-local
    // rank's.
    const ProcessGroup* group = process_group();
    const bool sees_one_gpu = on_cuda && device_limit == 1;
    const int first = group != nullptr && num_gpus == 1 && !sees_one_gpu ? group->local_rank() : 0;
    if (first >= device_limit)
      throw ConfigError("this host runs more processes than it has " + std::string(on_cuda ? "GPUs" : "devices") +
                        ": local rank " + std::to_string(first) + " (from " + group->launcher() + "'s variables), " +
                        std::to_string(device_limit) + " " + (on_cuda ? "GPUs visible" : "devices") +
                        "; start at most that many ranks per host, give each process one GPU "
                        "(CUDA_VISIBLE_DEVICES, srun --gpus-per-task=1), or name it with --gpu_indices");
    for (int index = 0; index < num_gpus; ++index) config->gpu_indices.push_back(first + index);
  }
  config->num_gpus = config->num_devices();
}

// Weak scaling (--batch_size per device) or strong scaling (--total_batch_size over all devices).
void resolve_batch(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  const int devices = config->world_devices();
  const bool batch_given = flags.was_given("batch_size");
  const bool total_given = flags.was_given("total_batch_size");
  int batch = batch_given ? parse_positive_int("batch_size", flags.text("batch_size")) : 0;
  int total = total_given ? parse_positive_int("total_batch_size", flags.text("total_batch_size")) : 0;
  if (total_given) {
    if (total % devices != 0) {
      reject("total_batch_size", flags.text("total_batch_size"),
             "does not divide evenly over " + std::to_string(devices) + " devices; use a multiple of " +
                 std::to_string(devices));
    }
    if (batch_given && batch != total / devices) {
      throw ConfigError("--batch_size=" + flags.text("batch_size") + " and --total_batch_size=" +
                        flags.text("total_batch_size") + " disagree: " + std::to_string(total) +
                        " over " + std::to_string(devices) + " devices is " +
                        std::to_string(total / devices) + " per device; give only one of them");
    }
    batch = total / devices;
  }
  if (!batch_given && !total_given) batch = default_batch_size(model, config->sequence);
  if (static_cast<long long>(batch) * devices > INT_MAX) {
    reject("batch_size", std::to_string(batch),
           "too large: the global batch over " + std::to_string(devices) + " devices exceeds " +
               std::to_string(INT_MAX));
  }
  if (batch > kMaxBatchPerDevice) {
    const bool per_device = batch_given || !total_given;
    reject(per_device ? "batch_size" : "total_batch_size", flags.text(per_device ? "batch_size" : "total_batch_size"),
           "too large: " + std::to_string(batch) + " samples per device; accepted: up to " +
               std::to_string(kMaxBatchPerDevice) + " per device");
  }
  config->batch_size = batch;
  config->total_batch_size = total;
}

void resolve_numerics(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  config->data_format = flags.text("data_format");
  require_one_of("data_format", config->data_format, {"NCHW", "NHWC"}, "data format");
  config->cudnn_benchmark = parse_bool("cudnn_benchmark", flags.text("cudnn_benchmark"));
  config->deterministic = parse_bool("deterministic", flags.text("deterministic"));
  config->forward_only = parse_bool("forward_only", flags.text("forward_only"));
  config->fuse_batch_norm_statistics =
      parse_bool("fuse_batch_norm_statistics", flags.text("fuse_batch_norm_statistics"));
  config->activation_checkpointing = flags.text("activation_checkpointing");
  require_one_of("activation_checkpointing", config->activation_checkpointing, kActivationCheckpointingNames,
                 "activation checkpointing");
  if (config->recomputes_blocks() && config->forward_only)
    reject("activation_checkpointing", config->activation_checkpointing,
           "recomputes blocks in the backward pass, and --forward_only runs none; drop one of them");
  const std::string precision_text = flags.text("precision");
  std::vector<std::string> precision_names;
  for (Precision precision : every_precision()) precision_names.push_back(precision_name(precision));
  require_one_of("precision", precision_text, precision_names, "precision");
  config->precision = *find_precision(precision_text);
  config->use_fp16 = parse_bool("use_fp16", flags.text("use_fp16"));
  if (config->use_fp16) {
    if (flags.was_given("precision") && config->precision != Precision::fp16)
      reject("use_fp16", flags.text("use_fp16"),
             "contradicts --precision=" + precision_text + " (--use_fp16 means --precision=fp16); give one of them");
    config->precision = Precision::fp16;
  }
  if (config->activation_type() != DataType::f32 && !model.mixed_precision) {
    // Named as the user typed it: --use_fp16 is how tf_cnn_benchmarks users ask for fp16.
    const bool by_alias = config->use_fp16 && !flags.was_given("precision");
    reject(by_alias ? "use_fp16" : "precision", by_alias ? flags.text("use_fp16") : precision_text,
           "--model=" + model.name + " computes in fp32 only; use fp32 or tf32, or a CNN model");
  }

  const bool fp16 = config->precision == Precision::fp16;
  config->fp16_enable_auto_loss_scale =
      parse_bool("fp16_enable_auto_loss_scale", flags.text("fp16_enable_auto_loss_scale"));
  if (flags.was_given("fp16_loss_scale")) {
    const std::string text = flags.text("fp16_loss_scale");
    config->fp16_loss_scale = parse_finite_number("fp16_loss_scale", text, "a number >= 1, e.g. 128");
    if (!(config->fp16_loss_scale >= 1.0) || config->fp16_loss_scale > 16777216.0)
      reject("fp16_loss_scale", text, "must be between 1 and 2^24 (16777216)");
  }
  config->fp16_inc_loss_scale_every_n =
      parse_int_at_least("fp16_inc_loss_scale_every_n", flags.text("fp16_inc_loss_scale_every_n"), 1,
                         "must be at least 1", kMaxLossScaleInterval);
  for (const char* flag : {"fp16_loss_scale", "fp16_enable_auto_loss_scale", "fp16_inc_loss_scale_every_n"})
    if (flags.was_given(flag) && !fp16)
      reject(flag, flags.text(flag),
             "loss scaling is for --precision=fp16 only (this run is " + std::string(precision_name(config->precision)) +
                 ")");
  if (flags.was_given("fp16_inc_loss_scale_every_n") && !config->fp16_enable_auto_loss_scale)
    reject("fp16_inc_loss_scale_every_n", flags.text("fp16_inc_loss_scale_every_n"),
           "only matters with --fp16_enable_auto_loss_scale=true");
}

// The sequence flags the model lists take their values from the command line or the model's
// defaults; any other sequence flag given is an error naming the models that take it.
void resolve_sequence(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  SequenceConfig& q = config->sequence;
  std::map<std::string, std::string> values(model.sequence_flags.begin(), model.sequence_flags.end());
  for (const std::string& name : sequence_flag_names()) {
    if (!flags.was_given(name)) continue;
    if (values.count(name) == 0) {
      std::vector<std::string> takers;
      for (const ModelEntry& entry : model_registry())
        for (const auto& flag : entry.sequence_flags)
          if (flag.first == name) takers.push_back(entry.name);
      reject(name, flags.text(name),
             "does not apply to --model=" + model.name + "; it is a flag of " + join(takers, " and "));
    }
    values[name] = flags.text(name);
  }
  auto integer = [&](const char* name, int* field, int minimum, int maximum) {
    if (values.count(name) == 0) return;
    *field = parse_int_at_least(name, values[name], minimum,
                                minimum == 0 ? "must be at least 0" : "must be a positive integer", maximum);
  };
  if (values.count("encoder_type")) {
    q.encoder_type = values["encoder_type"];
    require_one_of("encoder_type", q.encoder_type, kEncoderTypeNames, "encoder");
    if (q.encoder_type == "transformer" && model.name != "nmt")
      reject("encoder_type", q.encoder_type, "is nmt's; --model=" + model.name + " takes cudnn_lstm or dynamic");
  }
  const bool transformer = q.encoder_type == "transformer";
  const bool gpt = model.name == "gpt";
  for (const char* name : {"num_heads", "ffn_units", "dropout"})
    if (flags.was_given(name) && !transformer && !gpt)
      reject(name, flags.text(name), "sizes the Transformer; give --encoder_type=transformer or drop the flag");
  if (transformer) {
    // Transformer-base's depth and width where not given; it has no direction, and its
    // embeddings are the model's width.
    if (flags.was_given("direction"))
      reject("direction", flags.text("direction"), "is an LSTM encoder's; the transformer attends both ways");
    values.erase("direction");
    q.direction.clear();
    if (!flags.was_given("num_encoder_layers")) values["num_encoder_layers"] = "6";
    if (!flags.was_given("num_decoder_layers")) values["num_decoder_layers"] = "6";
    if (!flags.was_given("embedding_dim") && flags.was_given("num_units")) values["embedding_dim"] = values["num_units"];
    if (flags.was_given("lstm_algorithm"))
      reject("lstm_algorithm", flags.text("lstm_algorithm"), "picks cuDNN's LSTM; the transformer has none");
  }
  const GptPreset* gpt_preset = nullptr;
  if (gpt) {
    // The preset sizes what the command line leaves open.
    gpt_preset = find_gpt_preset(values["gpt_size"]);
    if (gpt_preset == nullptr)
      reject("gpt_size", values["gpt_size"],
             "is not one of GPT-2's sizes; give one of " + gpt_preset_names() +
                 ", or size the model with --num_layers, --num_heads and --hidden_size");
    if (!flags.was_given("num_layers")) values["num_layers"] = std::to_string(gpt_preset->layers);
    if (!flags.was_given("num_heads")) values["num_heads"] = std::to_string(gpt_preset->heads);
    if (!flags.was_given("hidden_size")) values["hidden_size"] = std::to_string(gpt_preset->hidden);
  }
  if (values.count("direction")) {
    q.direction = values["direction"];
    require_one_of("direction", q.direction, {"uni", "bi"}, "direction");
  }
  // The seeds' spellings: --encoder_type=uni|bi is the unrolled encoder with that direction.
  if (q.encoder_type == "uni" || q.encoder_type == "bi") {
    if (flags.was_given("direction") && q.direction != q.encoder_type)
      reject("encoder_type", q.encoder_type,
             "contradicts --direction=" + q.direction + " (--encoder_type=" + q.encoder_type +
                 " means --encoder_type=dynamic --direction=" + q.encoder_type + "); give one of them");
    if (values.count("direction") == 0)
      reject("encoder_type", q.encoder_type,
             "names a direction, which --model=" + model.name + " does not have; accepted: cudnn_lstm, dynamic");
    q.direction = q.encoder_type;
    q.encoder_type = "dynamic";
  }
  integer("src_vocab_size", &q.src_vocab_size, 1, kMaxVocabulary);
  integer("tgt_vocab_size", &q.tgt_vocab_size, 1, kMaxVocabulary);
  integer("vocab_size", &q.vocab_size, 1, kMaxVocabulary);
  integer("embedding_dim", &q.embedding_dim, 1, kMaxWidth);
  integer("num_units", &q.num_units, 1, kMaxWidth);
  integer("num_encoder_layers", &q.num_encoder_layers, 1, kMaxLayers);
  integer("num_decoder_layers", &q.num_decoder_layers, 1, kMaxLayers);
  integer("num_layers", &q.num_layers, 1, kMaxLayers);
  integer("src_max_len", &q.src_max_len, 1, kMaxSequenceLength);
  integer("tgt_max_len", &q.tgt_max_len, 1, kMaxSequenceLength);
  integer("seq_len", &q.seq_len, 1, kMaxSequenceLength);
  integer("loss_chunk_rows", &q.loss_chunk_rows, 0, INT_MAX);
  integer("num_heads", &q.num_heads, 1, kMaxWidth);
  integer("ffn_units", &q.ffn_units, 1, kMaxWidth);
  integer("hidden_size", &q.hidden_size, 1, kMaxWidth);
  if (gpt_preset != nullptr) {
    // Recorded as the preset only where the shape is the preset's.
    const bool preset_shape = q.num_layers == gpt_preset->layers && q.num_heads == gpt_preset->heads &&
                              q.hidden_size == gpt_preset->hidden;
    q.gpt_size = preset_shape ? gpt_preset->name : "custom";
    if (q.hidden_size % q.num_heads != 0)
      reject("num_heads", values["num_heads"],
             "does not divide --hidden_size=" + std::to_string(q.hidden_size) + "; give a divisor of it");
  }
  if (values.count("dropout")) {
    q.dropout = parse_finite_number("dropout", values["dropout"], "a rate in [0, 1), e.g. 0.1");
    if (q.dropout < 0.0 || q.dropout >= 1.0) reject("dropout", values["dropout"], "must be in [0, 1), e.g. 0.1");
  }
  if (values.count("lstm_algorithm")) {
    q.lstm_algorithm = values["lstm_algorithm"];
    require_one_of("lstm_algorithm", q.lstm_algorithm, kLstmAlgorithmNames, "LSTM algorithm");
    if (flags.was_given("lstm_algorithm") && q.encoder_type != "cudnn_lstm" && !transformer)
      reject("lstm_algorithm", q.lstm_algorithm,
             "picks cuDNN's fused RNN algorithm, and this run's LSTMs are --encoder_type=" + q.encoder_type +
                 " (our GEMMs and cell kernels); give --encoder_type=cudnn_lstm or drop the flag");
    // dpbench's persistent kernels (cuda_persistent_lstm.h) take what they were built for only.
    if (q.lstm_algorithm == "own_persistent") {
      if (config->activation_type() == DataType::f32)
        reject("lstm_algorithm", q.lstm_algorithm,
               "runs 16-bit LSTMs; give --precision=bf16 or fp16, or another algorithm");
      if (q.num_units != 32 && q.num_units != 64 && q.num_units != 128)
        reject("lstm_algorithm", q.lstm_algorithm,
               "takes 32, 64 or 128 hidden units (this run has --num_units=" + std::to_string(q.num_units) +
                   "); give another algorithm");
      if (q.direction == "bi")
        reject("lstm_algorithm", q.lstm_algorithm,
               "runs one direction; give --direction=uni or another algorithm");
    }
  }
}

void resolve_optimizer(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  config->optimizer = flags.was_given("optimizer") ? flags.text("optimizer") : model.defaults.optimizer;
  require_one_of("optimizer", config->optimizer, {"sgd", "momentum", "adam", "adamw"}, "optimizer");

  config->learning_rate = model.defaults.learning_rate;
  if (flags.was_given("learning_rate")) {
    const std::string text = flags.text("learning_rate");
    config->learning_rate = parse_finite_number("learning_rate", text, "a number > 0, e.g. 0.01");
    if (!(config->learning_rate > 0.0)) reject("learning_rate", text, "must be greater than 0");
    if (config->learning_rate < std::numeric_limits<float>::min())
      reject("learning_rate", text, "too small for the optimizers' float32 arithmetic; accepted: at least 1.2e-38");
  }
  const std::string momentum_text = flags.text("momentum");
  config->momentum = parse_finite_number("momentum", momentum_text, "a number in [0, 1), e.g. 0.9");
  if (config->momentum < 0.0 || config->momentum >= 1.0) {
    reject("momentum", momentum_text, "must be in [0, 1), e.g. 0.9");
  }
  const std::string decay_text = flags.text("weight_decay");
  config->weight_decay = parse_finite_number("weight_decay", decay_text, "a number >= 0, e.g. 0.1");
  if (!(config->weight_decay >= 0.0)) reject("weight_decay", decay_text, "must be at least 0, e.g. 0.1");
  if (config->weight_decay > std::numeric_limits<float>::max())
    reject("weight_decay", decay_text, "too large for the optimizers' float32 arithmetic");
  // Only AdamW reads it; taking it silently elsewhere would let a run claim a decay it never had
  // (tf_cnn_benchmarks' --weight_decay, an L2 loss term, would pass unnoticed too).
  if (flags.was_given("weight_decay") && config->optimizer != "adamw")
    reject("weight_decay", decay_text,
           "is AdamW's decoupled weight decay and this run's optimizer is --optimizer=" + config->optimizer +
               "; give --optimizer=adamw or drop --weight_decay");
  const std::string seed_text = flags.text("seed");
  if (!parse_integer_text(seed_text, &config->seed)) {
    reject("seed", seed_text, "not a non-negative integer; accepted: 0.." + std::to_string(UINT64_MAX));
  }
}

void resolve_measurement(const GivenFlags& flags, RunConfig* config) {
  config->num_batches =
      parse_int_at_least("num_batches", flags.text("num_batches"), 1, "must be at least 1", kMaxSteps);
  config->num_warmup_batches =
      parse_int_at_least("num_warmup_batches", flags.text("num_warmup_batches"), 0, "must be at least 0", kMaxSteps);
  config->display_every =
      parse_int_at_least("display_every", flags.text("display_every"), 1, "must be at least 1");
  config->profile_step = parse_int_at_least("profile_step", flags.text("profile_step"), 0,
                                            "must be at least 0 (0: no profiled step)");
  config->collective_timeout = parse_collective_timeout(flags.text("collective_timeout"));
  config->rendezvous_port = parse_rendezvous_port(flags.text("rendezvous_port"));
  if (flags.was_given("device_memory"))
    config->device_memory = parse_memory_size("device_memory", flags.text("device_memory"));
  const std::string peak_text = flags.text("peak_tflops");
  config->peak_tflops = parse_finite_number("peak_tflops", peak_text, "TFLOP/s, e.g. 989.5");
  if (!(config->peak_tflops >= 0) || config->peak_tflops > kMaxPeakTflops ||
      (config->peak_tflops > 0 && config->peak_tflops < kMinPeakTflops))
    reject("peak_tflops", peak_text, "accepted: 0 (from the table of GPUs) or a figure from 0.001 to 1000000 TFLOP/s");
  if (config->profile_step > config->num_batches) {
    reject("profile_step", flags.text("profile_step"),
           "is past the last measured step; give 1.." + std::to_string(config->num_batches) + " or 0");
  }
}

// The name this rank writes its result to ("{rank}" filled in).
std::string result_path_of_rank(const std::string& path_text, int process_rank) {
  std::string path = path_text;
  if (const size_t placeholder = path.find("{rank}"); placeholder != std::string::npos)
    path.replace(placeholder, 6, std::to_string(process_rank));
  return path;
}

// Checked before the run so that a long benchmark never ends in an unwritable path (see
// check_output_path). Under mpirun each rank checks the name it would write.
void check_result_file(const std::string& path_text, int process_rank) {
  if (path_text.empty()) return;
  const std::string path = result_path_of_rank(path_text, process_rank);
  try {
    check_output_path(path, "--result_file");
  } catch (const ConfigError& error) {
    throw ConfigError(std::string(error.what()) + " (or --result_file= to write none)");
  }
}

// --trace_file, --trace_steps, --nvtx. With --num_epochs the measured steps are known only once
// the data set is read: the window is checked then (run_command.cpp), with the same words.
void resolve_trace(const GivenFlags& flags, RunConfig* config) {
  config->nvtx = parse_bool("nvtx", flags.text("nvtx"));
  config->trace_file = flags.text("trace_file");
  config->trace_steps = flags.text("trace_steps");
  config->trace_format =
      parse_choice("trace_format", flags.text("trace_format"), trace_format_choices(), "trace format");
  if (config->trace_file.empty()) {
    if (!config->trace_steps.empty())
      reject("trace_steps", config->trace_steps, "says which steps --trace_file records; give --trace_file=PATH too");
    if (flags.was_given("trace_format"))
      reject("trace_format", flags.text("trace_format"), "says how --trace_file is written; give --trace_file=PATH too");
    return;
  }
  // By identity, not by name: ./r.json, a link or a hard link to the result file, or stdout twice.
  check_outputs_apart({{"--result_file", result_path_of_rank(config->result_file, config->process_rank)},
                       {"--trace_file", config->trace_file}});
  if (config->data.num_epochs == 0)
    resolve_traced_steps(config->trace_steps, config->num_warmup_batches, config->num_batches);
  check_trace_destination(*config, result_path_of_rank(config->result_file, config->process_rank));
}

}  // namespace

RunConfig resolve_run_config(const GivenFlags& flags, const DeviceInventory& inventory,
                             bool* fell_back_to_reference) {
  RunConfig config;
  config.model = flags.text("model");
  const ModelEntry& model = resolve_model(config.model);
  resolve_numerics(flags, model, &config);
  resolve_sequence(flags, model, &config);
  if (config.recomputes_blocks()) {
    const std::string why = why_blocks_are_not_recomputed(model, config.sequence);
    if (!why.empty()) reject("activation_checkpointing", config.activation_checkpointing, why);
  }
  resolve_devices(flags, inventory, &config, fell_back_to_reference);
  resolve_batch(flags, model, &config);
  resolve_strategy(flags, &config);
  resolve_exchange(flags, model, &config);
  resolve_optimizer(flags, model, &config);
  resolve_measurement(flags, &config);
  resolve_data(flags, &config);
  config.result_file = flags.text("result_file");
  check_result_file(config.result_file, config.process_rank);
  resolve_trace(flags, &config);
  return config;
}

}  // namespace dpbench
