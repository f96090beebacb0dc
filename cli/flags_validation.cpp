// Checking and resolving the run flags: every bad value or combination becomes one ConfigError line
// of the form "--flag=value: what is wrong; what is accepted", and defaults that depend on other
// flags (the model's batch size and optimizer, the device list, the backend) are filled in here.
#include "cli/flags_validation.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "engine/errors.h"
#include "models/model_registry.h"
#include "strategies/all_reduce_spec.h"
#include "strategies/strategy_registry.h"

namespace dpbench {
namespace {

[[noreturn]] void reject(const std::string& flag, const std::string& value, const std::string& why) {
  throw ConfigError("--" + flag + "=" + value + ": " + why);
}

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string joined;
  for (const auto& item : items) {
    if (!joined.empty()) joined += separator;
    joined += item;
  }
  return joined;
}

// "trivial (planned: resnet50, ...)" or, with only_implemented, "trivial": both registries list
// planned entries so that the user learns a name is coming rather than misspelt.
template <typename Entry>
std::string describe_choices(const std::vector<Entry>& registry, bool only_implemented) {
  std::vector<std::string> implemented, planned;
  for (const auto& entry : registry) (entry.implemented ? implemented : planned).push_back(entry.name);
  std::string text = implemented.empty() ? std::string("none yet") : join(implemented);
  if (!only_implemented && !planned.empty()) text += " (planned: " + join(planned) + ")";
  return text;
}

// from_chars rather than stoi: no leading blanks, no trailing junk, no silent wrap-around.
template <typename Integer>
bool parse_integer_text(const std::string& text, Integer* value) {
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, *value);
  return error == std::errc() && stop == end && !text.empty();
}

int parse_int_at_least(const std::string& flag, const std::string& text, int minimum,
                       const std::string& requirement) {
  long long value = 0;
  if (!parse_integer_text(text, &value)) {
    reject(flag, text, "not an integer; accepted: an integer >= " + std::to_string(minimum));
  }
  if (value < minimum) reject(flag, text, requirement);
  if (value > INT_MAX) reject(flag, text, "too large; accepted: up to " + std::to_string(INT_MAX));
  return static_cast<int>(value);
}

int parse_positive_int(const std::string& flag, const std::string& text) {
  return parse_int_at_least(flag, text, 1, "must be a positive integer");
}

double parse_finite_number(const std::string& flag, const std::string& text, const std::string& accepted) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) {
    reject(flag, text, "not a number; accepted: " + accepted);
  }
  errno = 0;
  char* stop = nullptr;
  double value = std::strtod(text.c_str(), &stop);
  if (stop != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value)) {
    reject(flag, text, "not a number; accepted: " + accepted);
  }
  return value;
}

// absl/gflags, which tf_cnn_benchmarks used, accept these spellings too.
bool parse_bool(const std::string& flag, const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "t" || lower == "y") return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "f" || lower == "n") return false;
  reject(flag, text, "not a boolean; accepted: true, false");
}

void require_one_of(const std::string& flag, const std::string& value,
                    const std::vector<std::string>& accepted, const std::string& what) {
  if (std::find(accepted.begin(), accepted.end(), value) == accepted.end()) {
    reject(flag, value, "unknown " + what + "; accepted: " + join(accepted));
  }
}

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
    for (int index = 0; index < num_gpus; ++index) config->gpu_indices.push_back(index);
  }
  config->num_gpus = config->num_devices();
}

// Weak scaling (--batch_size per device) or strong scaling (--total_batch_size over all devices).
void resolve_batch(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  const int devices = config->num_devices();
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
  if (!batch_given && !total_given) batch = model.defaults.batch_size;
  if (static_cast<long long>(batch) * devices > INT_MAX) {
    reject("batch_size", std::to_string(batch),
           "too large: the global batch over " + std::to_string(devices) + " devices exceeds " +
               std::to_string(INT_MAX));
  }
  config->batch_size = batch;
  config->total_batch_size = total;
}

