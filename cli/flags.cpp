// Reading the `run` command line: the one table of flags (names as tf_cnn_benchmarks spelled
// them, groups, defaults, help), read and laid out for --help by cli/flag_reader.h. Checking the
// values lives in flags_validation.cpp, the resolved config as JSON in run_config_json.cpp.
#include "cli/flags.h"

#include <sstream>

#include "cli/flag_reader.h"
#include "cli/flags_validation.h"
#include "cli/tf_cnn_benchmarks_flags.h"
#include "cli/trace_output.h"
#include "engine/precision.h"
#include "models/model_registry.h"
#include "models/sequence/gpt.h"
#include "strategies/strategy_registry.h"
#include "strategies/synchronisation_options.h"

namespace dpbench {
namespace {

const char* const kGroups[] = {"Model", "Sequence models", "Devices", "Synchronisation", "Optimizer", "Data", "Measurement",
                               "Output", "General"};

std::string format_number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

template <typename Entry>
std::string names_of(const std::vector<Entry>& registry, bool implemented) {
  std::string names;
  for (const auto& entry : registry) {
    if (entry.implemented != implemented) continue;
    names += (names.empty() ? "" : ", ") + entry.name;
  }
  return names.empty() ? "none" : names;
}

// The names of the implemented entries: a row's choices.
template <typename Entry>
std::vector<std::string> implemented_names(const std::vector<Entry>& registry) {
  std::vector<std::string> names;
  for (const auto& entry : registry)
    if (entry.implemented) names.push_back(entry.name);
  return names;
}

std::vector<std::string> strategy_entry_names() {
  std::vector<std::string> names;
  for (const StrategyEntry& entry : strategy_registry()) names.push_back(entry.name);
  return names;
}

std::vector<std::string> gpt_size_names() {
  std::vector<std::string> names;
  for (const GptPreset& preset : gpt_presets()) names.push_back(preset.name);
  return names;
}

std::vector<std::string> precision_names() {
  std::vector<std::string> names;
  for (Precision precision : every_precision()) names.push_back(precision_name(precision));
  return names;
}

// " (planned: a, b)", or nothing when every entry is implemented.
template <typename Entry>
std::string planned_of(const std::vector<Entry>& registry) {
  const std::string planned = names_of(registry, false);
  return planned == "none" ? "" : " (planned: " + planned + ")";
}

// A synchronisation option's help ends with the strategies that take it, from their descriptions.
void say_which_strategies_take(FlagDeclaration& flag) {
  if (find_synchronisation_option(flag.name) == nullptr) return;
  std::string takers;
  for (const StrategyEntry& entry : strategy_registry())
    if (entry.accepts(flag.name)) takers += (takers.empty() ? "" : ", ") + entry.name;
  flag.help += " [" + takers + "]";
}

// " (default: the model's; for trivial: 64)": a default each model sets, shown for the default
// model (`value`: empty where that model is not in the registry).
std::string per_model(const std::string& value) {
  if (value.empty()) return " (default: the model's)";
  return " (default: the model's; for " + RunConfig().model + ": " + value + ")";
}

// The rows of run's flag table, a function per group or two, each default from RunConfig's own
// initialisers or the registries, so --help cannot drift from them.
std::vector<FlagDeclaration> model_flags(const RunConfig& defaults) {
  const ModelEntry* model = find_model(defaults.model);
  const std::string batch = model ? std::to_string(model->defaults.batch_size) : "";
  return {
      {"model", "Model", "NAME",
       "Model to train; accepted now: " + names_of(model_registry(), true) + planned_of(model_registry()),
       defaults.model, FlagKind::value, implemented_names(model_registry())},
      {"batch_size", "Model", "N", "Batch size per device" + per_model(batch), {}},
      {"total_batch_size", "Model", "N",
       "Global batch over all devices, for strong scaling; must divide evenly by the device count "
       "(default: not set; --batch_size per device)",
       {}},
      {"data_format", "Model", "NCHW|NHWC", "Image tensor layout of the CNN models", defaults.data_format},
      {"precision", "Model", "fp32|tf32|fp16|bf16",
       "Arithmetic: fp32; tf32 (tensor cores, fp32 storage); fp16 or bf16 (16-bit activations and "
       "weight copy, fp32 accumulation and master weights; CNN models)",
       precision_name(defaults.precision), FlagKind::value, precision_names()},
      {"use_fp16", "Model", "BOOL", "Alias for --precision=fp16 (tf_cnn_benchmarks' spelling)",
       defaults.use_fp16 ? "true" : "false", FlagKind::boolean},
      {"forward_only", "Model", "BOOL",
       "Inference: forward passes only (batch norm with its running statistics, no dropout), no "
       "backward pass, exchange or update; --variable_update=independent only",
       defaults.forward_only ? "true" : "false", FlagKind::boolean},
      {"fuse_batch_norm_statistics", "Model", "BOOL",
       "CNN training: a batch norm after a convolution takes its statistics from the convolution's "
       "epilogue where cuDNN has a fused kernel that times faster (16-bit NHWC on the GPU; never "
       "with --deterministic; its plans add seconds to the set-up); false: the batch norm's own pass",
       defaults.fuse_batch_norm_statistics ? "true" : "false", FlagKind::boolean},
      {"activation_checkpointing", "Model", "none|blocks",
       "Training: what forward keeps for backward. none: every activation backward reads; blocks: each block's "
       "input and output only, the block's forward run again before its backward into one set of buffers the "
       "blocks share (same bits, less activation memory, more work; gpt's blocks, nmt's Transformer layers, "
       "ResNet's bottlenecks and Inception's modules)",
       defaults.activation_checkpointing, FlagKind::value, kActivationCheckpointingNames},
      {"fp16_loss_scale", "Model", "X",
       "fp16: multiply the loss by X before backward, divide the gradients by X before the update "
       "(default: 128, or 32768 to start --fp16_enable_auto_loss_scale)",
       {}},
      {"fp16_enable_auto_loss_scale", "Model", "BOOL",
       "fp16: adapt the loss scale: halve it and skip the update when a gradient overflows, double "
       "it after --fp16_inc_loss_scale_every_n good steps",
       defaults.fp16_enable_auto_loss_scale ? "true" : "false", FlagKind::boolean},
      {"fp16_inc_loss_scale_every_n", "Model", "N",
       "Good steps before the automatic loss scale doubles",
       std::to_string(defaults.fp16_inc_loss_scale_every_n)},
  };
}

std::vector<FlagDeclaration> sequence_flags() {
  return {
      {"encoder_type", "Sequence models", "NAME",
       "Encoder and decoder of nmt and rnnlm: cudnn_lstm (cuDNN's fused RNN), dynamic (the LSTM "
       "unrolled one time step at a time, as TensorFlow's dynamic_rnn; the seeds' uni and bi mean "
       "dynamic with that --direction) or, for nmt, transformer (Transformer-base) (default: nmt "
       "dynamic, rnnlm cudnn_lstm)",
       {}, FlagKind::value, kEncoderTypeNames},
      {"lstm_algorithm", "Sequence models", "NAME",
       "cudnn_lstm: the fused LSTM's algorithm, fastest (each shape's standard and persistent algorithms "
       "timed once at set-up; standard under --deterministic or --cudnn_benchmark=false), cuDNN's "
       "standard, persist_static or persist_static_small_h, or own_persistent (dpbench's persistent "
       "kernels: fp16/bf16, one direction, 32, 64 or 128 units) (default: fastest)",
       {}, FlagKind::value, kLstmAlgorithmNames},
      {"direction", "Sequence models", "uni|bi",
       "nmt encoder: bi = half the encoder layers read forwards, half backwards (default: bi)", {}},
      {"src_vocab_size", "Sequence models", "N", "nmt source vocabulary (default: 50000)", {}},
      {"tgt_vocab_size", "Sequence models", "N", "nmt target vocabulary (default: 50000)", {}},
      {"vocab_size", "Sequence models", "N", "rnnlm and gpt vocabulary (default: rnnlm 10001, gpt 50304)", {}},
      {"gpt_size", "Sequence models", "NAME",
       "gpt: GPT-2's 124m, 350m, 774m or 1558m (layers/heads/width 12/12/768, 24/16/1024, 36/20/1280, "
       "48/25/1600); --num_layers, --num_heads and --hidden_size override it (default: 124m)",
       {}, FlagKind::value, gpt_size_names()},
      {"hidden_size", "Sequence models", "N", "gpt: model width, divided by --num_heads (default: the --gpt_size's)", {}},
      {"embedding_dim", "Sequence models", "N", "Embedding width (default: nmt 512, rnnlm 32)", {}},
      {"num_units", "Sequence models", "N",
       "LSTM hidden units, or the Transformer's model width (default: nmt 512, rnnlm 128)", {}},
      {"num_encoder_layers", "Sequence models", "N", "nmt encoder layers (default: 4; transformer 6)", {}},
      {"num_decoder_layers", "Sequence models", "N",
       "nmt decoder layers, equal to the encoder's for the LSTMs (default: 4; transformer 6)", {}},
      {"num_heads", "Sequence models", "N",
       "nmt transformer and gpt: attention heads, dividing the width (default: nmt 8, gpt the --gpt_size's)", {}},
      {"ffn_units", "Sequence models", "N", "nmt transformer: feed-forward inner width (default: 2048)", {}},
      {"dropout", "Sequence models", "RATE",
       "nmt transformer and gpt: dropout of attention probabilities, the feed-forward block's activations "
       "(nmt), every sub-layer's output and the embeddings, in [0, 1) (default: nmt 0.1, gpt 0)",
       {}},
      {"num_layers", "Sequence models", "N", "rnnlm LSTM layers, gpt blocks (default: rnnlm 2, gpt the --gpt_size's)", {}},
      {"src_max_len", "Sequence models", "N", "nmt source sentence length in tokens (default: 100)", {}},
      {"tgt_max_len", "Sequence models", "N", "nmt target sentence length in tokens (default: 100)", {}},
      {"seq_len", "Sequence models", "N", "rnnlm and gpt tokens per sample (default: rnnlm 50, gpt 1024)", {}},
      {"loss_chunk_rows", "Sequence models", "N",
       "Tokens whose vocabulary logits are computed at a time (0: as many as fit in 8 GiB; default: gpt 4096, "
       "the others 0)", {}},
  };
}

std::vector<FlagDeclaration> device_and_synchronisation_flags(const RunConfig& defaults) {
  std::vector<FlagDeclaration> flags = {
      {"device", "Devices", "auto|gpu|cpu",
       "Where to run: gpu = CUDA, cpu = the reference backend (host threads stand in for devices), "
       "auto = gpu when one is present, else cpu",
       defaults.device},
      {"num_gpus", "Devices", "N",
       "Number of devices (GPUs, or host stand-ins with --device=cpu, up to " +
           std::to_string(kMaxReferenceDevices) + ")",
       std::to_string(defaults.num_gpus)},
      {"gpu_indices", "Devices", "LIST",
       "Comma-separated device indices, e.g. 0,2; alone it sets the device count (default: "
       "0..num_gpus-1)",
       {}},
      {"device_memory", "Devices", "SIZE",
       "Memory each device may use, e.g. 80GiB: a configuration that needs more is refused at set-up "
       "with what each category needs and the largest batch that fits (default: what the GPU has free "
       "when the run starts, less 1 GiB for the libraries; the reference backend's devices: no limit)",
       {}},

      {"variable_update", "Synchronisation", "NAME",
       "How replicas synchronise: " + strategy_names() + " (`dpbench strategies` describes each and "
           "the options it takes)",
       defaults.variable_update, FlagKind::value, strategy_entry_names()},
      {"independent_replica", "Synchronisation", "BOOL",
       "With --variable_update=replicated: replicas do not exchange gradients (= independent)",
       defaults.independent_replica ? "true" : "false", FlagKind::boolean},
  };
  // Each synchronisation option's row is its record's (strategies/synchronisation_options.cpp).
  for (const SynchronisationOption& option : synchronisation_options())
    flags.push_back({option.flag, "Synchronisation", option.hint(), option.help, option.default_flag_text(),
                     option.is_boolean() ? FlagKind::boolean : FlagKind::value});
  return flags;
}

std::vector<FlagDeclaration> optimizer_and_data_flags(const RunConfig& defaults) {
  const ModelEntry* model = find_model(defaults.model);
  const std::string optimizer = model ? model->defaults.optimizer : "";
  const std::string rate = model ? format_number(model->defaults.learning_rate) : "";
  return {
      {"optimizer", "Optimizer", "sgd|momentum|adam|adamw", "Optimizer" + per_model(optimizer), {}},
      {"learning_rate", "Optimizer", "X", "Learning rate, > 0" + per_model(rate), {}},
      {"momentum", "Optimizer", "X", "Momentum of the momentum optimizer, in [0, 1)",
       format_number(defaults.momentum)},
      {"weight_decay", "Optimizer", "X",
       "Decoupled weight decay of --optimizer=adamw (torch.optim.AdamW's: each step multiplies the "
       "parameters by 1 - learning_rate * X before the Adam step), at least 0; adamw only",
       format_number(defaults.weight_decay)},
      {"seed", "Optimizer", "N", "Seed of the initial parameters and the synthetic data",
       std::to_string(defaults.seed)},

      {"data_dir", "Data", "DIR",
       "Train on the data set in DIR (default: synthetic data made on the device)", {}},
      {"data_name", "Data", "NAME",
       "cifar10 (trivial, cifar10_cnn, the ResNets at 32x32), ptb (rnnlm), parallel_text (nmt) or tokens "
       "(gpt: llm.c's .bin or nanoGPT's train.bin token shards); "
       "default with --data_dir: the model's; cifar10 without --data_dir: synthetic data of its shape",
       {}, FlagKind::value, kDataSetNames},
      {"data_feed", "Data", "on_device|host",
       "on_device: each device's batch is made once and stays in its memory; host: every step's batch "
       "is built on the host and copied in (default: host with --data_dir, else on_device)",
       {}},
      {"prefetch_data_to_device", "Data", "BOOL",
       "host feed: build and copy batches ahead, on the copy stream (false: build, copy, then compute, "
       "one step at a time)",
       defaults.data.prefetch_data_to_device ? "true" : "false", FlagKind::boolean},
      {"prefetch_depth", "Data", "N", "host feed: batches built and copied ahead (2: double-buffering)",
       std::to_string(defaults.data.prefetch_depth)},
      {"datasets_num_private_threads", "Data", "N",
       "host feed: loader threads per device (0: automatic)",
       std::to_string(defaults.data.datasets_num_private_threads)},
      {"num_epochs", "Data", "N",
       "Run N whole passes over the data instead of --num_batches (needs --data_dir)",
       std::to_string(defaults.data.num_epochs)},
      {"timed_epochs", "Data", "A:B",
       "With --num_epochs: time epochs A..B (from 0; e.g. 1:3 of 5); the others run untimed "
       "(default: all)",
       {}},
      {"shuffle", "Data", "BOOL", "Shuffle the examples every epoch, from --seed",
       defaults.data.shuffle ? "true" : "false", FlagKind::boolean},
      {"vocab_file", "Data", "PATH",
       "ptb: vocabulary file, one token per line (default: built from ptb.train.txt)", {}},
      {"train_prefix", "Data", "NAME", "parallel_text: training files DIR/NAME.<src> and DIR/NAME.<tgt>",
       defaults.data.train_prefix},
      {"vocab_prefix", "Data", "NAME",
       "parallel_text: vocabulary files DIR/NAME.<src> and .<tgt> (built from the training text where absent)",
       defaults.data.vocab_prefix},
      {"src", "Data", "EXT", "parallel_text: source language suffix", defaults.data.src},
      {"tgt", "Data", "EXT", "parallel_text: target language suffix", defaults.data.tgt},
      {"num_buckets", "Data", "N", "parallel_text: length buckets of width 10 (TF NMT's bucketing)",
       std::to_string(defaults.data.num_buckets)},
  };
}

std::vector<FlagDeclaration> measurement_and_output_flags(const RunConfig& defaults) {
  return {
      {"num_batches", "Measurement", "N", "Measured steps", std::to_string(defaults.num_batches)},
      {"num_warmup_batches", "Measurement", "N", "Steps run first and excluded from the measurement",
       std::to_string(defaults.num_warmup_batches)},
      {"display_every", "Measurement", "N", "Print a progress line every N steps",
       std::to_string(defaults.display_every)},

      {"cudnn_benchmark", "Measurement", "BOOL",
       "Pick each convolution's cuDNN algorithms by timing them once per shape (false: cuDNN's "
       "heuristics); the choice is cached either way",
       defaults.cudnn_benchmark ? "true" : "false", FlagKind::boolean},
      {"deterministic", "Measurement", "BOOL",
       "Same bits on every run and in every process (e.g. to compare param_norm across "
       "strategies or launches): deterministic cuDNN algorithms by heuristics, no atomics in "
       "the embedding gradient; slower",
       defaults.deterministic ? "true" : "false", FlagKind::boolean},
      {"cuda_graph", "Measurement", "BOOL",
       "Replay each step as one CUDA graph where the strategy and optimizer allow it (one launch "
       "per step; false: launch every kernel from the host)",
       defaults.cuda_graph ? "true" : "false", FlagKind::boolean},
      {"profile_step", "Measurement", "N",
       "Bracket measured step N with cudaProfilerStart/Stop, for `ncu --profile-from-start off` "
       "(0: none); use with --cuda_graph=false to see each kernel",
       std::to_string(defaults.profile_step)},

      {"collective_timeout", "Measurement", "SECONDS",
       "End every rank with one line naming the rank that stopped answering when a collective, a "
       "rendezvous between ranks or a multi-GPU step makes no progress this long",
       format_number(defaults.collective_timeout)},

      {"rendezvous_port", "Measurement", "PORT",
       "Started by torchrun or srun without MPI: the port rank 0 listens on for the other ranks "
       "(0: MASTER_PORT; under srun without it, the first free of a few derived from the job and step ids)",
       std::to_string(defaults.rendezvous_port)},

      {"peak_tflops", "Measurement", "TFLOPS",
       "Peak dense TFLOP/s of one device for the math that runs, the denominator of summary.flops.mfu "
       "(0: from dpbench's table of GPUs: H100, H200, GH200, A100)",
       format_number(defaults.peak_tflops)},

      {"result_file", "Output", "PATH",
       "JSON result file, written atomically (a link is followed; a device, FIFO or - is written through); "
       "--result_file= writes none",
       defaults.result_file},
      {"trace_file", "Output", "PATH",
       "Timeline of a few steps as Chrome Trace Event JSON (open it in ui.perfetto.dev or "
       "chrome://tracing): a process per device, a thread per stream, spans per layer group, "
       "bucket exchange and update (empty: none)",
       defaults.trace_file},
      {"trace_format", "Output", choice_names(trace_format_choices(), "|"),
       "How --trace_file is written: perfetto, one Chrome trace of every device; hta, --trace_file is a "
       "folder of one trace per device (rank<R>.json) as Holistic Trace Analysis reads them, "
       "TraceAnalysis(trace_dir=FOLDER)",
       trace_format_name(defaults.trace_format)},
      {"trace_steps", "Output", "A:B",
       "Steps --trace_file records: measured steps A to B (from 1), or warm-up steps as wK, e.g. "
       "w1:w3 (default: 5 steps from the middle of the measured ones; at most 100)",
       defaults.trace_steps},
      {"nvtx", "Output", "BOOL",
       "NVTX ranges named like the trace's spans, for Nsight Systems (replayed CUDA graphs show them "
       "once, at capture; --cuda_graph=false shows them every step)",
       defaults.nvtx ? "true" : "false", FlagKind::boolean},
      {"version", "General", "", "Print the version and exit", {}, FlagKind::alone},
  };
}

std::vector<FlagDeclaration> run_flag_declarations() {
  const RunConfig defaults;
  std::vector<FlagDeclaration> flags;
  for (const std::vector<FlagDeclaration>& group :
       {model_flags(defaults), sequence_flags(), device_and_synchronisation_flags(defaults),
        optimizer_and_data_flags(defaults), measurement_and_output_flags(defaults)})
    flags.insert(flags.end(), group.begin(), group.end());
  for (FlagDeclaration& flag : flags) say_which_strategies_take(flag);
  return flags;
}

// A tf_cnn_benchmarks command line pasted as it is gets an answer rather than "unknown flag".
std::string tf_cnn_benchmarks_flag_message(const std::string& name) {
  const std::string note = tf_cnn_benchmarks_flag_note(name);
  return note.empty() ? "" : "--" + name + " is a tf_cnn_benchmarks flag dpbench does not have: " + note;
}

}  // namespace

FlagTable run_flag_table() {
  FlagTable table;
  table.flags = run_flag_declarations();
  table.empty_values_refused = false;  // flags_validation.cpp judges every text, the empty one too
  table.note_on_missing_flag = tf_cnn_benchmarks_flag_message;
  return table;
}

ParsedRunFlags parse_run_flags(const std::vector<std::string>& args, const DeviceInventory& inventory) {
  const FlagTable table = run_flag_table();
  const ReadFlags read = read_flags(table, args);

  ParsedRunFlags parsed;
  parsed.help = read.help();
  parsed.version = read.given("version");
  if (parsed.help || parsed.version) return parsed;
  GivenFlags flags;
  for (const FlagDeclaration& flag : table.flags) {
    if (read.given(flag.name)) flags.given.insert(flag.name);
    if (read.given(flag.name) || flag.default_text) flags.texts[flag.name] = read.text(flag.name);
  }
  parsed.config = resolve_run_config(flags, inventory, &parsed.fell_back_to_reference);
  const RunConfig& config = parsed.config;
  if (config.data.num_epochs == 0 && config.num_warmup_batches > config.num_batches)
    parsed.notes.push_back("--num_warmup_batches=" + std::to_string(config.num_warmup_batches) + " is more than " +
                           "--num_batches=" + std::to_string(config.num_batches) +
                           ": the warm-up runs longer than the measurement");
  return parsed;
}

std::string run_help_text() {
  return "dpbench: data-parallel training benchmark (successor of tf_cnn_benchmarks).\n"
         "`dpbench report PATH...` turns result files and folders into speedup tables and plots\n"
         "(dpbench report --help); `dpbench compare BASE NEW` tells which series got faster or slower\n"
         "between two sets of results, and can gate CI on it (dpbench compare --help); `dpbench predict\n"
         "BASE --system FILE` predicts each strategy's scaling from a 1-GPU run (dpbench predict --help);\n"
         "`dpbench comm_bench` measures the collectives alone, in the style of nccl-tests (dpbench\n"
         "comm_bench --help); `dpbench strategies` lists the strategies and the options each takes.\n\n"
         "Usage:\n"
         "  dpbench [run] [flags]  |  dpbench report PATH... [flags]  |  dpbench compare BASE NEW [flags]\n"
         "  dpbench predict BASE --system FILE [flags]  |  dpbench comm_bench [flags]  |  dpbench strategies\n"
         "  dpbench completion bash|zsh   (the shell completion script)\n" +
         flag_table_help(run_flag_table(), std::vector<std::string>(std::begin(kGroups), std::end(kGroups))) +
         "\nExample: dpbench --model=trivial --num_gpus=4 --variable_update=independent\n";
}

}  // namespace dpbench
