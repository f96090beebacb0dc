// `dpbench predict --num_layers=L`: BASE's run as the same model with L blocks would have
// recorded it, for a model built of identical blocks (ModelEntry::repeated_blocks) too deep for
// one GPU, predicted from a shallower run that fits (Note [deeper model from its blocks]).
#pragma once

#include <string>

#include "reports/report_loader.h"
#include "reports/backward_timeline.h"

namespace dpbench {

// Note [deeper model from its blocks]
// BASE's K blocks are identical, so a block costs the same time and memory at any depth; the
// rest of the model (embeddings, final norm, loss) does not change with the depth.
// Time: a block's backward is the mean spacing of BASE's blocks' gradients (from the last range
// produced before the first block's to the last block's, over K), and its forward is BASE's
// forward times the block's share of BASE's forward FLOPs (Model::flops_per_sample: what a
// block adds to the count over what all of BASE's forward counts; a 1-GPU run records no forward
// time per unit). The deeper step is BASE's plus L - K blocks of both; the update (after
// backward) is scaled by the parameter count. Where the forward's time holds work its FLOPs do
// not count (gpt's loss writes the tied projection's gradient inside forward), a block's forward
// is over-estimated by that work's share.
// Its gradients: the deeper model's own tensors and units (its description is built, nothing is
// allocated), each block's ranges produced as BASE's blocks produced theirs (at the mean fraction
// of the block's spacing), the ranges after the blocks (the embeddings') L - K spacings later.
// Memory (summary.memory, the steps' and the whole run's peak): parameters, gradients and
// optimizer state change by what the deeper model's count allocates more (ParameterSet::bytes_for,
// Optimizer::bytes_for); activations are the part outside the blocks (the model's count,
// Model::activation_bytes_outside_blocks) plus L times BASE's per-block part, (BASE's activations
// - its part outside the blocks) / K; scratch, workspaces, data and trace are kept (the blocks
// share one scratch and one attention workspace: one block runs at a time). On a GPU each layer
// norm keeps its own backward workspace (2 x up to 256 parts x width, fp32), which the blocks
// added leave out: a counted backend op no host-side count reaches here.
// The speed at 1 GPU is BASE's at the scaled step; the config records --num_layers=L, so MEASURED
// runs of the deeper model are compared with it.

// What a prediction from BASE says it is: "--num_layers=40, scaled from BASE's 4 blocks".
struct DepthScaling {
  int base_layers = 0;
  int layers = 0;
  std::string text() const;
};

// BASE's `result` and `timeline` turned into those of its model at `layers` blocks (the Note).
// Throws RuntimeError "<where>: ..." in one line: a model whose blocks are not repeated
// (naming the models that are), a BASE with --activation_checkpointing=blocks, a timeline without
// its blocks' units or whose blocks differ, a gradient range across a block's edge.
DepthScaling scale_base_to_layers(int layers, const std::string& where, Result* result, BackwardTimeline* timeline);

}  // namespace dpbench
