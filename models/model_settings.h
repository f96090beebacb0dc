// What the models and their inputs read of a run: the model's flags, its data, and where the
// replicas sit in the run (the synthetic samples and the data's shards are numbered over every
// process's devices). The CLI's ModelSettings is made of this and the strategies' StrategyOptions;
// each field is the flag of its name, and its initialiser is that flag's default.
#pragma once

#include <cstdint>
#include <string>

#include "engine/backend/device_placement.h"
#include "engine/data_type.h"
#include "engine/precision.h"

namespace dpbench {

// Flags of the sequence models (nmt, rnnlm, gpt), each under its command-line name. Values are
// resolved from the model's defaults (models/model_registry.cpp) where not given.
struct SequenceConfig {
  // cudnn_lstm | dynamic (the seeds' uni and bi resolve to dynamic) | transformer (nmt only)
  std::string encoder_type;
  std::string direction;     // nmt's LSTM encoder: uni | bi; empty for the transformer
  int src_vocab_size = 0, tgt_vocab_size = 0;  // nmt
  int vocab_size = 0;                          // rnnlm
  int embedding_dim = 0, num_units = 0;
  int num_encoder_layers = 0, num_decoder_layers = 0;  // nmt
  int num_layers = 0;                                  // rnnlm
  int num_heads = 0, ffn_units = 0;                    // nmt's transformer (num_heads: gpt too)
  double dropout = 0;                                  // nmt's transformer, gpt
  // gpt: a preset of GPT-2's (124m, 350m, 774m, 1558m) setting num_layers, num_heads and
  // hidden_size where those are not given; "custom" when they leave its shape.
  std::string gpt_size;
  int hidden_size = 0;  // gpt's width (its MLP is 4 x hidden_size)
  int src_max_len = 0, tgt_max_len = 0;                // nmt
  int seq_len = 0;                                     // rnnlm
  int loss_chunk_rows = 0;  // rows of logits per chunk of the vocabulary loss; 0: automatic
  // cudnn_lstm's cuDNN algorithm: fastest (timed per shape) | standard | persist_static |
  // persist_static_small_h (Note [LSTM algorithm] in engine/cuda/cudnn_rnn_plans.h)
  std::string lstm_algorithm = "fastest";
};

// Where the batches come from and how they reach the devices (engine/data/, models/batch_sources.h).
struct DataConfig {
  std::string data_dir;   // empty: synthetic data
  // cifar10 | ptb | parallel_text; empty: synthetic of the model's own shape. cifar10 without a
  // data_dir: synthetic images of CIFAR-10's shape (32x32x3, 10 classes).
  std::string data_name;
  // on_device: each replica's batch is made once and stays in device memory; host: every step's
  // batch is built on the host and copied in. Resolved: host with a data_dir, else on_device.
  std::string data_feed;
  // host feeding: copy ahead on the copy stream (true), or build, copy and then compute one
  // step at a time, waiting for each (false: the synchronous baseline).
  bool prefetch_data_to_device = true;
  int prefetch_depth = 2;                // batches built and copied ahead (2: double-buffering)
  int datasets_num_private_threads = 0;  // loader threads per device; 0: automatic
  int num_epochs = 0;       // > 0: whole passes over the data instead of --num_batches
  int timed_epoch_first = -1, timed_epoch_last = -1;  // --timed_epochs=A:B (0-based); -1: all
  bool shuffle = true;
  std::string vocab_file;   // ptb: a vocabulary file; empty: built from ptb.train.txt
  // parallel_text, as TF NMT names its files: <data_dir>/<train_prefix>.<src>, .<tgt>, and
  // <vocab_prefix>.<src>, .<tgt> when present (else built from the training text).
  std::string train_prefix = "train", vocab_prefix = "vocab", src = "src", tgt = "tgt";
  int num_buckets = 5;
  bool host_feed() const { return data_feed == "host"; }
};

struct ModelSettings : DevicePlacement {
  std::string model = "trivial";
  int batch_size = 0;  // per device; 0 until resolved (model default or total/num_devices)
  std::string data_format = "NCHW";
  Precision precision = Precision::fp32;
  uint64_t seed = 1234;
  // Inference: forward passes only (batch norm with its running statistics, no dropout), no
  // backward pass, no exchange, no update (tf_cnn_benchmarks' --forward_only).
  bool forward_only = false;
  // CNNs in training: a batch norm reading a convolution's output takes its statistics from that
  // convolution's epilogue where the backend fuses them (models/network.h). Off by default: on an
  // H200 with cuDNN 9.14 the fused plans timed slower than the forward plus the statistics pass
  // for all of ResNet-50's shapes and all but one of Inception-v3's, and their runtime
  // compilation adds seconds to the set-up (docs/BENCHMARKS.md).
  bool fuse_batch_norm_statistics = false;
  // Training: what forward keeps for backward. none: every block's activations; blocks: each
  // block's input and output only, the block's forward run again in its backward into one set of
  // buffers every block shares (same bits, less memory, a known compute cost). The models that
  // take blocks name what they recompute (ModelEntry::recomputed_blocks).
  std::string activation_checkpointing = "none";
  bool recomputes_blocks() const { return activation_checkpointing == "blocks"; }
  SequenceConfig sequence;  // nmt and rnnlm only
  DataConfig data;

  // Storage type of activations and of the weight copy: f16 / bf16 under --precision=fp16 / bf16,
  // f32 for fp32 and tf32.
  DataType activation_type() const { return dpbench::activation_type(precision); }
};

}  // namespace dpbench