void resolve_strategy(const GivenFlags& flags, RunConfig* config) {
  config->independent_replica = parse_bool("independent_replica", flags.text("independent_replica"));
  config->cuda_graph = parse_bool("cuda_graph", flags.text("cuda_graph"));
  std::string strategy = flags.text("variable_update");
  const StrategyEntry* entry = find_strategy(strategy);
  if (entry == nullptr) {
    reject("variable_update", strategy,
           "unknown strategy; accepted: " + describe_choices(strategy_registry(), false));
  }
  // The seeds spell the no-exchange baseline this way (tf_cnn_benchmarks had no "independent").
  if (config->independent_replica && strategy == "replicated") strategy = "independent";
  if (config->independent_replica && strategy != "independent") {
    reject("independent_replica", flags.text("independent_replica"),
           "only meaningful with --variable_update=replicated (which it turns into independent); "
           "got --variable_update=" + strategy);
  }
  entry = find_strategy(strategy);
  if (entry == nullptr || !entry->implemented) {
    reject("variable_update", strategy,
           "not implemented yet; accepted now: " + describe_choices(strategy_registry(), true) +
               " (or the seeds' spelling --variable_update=replicated --independent_replica=true)");
  }
  config->variable_update = strategy;
}

// The strategy as the command line asked for it, naming the seeds' spelling where that was used.
std::string asked_strategy(const RunConfig& config) {
  if (config.variable_update == "independent" && config.independent_replica)
    return "--variable_update=replicated --independent_replica=true (independent)";
  return "--variable_update=" + config.variable_update;
}

// The models with embedding tables are those that take --embedding_dim (nmt, rnnlm).
std::vector<std::string> models_with_embeddings() {
  std::vector<std::string> names;
  for (const ModelEntry& entry : model_registry())
    for (const auto& flag : entry.sequence_flags)
      if (flag.first == "embedding_dim") names.push_back(entry.name);
  return names;
}

// Megabytes beyond this are a typo, and their byte count would not fit the exchange planner.
constexpr double kMaxBucketCapMb = 1 << 20;  // 1 TiB

// The flags that shape how gradients are exchanged, each parsed and range-checked.
void parse_exchange_flags(const GivenFlags& flags, RunConfig* config) {
  config->gradient_repacking = parse_int_at_least("gradient_repacking", flags.text("gradient_repacking"), 0,
                                                  "must be at least 0 (0: off)");
  const std::string cap_text = flags.text("bucket_cap_mb");
  config->bucket_cap_mb = parse_finite_number("bucket_cap_mb", cap_text, "a number of MB >= 0, e.g. 25");
  if (config->bucket_cap_mb < 0)
    reject("bucket_cap_mb", cap_text, "must be at least 0 (0: one exchange per tensor)");
  if (config->bucket_cap_mb > kMaxBucketCapMb)
    reject("bucket_cap_mb", cap_text, "too large; accepted: up to 1048576 (1 TiB)");
  const std::string bytes_text = flags.text("agg_small_grads_max_bytes");
  long long bytes = 0;
  if (!parse_integer_text(bytes_text, &bytes))
    reject("agg_small_grads_max_bytes", bytes_text,
           "not an integer; accepted: a number of bytes >= 0 (0: off)");
  if (bytes < 0) reject("agg_small_grads_max_bytes", bytes_text, "must be at least 0 (0: off)");
  config->agg_small_grads_max_bytes = bytes;
  config->agg_small_grads_max_group = parse_int_at_least(
      "agg_small_grads_max_group", flags.text("agg_small_grads_max_group"), 1, "must be at least 1");
  config->overlap_comm = parse_bool("overlap_comm", flags.text("overlap_comm"));
  config->sparse_embedding_grads =
      parse_bool("sparse_embedding_grads", flags.text("sparse_embedding_grads"));
  const std::string compact = flags.text("compact_gradient_transfer");
  require_one_of("compact_gradient_transfer", compact, {"none", "fp16", "bf16"}, "transfer type");
  config->compact_gradient_transfer = compact == "none" ? "" : compact;
}

