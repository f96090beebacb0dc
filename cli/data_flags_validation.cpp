// Checking the data flags: --data_dir and --data_name (which models read which data set),
// --data_feed and its prefetch options, epochs (--num_epochs, --timed_epochs) and the text data
// sets' file and vocabulary options, each accepted only where it means something.
#include <filesystem>

#include "cli/flag_limits.h"
#include "cli/flag_parsing.h"
#include "cli/flags_validation.h"
#include "engine/machine/file_checks.h"
#include "models/model_registry.h"

namespace dpbench {
namespace {

// The data set a model reads when only --data_dir is given: the first its registry entry lists.
std::string data_set_of(const std::string& model, const std::string& data_dir) {
  const ModelEntry* entry = find_model(model);
  if (entry == nullptr || entry->inputs.data_sets.empty())
    reject("data_dir", data_dir, "--model=" + model + " reads no data set; it trains on synthetic data only");
  return entry->inputs.data_sets.front().data_name;
}

void check_model_reads(const std::string& data_name, const std::string& model) {
  const std::string why_not = why_data_set_cannot_feed(model, data_name);
  if (!why_not.empty()) reject("data_name", data_name, why_not);
}

// "A:B" or "A", 0-based and inclusive, within the run's epochs.
void parse_timed_epochs(const std::string& text, int num_epochs, DataConfig* data) {
  const size_t colon = text.find(':');
  const std::string first = text.substr(0, colon), last = colon == std::string::npos ? first : text.substr(colon + 1);
  int a = 0, b = 0;
  if (!parse_integer_text(first, &a) || !parse_integer_text(last, &b) || a < 0 || b < a || b >= num_epochs)
    reject("timed_epochs", text,
           "expected A:B or A, epochs counted from 0 with A <= B < --num_epochs (" + std::to_string(num_epochs) +
               "), e.g. 1:3 times epochs 1, 2 and 3");
  data->timed_epoch_first = a;
  data->timed_epoch_last = b;
}

// A vocabulary file is optional (without one it is built from the training text), so the data
// reader only looks for a regular file there; a FIFO, folder or broken link in its place would
// be passed over without a word. Here it gets one line naming what is there instead.
void check_vocabulary_files(const DataConfig& data) {
  const std::filesystem::path folder(data.data_dir);
  auto check = [&](const char* flag, const std::string& value, const std::vector<std::string>& candidates) {
    std::string first_problem;
    for (const std::string& candidate : candidates) {
      const PathInfo info = inspect_path(candidate);
      if (info.kind == PathKind::regular_file) return;  // read as the vocabulary (and checked there)
      if (info.kind != PathKind::missing && first_problem.empty())
        first_problem = candidate + " " + why_not_readable_file(candidate);
    }
    if (!first_problem.empty()) reject(flag, value, first_problem + "; expects a vocabulary file, one token per line");
  };
  // --vocab_file as given, else under --data_dir (an absolute name stays itself).
  if (!data.vocab_file.empty())
    check("vocab_file", data.vocab_file, {data.vocab_file, (folder / data.vocab_file).string()});
  if (data.data_name == "parallel_text") {
    for (const std::string* language : {&data.src, &data.tgt})
      check("vocab_prefix", data.vocab_prefix, {(folder / (data.vocab_prefix + "." + *language)).string()});
  }
}

}  // namespace

void resolve_data(const GivenFlags& flags, RunConfig* config) {
  DataConfig& data = config->data;
  data.data_dir = flags.text("data_dir");
  if (!data.data_dir.empty()) {
    const std::string why_not = why_not_folder(data.data_dir);
    if (!why_not.empty())
      reject("data_dir", data.data_dir, "it " + why_not + "; give the folder that holds the data set's files");
  }
  data.data_name = flags.text("data_name");
  if (!data.data_name.empty())
    require_one_of("data_name", data.data_name, kDataSetNames, "data set");
  if (data.data_name.empty() && !data.data_dir.empty()) data.data_name = data_set_of(config->model, data.data_dir);
  if (!data.data_name.empty()) check_model_reads(data.data_name, config->model);
  if (data.data_dir.empty() && (data.data_name == "ptb" || data.data_name == "parallel_text" || data.data_name == "tokens"))
    reject("data_name", data.data_name, "needs --data_dir (only cifar10 has a synthetic stand-in of its shape)");

  const std::string feed = flags.was_given("data_feed") ? flags.text("data_feed")
                                                         : (data.data_dir.empty() ? "on_device" : "host");
  require_one_of("data_feed", feed, {"on_device", "host"}, "feeding");
  data.data_feed = feed;
  data.prefetch_data_to_device = parse_bool("prefetch_data_to_device", flags.text("prefetch_data_to_device"));
  if (flags.was_given("prefetch_data_to_device") && !data.host_feed())
    reject("prefetch_data_to_device", flags.text("prefetch_data_to_device"),
           "applies to --data_feed=host only (on_device data is copied once)");
  data.prefetch_depth = parse_int_at_least("prefetch_depth", flags.text("prefetch_depth"), 1,
                                           "must be at least 1 (2: double-buffering)", kMaxPrefetchDepth);
  data.datasets_num_private_threads =
      parse_int_at_least("datasets_num_private_threads", flags.text("datasets_num_private_threads"), 0,
                         "must be at least 0 (0: automatic)", kMaxLoaderThreads);
  data.shuffle = parse_bool("shuffle", flags.text("shuffle"));

  data.num_epochs = parse_int_at_least("num_epochs", flags.text("num_epochs"), 0,
                                       "must be at least 0 (0: --num_batches)", kMaxEpochs);
  if (data.num_epochs > 0) {
    if (data.data_dir.empty())
      reject("num_epochs", flags.text("num_epochs"), "needs a data set to pass over; give --data_dir");
    if (data.data_name == "tokens")
      reject("num_epochs", flags.text("num_epochs"),
             "does not apply to --data_name=tokens, whose windows are drawn at random every step (as nanoGPT "
             "draws them); give --num_batches");
    for (const char* counted : {"num_batches", "num_warmup_batches"})
      if (flags.was_given(counted))
        reject(counted, flags.text(counted),
               "conflicts with --num_epochs (epochs decide the steps); choose the timed ones with --timed_epochs");
    if (config->profile_step > 0)
      reject("profile_step", flags.text("profile_step"), "is not available with --num_epochs");
    data.timed_epoch_first = 0;
    data.timed_epoch_last = data.num_epochs - 1;
    if (flags.was_given("timed_epochs")) parse_timed_epochs(flags.text("timed_epochs"), data.num_epochs, &data);
  } else if (flags.was_given("timed_epochs")) {
    reject("timed_epochs", flags.text("timed_epochs"), "needs --num_epochs");
  }

  // Options of one data set only.
  auto only_with = [&](const char* flag, const std::string& data_set) {
    if (flags.was_given(flag) && data.data_name != data_set)
      reject(flag, flags.text(flag), "applies to --data_name=" + data_set + " only");
  };
  only_with("vocab_file", "ptb");
  data.vocab_file = flags.text("vocab_file");
  for (const char* flag : {"train_prefix", "vocab_prefix", "src", "tgt", "num_buckets"}) only_with(flag, "parallel_text");
  data.train_prefix = flags.text("train_prefix");
  data.vocab_prefix = flags.text("vocab_prefix");
  data.src = flags.text("src");
  data.tgt = flags.text("tgt");
  for (const char* flag : {"train_prefix", "vocab_prefix", "src", "tgt"})
    if (flags.text(flag).empty()) reject(flag, "", "must not be empty");
  check_vocabulary_files(data);
  data.num_buckets =
      parse_int_at_least("num_buckets", flags.text("num_buckets"), 1, "must be at least 1", kMaxLengthBuckets);
}

}  // namespace dpbench
