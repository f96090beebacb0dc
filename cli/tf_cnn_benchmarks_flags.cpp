// The tf_cnn_benchmarks flags dpbench does not have (see the header), grouped by the reason.
#include "cli/tf_cnn_benchmarks_flags.h"

#include <map>
#include <vector>

namespace dpbench {
namespace {

struct Group {
  std::vector<const char*> flags;
  const char* note;
};

const std::vector<Group>& groups() {
  static const std::vector<Group> table = {
      {{"xla", "xla_compile", "auto_mixed_precision", "enable_optimizations", "rewriter_config",
        "enable_layout_optimizer", "winograd_nonfused", "use_tf_layers", "use_resource_vars",
        "force_gpu_compatible", "allow_growth", "gpu_memory_frac_for_testing"},
       "dpbench builds no TensorFlow graph to compile or rewrite: its kernels are fixed (cuDNN, cuBLAS "
       "and its own), --cuda_graph replays each step as one CUDA graph, --data_format=NHWC picks the "
       "tensor-core layout and --precision the arithmetic"},
      {{"eval", "eval_during_training_every_n_steps", "eval_during_training_every_n_epochs",
        "eval_during_training_at_specified_steps", "eval_during_training_at_specified_epochs",
        "eval_interval_secs", "eval_dir", "num_eval_batches", "num_eval_epochs", "eval_batch_size",
        "stop_at_top_1_accuracy", "print_training_accuracy", "loss_type_to_report"},
       "dpbench measures training throughput only; it never evaluates a model (the final loss and "
       "param_norm are in every result)"},
      {{"train_dir", "checkpoint_every_n_epochs", "max_ckpts_to_keep", "save_model_steps",
        "save_model_secs", "save_summaries_steps", "summary_verbosity", "benchmark_log_dir",
        "benchmark_test_id", "graph_file", "tfprof_file", "partitioned_graph_file_prefix",
        "result_storage", "export_saved_model"},
       "dpbench keeps no checkpoints, summaries or graphs; what a run measured goes to --result_file"},
      {{"distortions", "resize_method", "use_datasets", "use_python32_barrier", "input_preprocessor",
        "datasets_prefetch_buffer_size", "datasets_use_prefetch", "datasets_use_caching",
        "datasets_parallel_interleave_cycle_length", "datasets_sloppy_parallel_interleave",
        "datasets_parallel_interleave_prefetch", "datasets_repeat_cached_sample", "batch_group_size",
        "data_dir_tfrecords"},
       "dpbench's host pipeline decodes the data sets it reads (--data_name=cifar10, ptb, "
       "parallel_text) without distortions; --prefetch_depth batches are built ahead and "
       "--prefetch_data_to_device copies them on a stream of their own"},
      {{"job_name", "ps_hosts", "worker_hosts", "controller_host", "task_index", "server_protocol",
        "cross_replica_sync", "horovod_device", "collective_graph_key", "sync_on_finish",
        "variable_consistency", "staged_vars", "local_parameter_device_for_cluster"},
       "dpbench leaves one machine through mpirun, not a TensorFlow cluster spec: mpirun -np N dpbench "
       "--variable_update=distributed_all_reduce (or distributed_replicated)"},
      {{"num_intra_threads", "num_inter_threads", "gpu_thread_mode", "per_gpu_thread_count",
        "mkl", "kmp_blocktime", "kmp_affinity", "kmp_settings", "use_chrome_trace_format"},
       "dpbench has no TensorFlow thread pools: one host thread drives each device "
       "(--datasets_num_private_threads sets the data loaders')"},
      {{"hierarchical_copy", "network_topology", "allreduce_merge_scope", "agg_small_grads_max_bytes_per_group",
        "all_reduce_alg", "num_shards"},
       "dpbench picks the all-reduce with --all_reduce_spec (nccl, xring, pscpu, psgpu, alg#k) and cuts "
       "the gradients with --bucket_cap_mb, --gradient_repacking or --agg_small_grads_max_bytes"},
      {{"init_learning_rate", "num_epochs_per_decay", "learning_rate_decay_factor", "minimum_learning_rate",
        "piecewise_learning_rate_schedule", "num_learning_rate_warmup_epochs",
        "gradient_clip", "single_l2_loss_op", "rmsprop_decay", "rmsprop_momentum", "rmsprop_epsilon",
        "adam_beta1_power", "label_smoothing", "fp16_vars"},
       "dpbench trains with a constant --learning_rate and the optimizer of --optimizer (sgd, momentum, "
       "adam, adamw); schedules, decay and clipping do not change a step's speed; master weights are fp32 "
       "under --precision=fp16 and bf16"},
      {{"tf_random_seed"}, "dpbench's seed is --seed"},
      {{"num_gpus_per_worker", "num_workers"},
       "dpbench counts devices with --num_gpus (one process) or the processes mpirun starts"},
  };
  return table;
}

}  // namespace

std::string tf_cnn_benchmarks_flag_note(const std::string& name) {
  static const std::map<std::string, std::string> notes = [] {
    std::map<std::string, std::string> by_name;
    for (const Group& group : groups())
      for (const char* flag : group.flags) by_name[flag] = group.note;
    return by_name;
  }();
  const auto found = notes.find(name);
  return found == notes.end() ? std::string() : found->second;
}

}  // namespace dpbench