// --all_reduce_spec, --local_parameter_device and the exchange flags: each only with the strategies
// that use it, and only in combinations that say one thing.
void resolve_exchange(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  const std::string& strategy = config->variable_update;
  const bool replicated = strategy == "replicated";
  auto only_with = [&](const std::string& flag, const std::string& needed, const std::string& what) {
    reject(flag, flags.text(flag),
           "only --variable_update=" + needed + " " + what + ", and this run is " + asked_strategy(*config) +
               "; drop --" + flag + " or use --variable_update=" + needed);
  };

  // An empty --all_reduce_spec= means the default, as tf_cnn_benchmarks' unset spec did.
  const std::string spec_text = flags.text("all_reduce_spec");
  const AllReduceSpec spec = spec_text.empty() ? AllReduceSpec{} : parse_all_reduce_spec(spec_text);
  if (!spec_text.empty() && !replicated) only_with("all_reduce_spec", "replicated", "takes an all-reduce spec");
  config->all_reduce_spec = replicated ? spec.text() : "";

  config->local_parameter_device = flags.text("local_parameter_device");
  require_one_of("local_parameter_device", config->local_parameter_device, {"gpu", "cpu"}, "device");
  if (flags.was_given("local_parameter_device") && strategy != "parameter_server")
    only_with("local_parameter_device", "parameter_server", "keeps a master copy");

  parse_exchange_flags(flags, config);
  if (strategy == "independent") {
    for (const char* flag : {"gradient_repacking", "bucket_cap_mb", "agg_small_grads_max_bytes",
                             "agg_small_grads_max_group", "overlap_comm", "sparse_embedding_grads",
                             "compact_gradient_transfer"})
      if (flags.was_given(flag))
        reject(flag, flags.text(flag),
               asked_strategy(*config) + " exchanges no gradients; drop --" + flag +
                   ", or use --variable_update=replicated or parameter_server");
  }

  auto given = [&](const char* flag) { return "--" + std::string(flag) + "=" + flags.text(flag); };
  if (config->gradient_repacking > 0 && flags.was_given("bucket_cap_mb"))
    throw ConfigError(given("gradient_repacking") + " with " + given("bucket_cap_mb") +
                      ": choose one way to cut the gradients, N equal pieces or buckets in backward "
                      "order; drop one of the two flags");
  if (config->gradient_repacking > 0 && config->agg_small_grads_max_bytes > 0)
    throw ConfigError(given("gradient_repacking") + " with " + given("agg_small_grads_max_bytes") +
                      ": choose one way to cut the gradients, N equal pieces or one exchange per tensor "
                      "(small ones batched); drop one of the two flags");
  if (config->agg_small_grads_max_bytes > 0) {
    if (flags.was_given("bucket_cap_mb") && config->bucket_cap_mb > 0)
      throw ConfigError(given("agg_small_grads_max_bytes") + " with " + given("bucket_cap_mb") +
                        ": small tensors are batched only when every tensor is exchanged on its own; "
                        "use --bucket_cap_mb=0 (or leave it out)");
    config->bucket_cap_mb = 0;  // batching small tensors means the per-tensor mode
  }
  if (flags.was_given("agg_small_grads_max_group") && config->agg_small_grads_max_bytes == 0)
    reject("agg_small_grads_max_group", flags.text("agg_small_grads_max_group"),
           "only matters with --agg_small_grads_max_bytes greater than 0; give that too, or drop this");

  if (!config->compact_gradient_transfer.empty()) {
    if (!replicated) only_with("compact_gradient_transfer", "replicated", "sends gradients at half width");
    if (spec.algorithm == "xring")
      throw ConfigError(given("compact_gradient_transfer") + " with " + given("all_reduce_spec") +
                        ": a ring forwards partial sums, which would be rounded to half width at every "
                        "hop; use --all_reduce_spec=nccl, psgpu or pscpu");
  }
  if (config->sparse_embedding_grads) {
    const std::vector<std::string> takers = models_with_embeddings();
    if (std::find(takers.begin(), takers.end(), model.name) == takers.end())
      reject("sparse_embedding_grads", flags.text("sparse_embedding_grads"),
             "--model=" + model.name + " has no embedding tables (only " + join(takers, " and ") +
                 " have); drop --sparse_embedding_grads");
    if (!replicated) only_with("sparse_embedding_grads", "replicated", "gathers sparse embedding gradients");
  }

  if (strategy == "parameter_server" && config->precision == "fp16" && config->fp16_enable_auto_loss_scale)
    throw ConfigError(given("fp16_enable_auto_loss_scale") + " with --variable_update=parameter_server: each "
                      "owner would decide alone whether to skip a step, so the replicas would diverge; "
                      "use a fixed --fp16_loss_scale, or --variable_update=replicated");
}

