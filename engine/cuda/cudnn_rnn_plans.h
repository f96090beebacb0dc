// What CudaBackend keeps per geometry for cuDNN's fused LSTM (the v8 RNN API): the descriptors,
// the sizes cuDNN asked for, the device array of sequence lengths, and how the canonical weight
// layout (rnn_geometry.h) maps onto cuDNN's weight space. Built once, when a layer prepares the
// geometry (lstm_workspace_bytes), never per step: building allocates device memory.
//
// Note [16-bit fused LSTM]: with g.type fp16 or bf16, cuDNN reads x, y, the states and the
// weights in that type (the caller's 16-bit weight copy) with fp32 math inside, and writes its
// weight gradients in that type too. Those land in the plan's scratch (packed_dweights), zeroed
// before each call, and are widened and added to the caller's fp32 gradient through the block
// table, which 16-bit plans always have. The weights go to cuDNN as they are when its layout is
// the canonical one (in elements) and the pointer is 16-byte aligned; otherwise they are packed
// into the plan's copy, made on first need (outside a capture).
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/backend/rnn_geometry.h"
#include "engine/cuda/cudnn_raii.h"
#include "engine/cuda/device_memory.h"

namespace dpbench {

using CudnnRnnDescriptor =
    CudnnObject<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using CudnnRnnDataDescriptor = CudnnObject<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                                           cudnnDestroyRNNDataDescriptor>;
using CudnnDropoutDescriptor =
    CudnnObject<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                cudnnDestroyDropoutDescriptor>;

struct RnnPlan {
  RnnGeometry geometry;  // its `type` is the data type of everything cuDNN reads and writes
  cudnnMathType_t math_type = CUDNN_FMA_MATH;
  cudnnRNNAlgo_t algorithm = CUDNN_RNN_ALGO_STANDARD;  // Note [LSTM algorithm]
  // dpbench's persistent kernels run this geometry instead of cuDNN (cuda_persistent_lstm.h):
  // the descriptors are unused, the sizes are its own and the weights are read in place.
  bool own_persistent = false;
  CudnnDropoutDescriptor dropout;  // rate 0: cuDNN wants one even without dropout
  CudnnRnnDescriptor rnn;
  CudnnRnnDataDescriptor x, y;   // (T, B, in), (T, B, H * D), sequence-major packed, all lengths T
  CudnnTensorDescriptor state;   // hx, cx, hy, cy and their gradients: (L * D, B, H)
  DeviceMemory sequence_lengths;  // (B) int32, every entry T: cuDNN reads it on the device

  size_t weight_space_bytes = 0;  // cuDNN's, which the zero-copy path requires to be the canonical size
  size_t workspace_bytes = 0;
  size_t reserve_bytes = 0;

  // True: cuDNN's weight space is the canonical layout, so the caller's weights (and, in fp32,
  // weight gradients) go to cuDNN as they are. False: they are packed into (and gradients added
  // back from) the buffers below, through the block table.
  bool zero_copy = false;
  // cuDNN's weight gradients go to packed_dweights, then into the caller's through the block
  // table: where the layouts differ, and always in 16-bit (Note [16-bit fused LSTM]).
  bool gradients_through_scratch = false;
  DeviceMemory packed_weights;   // weight_space_bytes; without zero copy (16-bit: on first need)
  DeviceMemory packed_dweights;  // weight_space_bytes; with gradients_through_scratch
  DeviceMemory blocks;           // (block_count) WeightBlock; without zero copy, or in 16-bit
  int block_count = 0;
  size_t largest_block = 0;

