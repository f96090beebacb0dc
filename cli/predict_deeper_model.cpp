// BASE's run as its model at another depth (Note [deeper model from its blocks] in the header).
#include "cli/predict_deeper_model.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "cli/flags.h"
#include "cli/run_command.h"
#include "engine/errors.h"
#include "engine/machine/memory_ledger.h"
#include "engine/training/optimizer.h"
#include "engine/training/parameter_set.h"
#include "models/model_registry.h"
#include "reports/memory_summary.h"
#include "reports/workload_flags.h"

namespace dpbench {
namespace {

// The unit names of a model's blocks (ParameterUnit::name, "block 3").
constexpr const char* kBlockUnitPrefix = "block ";

// The models whose blocks --num_layers scales, for the refusal's line.
std::string models_with_repeated_blocks() {
  std::string names;
  for (const ModelEntry& entry : model_registry())
    if (entry.repeated_blocks != nullptr)
      names += (names.empty() ? "" : ", ") + entry.name + " (" + entry.repeated_blocks + ")";
  return names;
}

// BASE's run configuration at `layers` blocks, resolved as `dpbench run` resolves it: its model's
// flags, batch, precision and optimizer as recorded, on the reference backend (nothing runs).
RunConfig config_at_layers(const nlohmann::json& recorded, const ModelEntry& model, int layers) {
  std::vector<std::string> args = {"--device=cpu", "--model=" + model.name,
                                   "--num_layers=" + std::to_string(layers)};
  // The loss scale's state is the same at any depth: its flags are left to their defaults.
  for (const char* flag : {"batch_size", "precision", "optimizer"})
    if (!config_text(recorded, flag).empty()) args.push_back(std::string("--") + flag + "=" + config_text(recorded, flag));
  // The preset only sizes what is not given, and every size is recorded: its name adds nothing.
  for (const auto& [flag, unused] : model.sequence_flags)
    if (flag != "num_layers" && flag != "gpt_size" && !config_text(recorded, flag.c_str()).empty())
      args.push_back("--" + flag + "=" + config_text(recorded, flag.c_str()));
  return parse_run_flags(args, DeviceInventory{}).config;
}

// Parameters (with the 16-bit copy), gradients and optimizer state of one replica of `model`.
CategoryBytes model_state_of(const Model& model, const RunConfig& config) {
  const size_t count = model.layout().total_count();
  CategoryBytes bytes = ParameterSet::bytes_for(count, config.activation_type());
  const CategoryBytes optimizer = Optimizer::bytes_for(optimizer_config(config), count);
  for (size_t c = 0; c < bytes.size(); ++c) bytes[c] += optimizer[c];
  return bytes;
}

// The indices of `units`' blocks: consecutive, of one size and stride, `expected` of them.
struct BlockSpan {
  size_t first_unit = 0;   // index into units
  size_t count = 0;        // blocks
  int64_t offset = 0;      // the first block's (in layout order)
  int64_t stride = 0;      // elements from one block's start to the next's
  int64_t elements = 0;    // one block's range
  int64_t end() const { return offset + static_cast<int64_t>(count) * stride; }
};

BlockSpan block_span_of(const ParameterUnits& units, int expected, const std::string& where) {
  BlockSpan span;
  bool found = false;
  for (size_t u = 0; u < units.units.size(); ++u) {
    if (units.units[u].name.rfind(kBlockUnitPrefix, 0) != 0) continue;
    if (!found) span.first_unit = u;
    if (found && u != span.first_unit + span.count)
      throw RuntimeError(where + ": its blocks are not consecutive units of summary.timeline.units; --num_layers "
                         "scales consecutive identical blocks");
    found = true;
    ++span.count;
  }
  if (static_cast<int>(span.count) != expected)
    throw RuntimeError(where + ": summary.timeline.units has " + std::to_string(span.count) +
                       " blocks, but its config.num_layers is " + std::to_string(expected) +
                       "; rerun it with this dpbench and --trace_file=FILE");
  const GradientRange& first = units.units[span.first_unit].range;
  span.offset = static_cast<int64_t>(first.offset);
  span.elements = static_cast<int64_t>(first.count);
  span.stride = span.count > 1
                    ? static_cast<int64_t>(units.units[span.first_unit + 1].range.offset) - span.offset
                    : static_cast<int64_t>(first.count);
  for (size_t b = 0; b < span.count; ++b) {
    const GradientRange& range = units.units[span.first_unit + b].range;
    if (static_cast<int64_t>(range.count) != span.elements ||
        static_cast<int64_t>(range.offset) != span.offset + static_cast<int64_t>(b) * span.stride)
      throw RuntimeError(where + ": its blocks' gradient ranges differ (" + units.units[span.first_unit + b].name +
                         ": offset " + std::to_string(range.offset) + ", count " + std::to_string(range.count) +
                         "); --num_layers scales identical blocks");
  }
  return span;
}

// One range a block produces: where in the block, and when, as a fraction of the block's spacing.
struct BlockRange {
  int64_t offset_in_block = 0, count = 0;
  double ready_ms = 0;   // in BASE's block
  double fraction = 0;   // of the spacing, the mean over BASE's blocks
};

// The deeper model's timeline from BASE's (the Note): its own tensors and units, BASE's ranges
// before the blocks kept, each block's produced as BASE's were, those after shifted.
// `block_forward_share`: the part of BASE's forward FLOPs one block's forward is.
BackwardTimeline deeper_timeline(const BackwardTimeline& base, const BlockSpan& blocks, const Model& deeper,
                                 int layers, double block_forward_share, const std::string& where) {
  const int base_layers = static_cast<int>(blocks.count);
  std::vector<ProducedRange> before, after;
  std::vector<std::vector<BlockRange>> by_block(blocks.count);
  for (const ProducedRange& range : base.produced) {
    const int64_t end = range.offset + range.count;
    if (end <= blocks.offset) {
      before.push_back(range);
    } else if (range.offset >= blocks.end()) {
      after.push_back(range);
    } else {
      const int64_t b = (range.offset - blocks.offset) / blocks.stride;
      if (range.offset < blocks.offset || end > blocks.offset + (b + 1) * blocks.stride)
        throw RuntimeError(where + ": summary.timeline.produced has a range (offset " + std::to_string(range.offset) +
                           ", count " + std::to_string(range.count) +
                           ") across a block's edge; --num_layers scales blocks whose gradients are announced "
                           "block by block");
      by_block[static_cast<size_t>(b)].push_back({range.offset - (blocks.offset + b * blocks.stride), range.count, range.ready_ms, 0.0});
    }
  }
  // Backward produces the blocks in layout order (the layout is backward's order): from the last
  // range before them to the last of theirs, K even spacings.
  double start = 0, blocks_end = 0;
  for (const ProducedRange& range : before) start = std::max(start, range.ready_ms);
  for (const auto& ranges : by_block)
    for (const BlockRange& range : ranges) blocks_end = std::max(blocks_end, range.ready_ms);
  blocks_end = std::max(blocks_end, start);
  const double spacing = (blocks_end - start) / base_layers;
  // Each block's ranges at the same places; their times as fractions of the spacing, averaged.
  std::vector<BlockRange> pattern = by_block.front();
  for (BlockRange& range : pattern) range.fraction = 0;
  for (size_t b = 0; b < by_block.size(); ++b) {
    const std::vector<BlockRange>& ranges = by_block[b];
    const bool same = ranges.size() == pattern.size() &&
                      std::equal(ranges.begin(), ranges.end(), pattern.begin(), [](const BlockRange& x, const BlockRange& y) {
                        return x.offset_in_block == y.offset_in_block && x.count == y.count;
                      });
    if (!same)
      throw RuntimeError(where + ": its blocks announce different gradient ranges in summary.timeline.produced; "
                         "--num_layers scales identical blocks");
    for (size_t i = 0; i < ranges.size(); ++i) {
      const double block_start = start + static_cast<double>(b) * spacing;
      pattern[i].fraction += spacing > 0 ? (ranges[i].ready_ms - block_start) / spacing / base_layers : 1.0 / base_layers;
    }
  }

  BackwardTimeline timeline;
  timeline.traced_steps = base.traced_steps;
  timeline.gradient_element_bytes = base.gradient_element_bytes;
  std::vector<TensorView> tensors = deeper.layout().tensors();
  std::sort(tensors.begin(), tensors.end(), [](const TensorView& a, const TensorView& b) { return a.offset < b.offset; });
  for (const TensorView& tensor : tensors) timeline.tensor_elements.push_back(static_cast<int64_t>(tensor.count));
  timeline.units = with_vector_elements(deeper.parameter_units(), deeper.layout());
  const int extra = layers - base_layers;
  const int64_t shift = static_cast<int64_t>(extra) * blocks.stride;
  timeline.produced = before;
  for (int b = 0; b < layers; ++b)
    for (const BlockRange& range : pattern)
      timeline.produced.push_back({blocks.offset + b * blocks.stride + range.offset_in_block, range.count,
                                   start + (b + range.fraction) * spacing});
  for (ProducedRange range : after) {
    range.offset += shift;
    range.ready_ms += extra * spacing;
    timeline.produced.push_back(range);
  }
  // A block's forward: its share of BASE's forward by their FLOPs.
  const double block_forward = base.forward_ms * block_forward_share;
  timeline.backward_ms = base.backward_ms + extra * spacing;
  timeline.forward_ms = base.forward_ms + extra * block_forward;
  timeline.after_backward_ms = base.after_backward_ms * static_cast<double>(deeper.layout().parameter_count()) /
                               static_cast<double>(base.total_elements());
  timeline.step_ms = base.step_ms + (timeline.backward_ms - base.backward_ms) + (timeline.forward_ms - base.forward_ms) +
                     (timeline.after_backward_ms - base.after_backward_ms);
  if (!(timeline.step_ms > 0))
    throw RuntimeError(where + fmt::format(": at --num_layers={} its step would take {:.3f} ms; give more layers", layers,
                                           timeline.step_ms));
  return timeline;
}

// `bytes` (a summary.memory category object) at the deeper depth (the Note).
void scale_categories(nlohmann::json& bytes, const CategoryBytes& base_state, const CategoryBytes& deeper_state,
                      double base_outside, double deeper_outside, int base_layers, int layers) {
  if (!bytes.is_object()) return;
  for (const MemoryCategoryInfo& category : memory_categories()) {
    const size_t c = static_cast<size_t>(category.category);
    const double measured = memory_number(bytes, category.key);
    double scaled = measured;
    if (category.category == MemoryCategory::activations) {
      const double per_block = std::max(0.0, measured - base_outside) / base_layers;
      scaled = deeper_outside + layers * per_block;
    } else if (base_state[c] != deeper_state[c]) {
      scaled = measured + static_cast<double>(deeper_state[c]) - static_cast<double>(base_state[c]);
    }
    if (bytes.contains(category.key)) bytes[category.key] = static_cast<uint64_t>(std::max(0.0, scaled));
  }
}

uint64_t sum_of(const nlohmann::json& bytes) {
  uint64_t sum = 0;
  for (const MemoryCategoryInfo& category : memory_categories())
    sum += static_cast<uint64_t>(memory_number(bytes, category.key));
  return sum;
}

}  // namespace

std::string DepthScaling::text() const {
  return "--num_layers=" + std::to_string(layers) + ", scaled from BASE's " + std::to_string(base_layers) +
         (base_layers == 1 ? " block" : " blocks");
}

DepthScaling scale_base_to_layers(int layers, const std::string& where, Result* result, BackwardTimeline* timeline) {
  nlohmann::json& config = result->config;
  const std::string model_name = config_text(config, "model");
  const ModelEntry* model = find_model(model_name);
  if (model == nullptr || model->repeated_blocks == nullptr)
    throw RuntimeError(where + ": --num_layers scales a model built of identical blocks, and --model=" + model_name +
                       " is not; it is taken for " + models_with_repeated_blocks());
  if (config_text(config, "activation_checkpointing") == "blocks")
    throw RuntimeError(where + " recomputes its blocks (--activation_checkpointing=blocks), whose shared buffer "
                       "--num_layers does not scale; give a BASE run without it");
  const int base_layers = config.value("num_layers", 0);
  if (base_layers < 1)
    throw RuntimeError(where + ": config.num_layers is " + config_text(config, "num_layers") +
                       ", not a number of blocks; rerun it with this dpbench");
  DepthScaling scaling{base_layers, layers};
  RunConfig base_config, deeper_config;
  try {
    base_config = config_at_layers(config, *model, base_layers);
    deeper_config = config_at_layers(config, *model, layers);
  } catch (const ConfigError& error) {
    throw RuntimeError(where + ": its model at --num_layers=" + std::to_string(layers) + " cannot be made: " +
                       error.what());
  }
  // Descriptions only: a model's layout and units, no replica, nothing allocated.
  const std::unique_ptr<Model> base_model = model->create(base_config);
  const std::unique_ptr<Model> deeper_model = model->create(deeper_config);
  if (base_model->layout().parameter_count() != static_cast<size_t>(result->summary.num_parameters))
    throw RuntimeError(where + ": its model, made again from its config, has " +
                       std::to_string(base_model->layout().parameter_count()) + " parameters, but summary.num_parameters is " +
                       std::to_string(result->summary.num_parameters) + "; rerun it with this dpbench");
  const BlockSpan blocks = block_span_of(timeline->units, base_layers, where);
  const BlockSpan deeper_blocks = block_span_of(deeper_model->parameter_units(), layers, where);
  if (deeper_blocks.offset != blocks.offset || deeper_blocks.stride != blocks.stride)
    throw RuntimeError(where + ": its model's blocks at --num_layers=" + std::to_string(layers) +
                       " are laid out unlike BASE's; --num_layers scales identical blocks");
  // One block's forward FLOPs: what the model's count adds per block (Model::flops_per_sample).
  const double base_forward = base_model->flops_per_sample().forward;
  const double block_forward = layers != base_layers ? (deeper_model->flops_per_sample().forward - base_forward) /
                                                           (layers - base_layers)
                                                     : 0.0;
  const double block_forward_share = base_forward > 0 ? std::max(0.0, block_forward) / base_forward : 0.0;
  BackwardTimeline scaled = deeper_timeline(*timeline, blocks, *deeper_model, layers, block_forward_share, where);

  // Its memory at the scaled depth, every figure predict reads.
  nlohmann::json& memory = result->summary.memory;
  if (memory.is_object() && memory.contains("devices") && memory["devices"].is_array()) {
    const CategoryBytes base_state = model_state_of(*base_model, base_config);
    const CategoryBytes deeper_state = model_state_of(*deeper_model, deeper_config);
    const double base_outside = static_cast<double>(base_model->activation_bytes_outside_blocks());
    const double deeper_outside = static_cast<double>(deeper_model->activation_bytes_outside_blocks());
    for (nlohmann::json& device : memory["devices"]) {
      for (const auto& [figure, total] : {std::pair<const char*, const char*>{"at_peak", "peak_bytes"},
                                          {"at_step_peak", "step_peak_bytes"},
                                          {"steady", "steady_bytes"}}) {
        if (!device.contains(figure)) continue;
        scale_categories(device[figure], base_state, deeper_state, base_outside, deeper_outside, base_layers, layers);
        if (device.contains(total)) device[total] = sum_of(device[figure]);
      }
    }
  }
  // The run BASE would have been: its speed at the scaled step, its model's depth and count.
  result->summary.items_per_sec *= timeline->step_ms / scaled.step_ms;
  result->summary.num_parameters = static_cast<int64_t>(deeper_model->layout().parameter_count());
  config["num_layers"] = layers;
  if (config.contains("gpt_size")) config["gpt_size"] = deeper_config.sequence.gpt_size;
  *timeline = std::move(scaled);
  return scaling;
}

}  // namespace dpbench