void resolve_numerics(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  config->data_format = flags.text("data_format");
  require_one_of("data_format", config->data_format, {"NCHW", "NHWC"}, "data format");
  config->cudnn_benchmark = parse_bool("cudnn_benchmark", flags.text("cudnn_benchmark"));
  config->precision = flags.text("precision");
  require_one_of("precision", config->precision, {"fp32", "tf32", "fp16", "bf16"}, "precision");
  config->use_fp16 = parse_bool("use_fp16", flags.text("use_fp16"));
  if (config->use_fp16) {
    if (flags.was_given("precision") && config->precision != "fp16")
      reject("use_fp16", flags.text("use_fp16"),
             "contradicts --precision=" + config->precision + " (--use_fp16 means --precision=fp16); give one of them");
    config->precision = "fp16";
  }
  if (config->activation_type() != DataType::f32 && !model.mixed_precision)
    reject("precision", config->precision,
           "--model=" + model.name + " computes in fp32 only; use fp32 or tf32, or a CNN model");

  const bool fp16 = config->precision == "fp16";
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
                         "must be at least 1");
  for (const char* flag : {"fp16_loss_scale", "fp16_enable_auto_loss_scale", "fp16_inc_loss_scale_every_n"})
    if (flags.was_given(flag) && !fp16)
      reject(flag, flags.text(flag),
             "loss scaling is for --precision=fp16 only (this run is " + config->precision + ")");
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
  auto integer = [&](const char* name, int* field, int minimum) {
    if (values.count(name) == 0) return;
    *field = parse_int_at_least(name, values[name], minimum,
                                minimum == 0 ? "must be at least 0" : "must be a positive integer");
  };
  if (values.count("encoder_type")) {
    q.encoder_type = values["encoder_type"];
    require_one_of("encoder_type", q.encoder_type, {"cudnn_lstm", "dynamic", "uni", "bi"},
                   "LSTM implementation");
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
  integer("src_vocab_size", &q.src_vocab_size, 1);
  integer("tgt_vocab_size", &q.tgt_vocab_size, 1);
  integer("vocab_size", &q.vocab_size, 1);
  integer("embedding_dim", &q.embedding_dim, 1);
  integer("num_units", &q.num_units, 1);
  integer("num_encoder_layers", &q.num_encoder_layers, 1);
  integer("num_decoder_layers", &q.num_decoder_layers, 1);
  integer("num_layers", &q.num_layers, 1);
  integer("src_max_len", &q.src_max_len, 1);
  integer("tgt_max_len", &q.tgt_max_len, 1);
  integer("seq_len", &q.seq_len, 1);
  integer("loss_chunk_rows", &q.loss_chunk_rows, 0);
}