  // Created on first need (outside a capture), for the calls that pass nullptr:
  DeviceMemory zero_dy;     // (T, B, H * D) zeros: backward data without output gradients
  DeviceMemory dx_scratch;  // (T, B, in): backward data whose dx nobody wants
};

// Key: the geometry's fields (its data type included), the math type, whether repacking was
// forced and the algorithm asked for (kChooseLstmAlgorithm: the fastest, Note [LSTM algorithm]).
constexpr int kChooseLstmAlgorithm = -1;
constexpr int kOwnPersistentLstmAlgorithm = -2;  // --lstm_algorithm=own_persistent
using RnnKey = std::array<int, 10>;
RnnKey rnn_key(const RnnGeometry& g, cudnnMathType_t math_type, bool always_repack, int algorithm);

// Note [LSTM algorithm]
// cuDNN runs an LSTM as a sequence of per-step GEMMs and kernels (CUDNN_RNN_ALGO_STANDARD) or as
// persistent kernels that keep the recurrent weights on chip for the whole sequence
// (PERSIST_STATIC, PERSIST_STATIC_SMALL_H). Which is fastest depends on the shape, the data type
// and the GPU, and cuDNN has no query that says; a persistent algorithm may also refuse a shape
// (set-up or the first call fails). So a plan is built per algorithm cuDNN accepts, each runs one
// forward and both backward passes on scratch buffers (after a warm-up), and the fastest is kept:
// for rnnlm's 128 units the persistent kernels replace hundreds of small launches per step.
// Only 16-bit plans are timed; fp32 (and tf32) plans keep STANDARD. Measured on an H200 (rnnlm,
// batch 512, the whole step, --lstm_algorithm forced): tf32 standard 6.03M tokens/s,
// persist_static_small_h 5.15M, persist_static 0.81M, although small_h had timed fastest alone
// (the step's other work, such as the projection's weight gradient on the auxiliary stream,
// overlaps the standard algorithm's many small kernels and not a persistent one); fp16
// persist_static_small_h 7.16M against standard 6.03M, as timed alone; bf16 5.20M whichever
// (cuDNN 9.14 runs its standard kernels for all three). --deterministic and
// --cudnn_benchmark=false keep STANDARD for every type (no timing, the same choice on every run);
// PyTorch picks a persistent algorithm for fp16 by a fixed heuristic instead.
// dpbench's own persistent kernels (own_persistent, cuda_persistent_lstm.h) join the timing where
// they take the shape (16-bit, one direction, 32 to 128 units): cuDNN 9.14 to 9.19 have no
// persistent bf16 LSTM. rnnlm b512 on an H200 (whole step, after the vocabulary's padded GEMMs):
// bf16 own_persistent 11.45M tokens/s, standard 10.96M (the choice: own_persistent); fp16
// persist_static_small_h 14.37M, own_persistent 12.92M (the choice: cuDNN's).

struct RnnPlans {
  std::map<RnnKey, std::unique_ptr<RnnPlan>> plans;
  size_t created = 0;
};

// Describes `g` to cuDNN, asks for its sizes, compares cuDNN's weight offsets with the canonical
// layout and sets up the zero-copy or the repacking path. Synchronous: it allocates, and its small
// uploads go through `stream`, which it synchronises before returning; call outside a capture.
// `always_repack` takes the repacking path even where zero copy would do (for its tests). A cuDNN
// without bf16 RNNs (before 9.13) refuses a bf16 `g`: RuntimeError, naming the version and the
// ways around it.
// Its buffers are recorded in `memory`, the device's ledger.
std::unique_ptr<RnnPlan> build_rnn_plan(cudnnHandle_t handle, cudaStream_t stream, MemoryLedger& memory,
                                        const RnnGeometry& g, cudnnMathType_t math_type,
                                        bool always_repack,
                                        cudnnRNNAlgo_t algorithm = CUDNN_RNN_ALGO_STANDARD);

// The plan of the fastest algorithm for `g` among those cuDNN accepts (Note [LSTM algorithm]);
// STANDARD's set-up errors are reported as build_rnn_plan reports them. Synchronous, allocates
// scratch for the timing; call outside a capture.
// `best_ms`, where given, receives the kept plan's time (nullopt: untimed, as fp32 plans are).
std::unique_ptr<RnnPlan> fastest_rnn_plan(cudnnHandle_t handle, cudaStream_t stream, MemoryLedger& memory,
                                          const RnnGeometry& g, cudnnMathType_t math_type,
                                          bool always_repack, std::optional<double>* best_ms = nullptr);

// The plan of dpbench's own persistent LSTM for `g` (the caller checks persistent_lstm_supports).
std::unique_ptr<RnnPlan> own_persistent_rnn_plan(const RnnGeometry& g);

// Milliseconds of `pass` (one forward and both backward passes on scratch buffers, enqueued on
// `stream`; false: it could not run), the best of three after a warm-up; nullopt when it refuses.
std::optional<double> time_lstm_pass(cudaStream_t stream, const std::function<bool()>& pass);

// "standard", "persist_static", "persist_static_small_h", "persist_dynamic"; "own_persistent"
// for dpbench's own kernels.
const char* rnn_algorithm_name(const RnnPlan& plan);
// The algorithm --lstm_algorithm names ("fastest": kChooseLstmAlgorithm); RuntimeError otherwise.
int rnn_algorithm_from_name(const std::string& name);

}  // namespace dpbench
