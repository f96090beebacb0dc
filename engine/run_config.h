// RunConfig: every resolved run flag, as the engine, models and strategies read them.
// The CLI fills it from the command line (cli/flags.cpp) and validates it before anything runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data_type.h"

namespace dpbench {

enum class BackendKind { cuda, reference };

inline const char* backend_name(BackendKind kind) {
  return kind == BackendKind::cuda ? "cuda" : "reference";
}

// Flags of the sequence models (nmt, rnnlm), each under its command-line name. Values are
// resolved from the model's defaults (models/model_registry.cpp) where not given.
struct SequenceConfig {
  std::string encoder_type;  // cudnn_lstm | dynamic (the seeds' uni and bi resolve to dynamic)
  std::string direction;     // nmt's encoder: uni | bi
  int src_vocab_size = 0, tgt_vocab_size = 0;  // nmt
  int vocab_size = 0;                          // rnnlm
  int embedding_dim = 0, num_units = 0;
  int num_encoder_layers = 0, num_decoder_layers = 0;  // nmt
  int num_layers = 0;                                  // rnnlm
  int src_max_len = 0, tgt_max_len = 0;                // nmt
  int seq_len = 0;                                     // rnnlm
  int loss_chunk_rows = 0;  // rows of logits per chunk of the vocabulary loss; 0: automatic
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

struct RunConfig {
  // Model and data
  std::string model = "trivial";
  int batch_size = 0;        // per device; 0 until resolved (model default or total/num_devices)
  int total_batch_size = 0;  // strong scaling: 0 = not given
  std::string data_format = "NCHW";
  std::string precision = "fp32";
  bool use_fp16 = false;     // tf_cnn_benchmarks' alias for --precision=fp16

  // Devices
  std::string device = "auto";   // as given: auto | gpu | cpu
  BackendKind backend = BackendKind::reference;  // resolved from `device`
  int num_gpus = 1;              // number of devices (GPUs, or reference devices on cpu)
  std::vector<int> gpu_indices;  // resolved: one index per device

  // Synchronisation
  std::string variable_update = "independent";
  bool independent_replica = false;       // as given; replicated + this resolves to independent
  // replicated: nccl | xring | pscpu | psgpu, optionally "#k" for k shards; resolved to "nccl"
  // for replicated when not given, empty for the other strategies.
  std::string all_reduce_spec;
  std::string local_parameter_device = "gpu";
  // How the flat gradient buffer is cut into exchanges (strategies/exchange_plan.h):
  int gradient_repacking = 0;  // N > 0: N equal pieces of the whole buffer
  double bucket_cap_mb = 25;   // buckets in gradient-readiness order; 0: one exchange per tensor
  int64_t agg_small_grads_max_bytes = 0;  // per-tensor mode: batch tensors up to this size; 0: off
  int agg_small_grads_max_group = 10;     // ... at most this many per batch
  // Communication of a range starts as soon as backward produced it; false: after all of backward.
  bool overlap_comm = true;
  // Embedding tables exchange only the rows a step touched (gathered), not the dense gradient.
  bool sparse_embedding_grads = false;
  // fp16 | bf16: gradients travel at half width and are summed in fp32; empty: full width.
  std::string compact_gradient_transfer;
  // replicated, nccl: each range is reduce-scattered, each replica updates only its 1/N shard of
  // it and the updated parameters are all-gathered (the optimizer's work split N ways) instead of
  // all-reducing the gradients and every replica updating all of them.
  bool sharded_update = false;

  // Optimisation
  std::string optimizer;       // sgd | momentum | adam; resolved from the model when not given
  double learning_rate = 0.0;  // resolved from the model when not given
  double momentum = 0.9;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  uint64_t seed = 1234;

  // Measurement
  int num_batches = 100;
  int num_warmup_batches = 10;
  int display_every = 10;
  // Replay each replica's step as one CUDA graph where backend, strategy and optimizer allow it:
  // one launch per step instead of one per kernel, so the host never limits the GPUs.
  bool cuda_graph = true;
  // Time the cuDNN convolution algorithms once per shape and keep the fastest (tf_cnn_benchmarks'
  // and PyTorch's cudnn.benchmark); false: take cuDNN's heuristic choice.
  bool cudnn_benchmark = true;
  // Same bits on every run and in every process, at some cost in speed: convolutions by cuDNN's
  // heuristics among its deterministic algorithms, the embedding scatter-add in a fixed order.
  // For checking from outside (param_norm) that two strategies or launches train alike with the
  // real models; the reference backend is deterministic either way.
  bool deterministic = false;
  // Measured step (from 1) bracketed with cudaProfilerStart/Stop, for `ncu --profile-from-start
  // off`; 0: none. The devices drain before and after it, so that step's time is not comparable.
  int profile_step = 0;
  // Seconds a collective, a rendezvous between ranks or a multi-GPU step may make no progress
  // before every rank ends with one line naming the rank that stopped answering (PyTorch DDP's
  // timeout is 600 s; a step here takes well under a second to minutes).
  double collective_timeout = 300;

  SequenceConfig sequence;  // nmt and rnnlm only

  DataConfig data;

  // Output
  std::string result_file = "dpbench_result.json";  // empty: write none

  // fp16 loss scaling (--fp16_loss_scale, --fp16_enable_auto_loss_scale,
  // --fp16_inc_loss_scale_every_n); only with --precision=fp16.
  double fp16_loss_scale = 0;  // 0: not given (128 static, or 2^15 to start automatic scaling)
  bool fp16_enable_auto_loss_scale = false;
  int fp16_inc_loss_scale_every_n = 1000;

  // mpirun runs (engine/process_group.h): processes of the job and this one's rank; each process
  // drives its own devices (one GPU per rank). 1 and 0 for a single-process run.
  int num_processes = 1;
  int process_rank = 0;

  int num_devices() const { return static_cast<int>(gpu_indices.size()); }
  // Storage type of activations and of the weight copy: f16 / bf16 under --precision=fp16 / bf16,
  // f32 for fp32 and tf32.
  DataType activation_type() const {
    if (precision == "fp16") return DataType::f16;
    if (precision == "bf16") return DataType::bf16;
    return DataType::f32;
  }
  // Devices of the whole run, every process's.
  int world_devices() const { return num_devices() * num_processes; }
  int global_batch_size() const { return batch_size * world_devices(); }
};

}  // namespace dpbench