void resolve_optimizer(const GivenFlags& flags, const ModelEntry& model, RunConfig* config) {
  config->optimizer = flags.was_given("optimizer") ? flags.text("optimizer") : model.defaults.optimizer;
  require_one_of("optimizer", config->optimizer, {"sgd", "momentum", "adam"}, "optimizer");

  config->learning_rate = model.defaults.learning_rate;
  if (flags.was_given("learning_rate")) {
    const std::string text = flags.text("learning_rate");
    config->learning_rate = parse_finite_number("learning_rate", text, "a number > 0, e.g. 0.01");
    if (!(config->learning_rate > 0.0)) reject("learning_rate", text, "must be greater than 0");
  }
  const std::string momentum_text = flags.text("momentum");
  config->momentum = parse_finite_number("momentum", momentum_text, "a number in [0, 1), e.g. 0.9");
  if (config->momentum < 0.0 || config->momentum >= 1.0) {
    reject("momentum", momentum_text, "must be in [0, 1), e.g. 0.9");
  }
  const std::string seed_text = flags.text("seed");
  if (!parse_integer_text(seed_text, &config->seed)) {
    reject("seed", seed_text, "not a non-negative integer; accepted: 0.." + std::to_string(UINT64_MAX));
  }
}

void resolve_measurement(const GivenFlags& flags, RunConfig* config) {
  config->num_batches = parse_int_at_least("num_batches", flags.text("num_batches"), 1, "must be at least 1");
  config->num_warmup_batches =
      parse_int_at_least("num_warmup_batches", flags.text("num_warmup_batches"), 0, "must be at least 0");
  config->display_every =
      parse_int_at_least("display_every", flags.text("display_every"), 1, "must be at least 1");
  config->profile_step = parse_int_at_least("profile_step", flags.text("profile_step"), 0,
                                            "must be at least 0 (0: no profiled step)");
  if (config->profile_step > config->num_batches) {
    reject("profile_step", flags.text("profile_step"),
           "is past the last measured step; give 1.." + std::to_string(config->num_batches) + " or 0");
  }
}

// Checked before the run so that a long benchmark never ends in an unwritable path. Only the
// directory must be writable: results are written to a temporary file there and renamed.
void check_result_file(const std::string& path_text) {
  if (path_text.empty()) return;
  namespace fs = std::filesystem;
  const std::string remedy = "; give a path in an existing writable directory, or --result_file= to write none";
  std::error_code ignored;
  const fs::path path(path_text);
  if (fs::is_directory(path, ignored)) {
    reject("result_file", path_text, "is a directory; give a file path, or --result_file= to write none");
  }
  fs::path directory = path.parent_path();
  if (directory.empty()) directory = ".";
  if (!fs::exists(directory, ignored)) {
    reject("result_file", path_text, "directory " + directory.string() + " does not exist" + remedy);
  }
  if (!fs::is_directory(directory, ignored)) {
    reject("result_file", path_text, directory.string() + " is not a directory" + remedy);
  }
  if (::access(directory.c_str(), W_OK) != 0) {
    reject("result_file", path_text, "directory " + directory.string() + " is not writable" + remedy);
  }
}

}  // namespace

RunConfig resolve_run_config(const GivenFlags& flags, const DeviceInventory& inventory,
                             bool* fell_back_to_reference) {
  RunConfig config;
  config.model = flags.text("model");
  const ModelEntry& model = resolve_model(config.model);
  resolve_numerics(flags, model, &config);
  resolve_sequence(flags, model, &config);
  resolve_devices(flags, inventory, &config, fell_back_to_reference);
  resolve_batch(flags, model, &config);
  resolve_strategy(flags, &config);
  resolve_exchange(flags, model, &config);
  resolve_optimizer(flags, model, &config);
  resolve_measurement(flags, &config);
  config.result_file = flags.text("result_file");
  check_result_file(config.result_file);
  return config;
}

}  // namespace dpbench
