// Console formatting for runs (see console.h).
#include "cli/console.h"

#include "engine/machine/gpu_telemetry.h"
#include "engine/precision.h"
#include "models/model_registry.h"

#include "strategies/strategy_registry.h"
#include "strategies/synchronisation_options.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "reports/memory_summary.h"
#include "reports/reference_results.h"
#include "reports/statistics.h"
#include "dpbench_version.h"

namespace dpbench {
namespace {

// "1 device", "4 devices".
std::string counted(int64_t count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string join_indices(const std::vector<int>& indices) {
  std::string text;
  for (size_t i = 0; i < indices.size(); ++i) text += (i ? "," : "") + std::to_string(indices[i]);
  return text;
}

std::vector<double> per_step_rates(const std::vector<double>& step_ms, int64_t items_per_step) {
  std::vector<double> rates;
  rates.reserve(step_ms.size());
  for (double ms : step_ms) rates.push_back(ms > 0 ? items_per_step / (ms / 1000.0) : 0.0);
  return rates;
}

// "replicated (all-reduce nccl, buckets of 25 MB, overlapped)": how the gradients travel, in the
// words of the strategy's description, with the process count of an mpirun job.
std::string describe_strategy(const RunConfig& c) {
  OptionTexts options;
  if (const StrategyEntry* entry = find_strategy(c.variable_update))
    for (const std::string& flag : entry->options)
      options[flag] = option_text(find_synchronisation_option(flag)->recorded(c));
  std::string text = strategy_label(c.variable_update, options, true);
  if (c.num_processes <= 1) return text;
  const std::string processes = std::to_string(c.num_processes) + " processes";
  const size_t open = text.find(" (");
  return open == std::string::npos ? text + " (" + processes + ")"
                                   : text.insert(open + 2, processes + ", ");
}

}  // namespace

std::string format_run_header(const RunConfig& config, const std::string& unit,
                              int64_t num_parameters, const std::vector<DeviceDescription>& devices) {
  std::string text = fmt::format("dpbench {} (git {})\n", DPBENCH_VERSION, DPBENCH_GIT_SHA);
  text += fmt::format("{:<14}{} ({} parameters)\n", "Model:", config.model, num_parameters);
  const std::string device_name = devices.empty() ? "?" : devices.front().name;
  text += fmt::format("{:<14}{}: {} x {} (indices {})\n", "Devices:", backend_name(config.backend),
                      devices.size(), device_name, join_indices(config.gpu_indices));
  text += fmt::format("{:<14}{} per device, {} global ({})\n", "Batch size:", config.batch_size,
                      config.global_batch_size(),
                      config.total_batch_size > 0 ? "strong scaling: fixed total" : "weak scaling: fixed per device");
  text += fmt::format("{:<14}{}\n", "Strategy:", describe_strategy(config));
  text += fmt::format("{:<14}{}, learning rate {}{}{}\n", "Optimizer:", config.optimizer, config.learning_rate,
                      config.optimizer == "momentum" ? fmt::format(", momentum {}", config.momentum) : "",
                      config.optimizer == "adamw" ? fmt::format(", weight decay {}", config.weight_decay) : "");
  const SequenceConfig& q = config.sequence;
  if (config.model == "nmt" && q.encoder_type == "transformer") {
    text += fmt::format("{:<14}transformer, {} + {} layers of width {} ({} heads, feed-forward {}), dropout {}, "
                        "vocab {}/{}, length {}/{}\n",
                        "Network:", q.num_encoder_layers, q.num_decoder_layers, q.num_units, q.num_heads,
                        q.ffn_units, q.dropout, q.src_vocab_size, q.tgt_vocab_size, q.src_max_len, q.tgt_max_len);
  } else if (config.model == "nmt") {
    text += fmt::format("{:<14}{} {}, {} + {} layers of {} units, embedding {}, vocab {}/{}, length {}/{}\n",
                        "Network:", q.encoder_type, q.direction, q.num_encoder_layers, q.num_decoder_layers,
                        q.num_units, q.embedding_dim, q.src_vocab_size, q.tgt_vocab_size, q.src_max_len,
                        q.tgt_max_len);
  } else if (config.model == "gpt") {
    text += fmt::format("{:<14}GPT-2 {}: {} blocks of width {} ({} heads), vocab {}, length {}, dropout {}\n",
                        "Network:", q.gpt_size, q.num_layers, q.hidden_size, q.num_heads, q.vocab_size, q.seq_len,
                        q.dropout);
  } else if (config.model == "rnnlm") {
    text += fmt::format("{:<14}{}, {} layers of {} units, embedding {}, vocab {}, length {}\n", "Network:",
                        q.encoder_type, q.num_layers, q.num_units, q.embedding_dim, q.vocab_size, q.seq_len);
  }
  const ModelEntry* model = find_model(config.model);
  const bool images = model != nullptr && model->sequence_flags.empty();
  text += images ? fmt::format("{:<14}{} / {}\n", "Precision:", precision_name(config.precision), config.data_format)
                 : fmt::format("{:<14}{}\n", "Precision:", precision_name(config.precision));
  if (config.forward_only) text += fmt::format("{:<14}{}\n", "Mode:", "inference: forward passes only (--forward_only)");
  if (config.recomputes_blocks())
    text += fmt::format("{:<14}{}\n", "Activations:",
                        "each block's input and output kept, the block recomputed in backward "
                        "(--activation_checkpointing=blocks)");
  text += fmt::format("{:<14}{} warm-up + {} measured, progress every {}\n", "Steps:",
                      config.num_warmup_batches, config.num_batches, config.display_every);
  text += fmt::format("{:<14}{}/s, seed {}\n", "Unit:", unit, config.seed);
  text += fmt::format("{:<14}{}\n", "Result file:", config.result_file.empty() ? "(none)" : config.result_file);
  return text;
}

std::string format_progress_line(const ProgressSnapshot& snapshot, int64_t items_per_step,
                                 const std::string& unit) {
  const std::vector<double> rates = per_step_rates(snapshot.measured_step_ms, items_per_step);
  double mean = 0;
  for (double rate : rates) mean += rate;
  mean /= rates.empty() ? 1.0 : static_cast<double>(rates.size());
  const double uncertainty = speed_uncertainty(rates);
  // Jitter needs a median (a sort): over the most recent steps only, so that a long run with
  // frequent progress lines does not make the printing thread fall behind.
  constexpr size_t kJitterWindow = 1000;
  const std::vector<double> recent(rates.end() - std::min(rates.size(), kJitterWindow), rates.end());
  const double spread = recent.size() >= 2 ? jitter(recent) : 0.0;
  // One step has no spread to speak of: the rate alone, not "+/- 0.0 (jitter = 0.0)".
  if (rates.size() < 2)
    return fmt::format("{:>6}  {}/s: {:.1f}  loss {:.4f}", snapshot.measured_step, unit, mean, snapshot.loss);
  return fmt::format("{:>6}  {}/s: {:.1f} +/- {:.1f} (jitter = {:.1f})  loss {:.4f}", snapshot.measured_step,
                     unit, mean, uncertainty, spread, snapshot.loss);
}

namespace {

// "123.4 TFLOP/s per device (3.16e+12 FLOPs per device step), MFU 12.5% of 989.5"; without a peak,
// "MFU: none (the reason)".
std::string describe_flops(const nlohmann::json& flops) {
  std::string text = fmt::format("{:.4g} TFLOP/s per device ({:.3g} FLOPs per device step)",
                                 flops.value("tflops_per_sec_per_device", 0.0),
                                 flops.value("model_flops_per_step_per_device", 0.0));
  const auto mfu = flops.find("mfu");
  if (mfu != flops.end() && mfu->is_number()) {
    // Above 1 only where the kernels did fewer multiplications than the direct method counted.
    const char* above_peak = mfu->get<double>() > 1.0 ? " (above the peak: the count is the direct method's; "
                                                          "Winograd or FFT convolutions do fewer multiplications)"
                                                        : "";
    return text + fmt::format(", MFU {:.1f}% of {:g}{}", 100.0 * mfu->get<double>(),
                              flops.value("peak_tflops_per_device", 0.0), above_peak);
  }
  return text + ", MFU: none (" + flops.value("mfu_reason", std::string("no peak")) + ")";
}

// "forward 5.10 ms, backward 10.20 (recompute 2.80), ... (per step, mean over devices)": the
// parts that are there, and the recomputed blocks' share of backward where there is one.
std::string describe_breakdown(const nlohmann::json& breakdown) {
  const nlohmann::json& per_step = breakdown["ms_per_step"];
  const double recompute = breakdown.value("recompute_in_backward_ms", 0.0);
  const std::pair<const char*, const char*> parts[] = {
      {"data_wait_ms", "data wait"},       {"forward_ms", "forward"},        {"backward_ms", "backward"},
      {"exposed_comm_ms", "exposed comm"}, {"update_ms", "update"},         {"straggler_wait_ms", "straggler wait"},
      {"host_gap_ms", "host gaps"}};
  std::string text;
  for (const auto& [key, words] : parts) {
    const double ms = per_step.value(key, 0.0);
    if (ms < 0.0005 && std::string(key) != "forward_ms") continue;  // what is not there
    text += fmt::format("{}{} {:.3f}{}", text.empty() ? "" : ", ", words, ms, text.empty() ? " ms" : "");
    if (std::string(key) == "backward_ms" && recompute > 0) text += fmt::format(" (recompute {:.3f})", recompute);
  }
  return text + " (per step, mean over devices)";
}

// " (forward: implicit_precomp_gemm 2, winograd_nonfused 6; backward filter: algo_1 9)": which
// algorithms the classic API's passes run, from math_paths.convolutions.classic_algorithms; empty
// where the result has none (results written before it was recorded).
std::string describe_classic_algorithms(const nlohmann::json& convolutions) {
  if (!convolutions.contains("classic_algorithms")) return "";
  static const std::pair<const char*, const char*> kPasses[] = {
      {"forward", "forward"}, {"backward_data", "backward data"}, {"backward_filter", "backward filter"}};
  std::string passes;
  for (const auto& [pass, label] : kPasses) {
    const nlohmann::json& algorithms = convolutions["classic_algorithms"].value(pass, nlohmann::json::object());
    if (algorithms.empty()) continue;
    std::string names;
    for (const auto& [name, count] : algorithms.items())
      names += fmt::format("{}{} {}", names.empty() ? "" : ", ", name, count.get<int>());
    passes += fmt::format("{}{}: {}", passes.empty() ? "" : "; ", label, names);
  }
  return passes.empty() ? "" : " (" + passes + ")";
}

// "; convolutions (13 shapes): 13 fused bias + ReLU, graph API forward 2, ...", the LSTMs' cuDNN
// algorithms and the attention's paths, from summary.math_paths; empty where the result has none.
std::string describe_math_paths(const nlohmann::json& paths) {
  std::string text;
  if (paths.contains("convolutions") && paths["convolutions"].value("shapes", 0) > 0) {
    const nlohmann::json& c = paths["convolutions"];
    text += fmt::format("; convolutions ({}): fused bias + ReLU {}, batch norm's statistics fused {}, graph API "
                        "forward {}, backward data {} (accumulating {}), backward filter {}, the rest cuDNN's "
                        "classic API",
                        counted(c.value("shapes", 0), "shape"), c.value("fused_bias_relu", 0),
                        c.value("fused_batch_norm_statistics", 0), c.value("graph_api_forward", 0),
                        c.value("graph_api_backward_data", 0), c.value("graph_api_backward_data_accumulating", 0),
                        c.value("graph_api_backward_filter", 0));
    text += describe_classic_algorithms(c);
  }
  if (paths.contains("pooling") && paths["pooling"].value("shapes", 0) > 0) {
    const nlohmann::json& p = paths["pooling"];
    text += fmt::format("; pooling ({}) on dpbench's kernels: forward {}, backward {} (two-pass {}), "
                        "the rest cuDNN's",
                        counted(p.value("shapes", 0), "shape"), p.value("own_forward", 0),
                        p.value("own_backward", 0), p.value("two_pass_backward", 0));
  }
  if (paths.contains("lstm") && paths["lstm"].value("shapes", 0) > 0) {
    std::string algorithms;
    for (const auto& [name, count] : paths["lstm"]["algorithms"].items())
      algorithms += fmt::format("{}{} {}", algorithms.empty() ? "" : ", ", name, count.get<int>());
    text += fmt::format("; cuDNN LSTM ({}): {}", counted(paths["lstm"].value("shapes", 0), "shape"), algorithms);
  }
  if (paths.contains("attention") && paths["attention"].value("shapes", 0) > 0) {
    const nlohmann::json& a = paths["attention"];
    text += fmt::format("; attention ({}): cuDNN's fused {}, the rest dpbench's kernels",
                        counted(a.value("shapes", 0), "shape"), a.value("cudnn_fused", 0));
  }
  return text;
}

std::string describe_math(const Summary& s) {
  const std::string paths = describe_math_paths(s.math_paths);
  const std::optional<Precision> math = find_precision(s.math);  // the result's text, read once
  if (math == Precision::tf32) return "tf32 (tensor cores, fp32 accumulation)" + paths;
  if (math == Precision::fp16 || math == Precision::bf16) {
    std::string text = s.math + " activations and weight copy, fp32 accumulation and master weights";
    if (s.loss_scaling != "none")
      text += fmt::format("; {} loss scale, {:g} at the end", s.loss_scaling, s.final_loss_scale);
    return text + paths;
  }
  return s.math + paths;
}

}  // namespace

std::string format_summary(const Result& result) {
  const Summary& s = result.summary;
  // Labels in one column, as the header's, so the values line up.
  auto row = [](const std::string& label, const std::string& value) { return fmt::format("{:<14}{}\n", label, value); };
  std::string text(64, '-');
  text += "\n";
  text += fmt::format("total {}: {:.1f}\n", s.unit, s.items_per_sec);
  text += row("Measured:", fmt::format("{} in {:.3f} s ({}, {} items per step); {} skipped",
                                       counted(s.measured_steps, "step"), s.total_time_s,
                                       counted(s.num_devices, "device"), s.items_per_step,
                                       counted(s.warmup_steps, "warm-up step")));
  if (s.interrupted) {
    const int64_t asked = result.config.value("num_batches", int64_t{0});
    text += row("Interrupted:", fmt::format("stopped early, after {} of {} measured steps; the figures cover those",
                                            s.measured_steps, asked));
  }
  if (s.step_time_ms) {
    const DistributionStats& t = *s.step_time_ms;
    text += row("Step time ms:", fmt::format("{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}", "mean", "median", "stddev",
                                             "min", "max", "p5", "p95"));
    text += row("", fmt::format("{:>10.3f}{:>10.3f}{:>10.3f}{:>10.3f}{:>10.3f}{:>10.3f}{:>10.3f}", t.mean, t.median,
                                t.stddev, t.min, t.max, t.p5, t.p95));
  }
  if (s.jitter) text += row("Jitter:", fmt::format("{:.1f} {}", *s.jitter, s.unit));
  text += row("Math:", describe_math(s));
  if (s.flops.contains("tflops_per_sec_per_device")) text += row("FLOPs:", describe_flops(s.flops));
  if (s.breakdown.contains("ms_per_step")) text += row("Breakdown:", describe_breakdown(s.breakdown));
  if (s.data.contains("wait_ms_per_step"))
    text += row("Data:", fmt::format("{}, compute waited {:.3f} ms per step for its batch ({:.1f}% of step time)",
                                     s.data.value("feed", std::string()), s.data["wait_ms_per_step"].get<double>(),
                                     100.0 * s.data["wait_share_of_step_time"].get<double>()));
  if (s.data.contains("timed_epochs_time_s"))
    text += row("Epochs:", fmt::format("{} run, timed ones took {:.3f} s in all", s.data["epochs"].size(),
                                       s.data["timed_epochs_time_s"].get<double>()));
  text += row("Execution:", s.cuda_graph ? "each step replayed as one CUDA graph per device"
                                         : "kernels launched one by one from the host");
  if (s.kernel_launches_per_step) text += row("Kernels:", fmt::format("{} launches per step", *s.kernel_launches_per_step));
  text += row("Final state:", fmt::format("loss {:.6f}, param_norm {:.6f}, {} parameters", s.final_loss,
                                          s.param_norm, s.num_parameters));
  const std::string gpus = describe_telemetry(s.gpu_telemetry);
  if (!gpus.empty()) text += row("GPUs:", gpus);
  const std::string memory = describe_memory(s.memory);
  if (!memory.empty()) text += row("Memory:", memory);
  const std::vector<std::string> reference = reference_console_lines(s.reference);
  for (size_t i = 0; i < reference.size(); ++i) text += row(i == 0 ? "Reference:" : "", reference[i]);
  text += std::string(64, '-') + "\n";
  return text;
}

}  // namespace dpbench
