// gpt: the GPT-2 decoder as nanoGPT builds it, its size presets and the formulas its parameter
// count and FLOPs follow (the host tests and the PyTorch twin check both against these).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/training/model.h"
#include "models/model_inputs.h"
#include "models/model_settings.h"

namespace dpbench {

// GPT-2's published sizes (--gpt_size): layers, heads and width; each has a 4 x width MLP.
struct GptPreset {
  const char* name;
  int layers, heads, hidden;
};
const std::vector<GptPreset>& gpt_presets();
// nullptr for a name not in the table.
const GptPreset* find_gpt_preset(const std::string& name);
// "124m, 350m, 774m, 1558m"
std::string gpt_preset_names();

// GPT-2's vocabulary of 50257 padded to a multiple of 64, as nanoGPT pads it (the padding rows
// are never a target; they cost 0.09% of the projection's work and keep its GEMMs aligned).
inline constexpr int kGptVocabulary = 50304;

// Parameters of a GPT of `layers` blocks of width d over `vocab` tokens and `seq_len` positions:
//   V d (token embedding, tied to the output projection) + T d (positions)
//   + L (12 d^2 + 13 d) (per block: QKV 3d^2 + 3d, output d^2 + d, MLP 8d^2 + 5d, two norms 4d)
//   + 2 d (the final norm).
int64_t gpt_parameter_count(int64_t vocab, int64_t seq_len, int64_t layers, int64_t hidden);

// Note [gpt FLOPs]
// Training FLOPs per token: 6 N + 6 L T d, as nanoGPT and the PaLM paper count them, except for
// the attention term. 6 N: every parameter takes part in one multiply-add per token forward
// and two backward (the input and the weight gradient); the embedding lookups, biases and norms
// this counts as matrix work are 0.7% of N at 124m. 6 L T d: causal attention's two products
// per layer (scores q.k and the weighted sum p v, d multiply-adds per visible key each) over the
// T / 2 keys a token sees on average, forward (2 x 2 x T/2 x d) and backward (twice that); the
// masked half is neither computed nor counted (PaLM's 12 L T d counts it), and the recomputed
// scores of the flash-attention backward are not counted either. Forward alone is a third.
// --activation_checkpointing=blocks runs each block's forward again before its backward, but for
// the MLP's output projection (its result, the block's output, is kept): the QKV, attention output
// and MLP inner products (8 d^2 multiply-adds) and attention's forward products (T d), that is
// L (16 d^2 + 2 T d) more per token; the biases and norms are not counted.
double gpt_flops_per_token(int64_t parameters, int64_t layers, int64_t seq_len, int64_t hidden);
double gpt_recompute_flops_per_token(int64_t layers, int64_t seq_len, int64_t hidden);

std::unique_ptr<Model> create_gpt_model(const ModelSettings& config);
// Synthetic token windows or --data_name=tokens (llm.c / nanoGPT shards), gpt_inputs.cpp.
ModelInputs gpt_inputs();

}  // namespace dpbench
