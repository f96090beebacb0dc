// The cuDNN graph API's shared plumbing (cudnn_graph_api.h).
#include "engine/cuda/cudnn_graph_api.h"

#include <algorithm>
#include <array>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_raii.h"
#include "engine/errors.h"

namespace dpbench {

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type) {
  DPB_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &native_));
}

std::string last_cudnn_message() {
  std::array<char, 1024> text{};
  cudnnGetLastErrorString(text.data(), text.size());
  return text.data();
}

void set_attribute(const BackendDescriptor& descriptor, cudnnBackendAttributeName_t name,
                   cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  try {
    DPB_CUDNN_CHECK(cudnnBackendSetAttribute(descriptor.get(), name, type, count, values));
  } catch (const RuntimeError& error) {
    throw RuntimeError(std::string(error.what()) + " setting attribute " + std::to_string(name) + ": " +
                       last_cudnn_message());
  }
}

void set_descriptor(const BackendDescriptor& descriptor, cudnnBackendAttributeName_t name,
                    const BackendDescriptor& value) {
  const cudnnBackendDescriptor_t native = value.get();
  set_attribute(descriptor, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &native);
}

void finalize(const BackendDescriptor& descriptor, const char* what) {
  try {
    DPB_CUDNN_CHECK(cudnnBackendFinalize(descriptor.get()));
  } catch (const RuntimeError& error) {
    throw RuntimeError(std::string(error.what()) + " finalizing " + what + ": " + last_cudnn_message());
  }
}

bool is_not_supported(cudnnStatus_t status) { return CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED; }

EngineNotes engine_notes(const BackendDescriptor& config) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t native = engine.get();
  int64_t count = 0;
  DPB_CUDNN_CHECK(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                           &count, &native));
  EngineNotes notes;
  DPB_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count,
                                           &notes.index));
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> numerical{};
  DPB_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                           static_cast<int64_t>(numerical.size()), &count, numerical.data()));
  for (int64_t i = 0; i < std::min<int64_t>(count, numerical.size()); ++i) {
    const cudnnBackendNumericalNote_t note = numerical[static_cast<size_t>(i)];
    notes.tensor_cores |= note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    notes.down_converts_inputs |= note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    notes.reduces_in_reduced_precision |= note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
    notes.nondeterministic |= note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  }
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behavior{};
  DPB_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                           static_cast<int64_t>(behavior.size()), &count, behavior.data()));
  for (int64_t i = 0; i < std::min<int64_t>(count, behavior.size()); ++i) {
    notes.runtime_compiled |= behavior[static_cast<size_t>(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  }
  return notes;
}

std::string CandidateCounts::text() const {
  return std::to_string(configs) + " engine configs, " + std::to_string(excluded_by_notes) +
         " excluded by numerical notes, " + std::to_string(not_finalized) + " not finalized, " +
         std::to_string(over_workspace) + " over the workspace limit, " + std::to_string(failed_to_run) +
         " failed to run" + (last_refusal.empty() ? "" : "; cuDNN: " + last_refusal);
}

namespace {

// Any refusal is an empty list: a mode that has nothing for a graph says so in several ways, and
// the caller then tries another mode or reports the graph unsupported.
std::vector<BackendDescriptor> heuristic_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode,
                                                 std::string& refusal) {
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  set_descriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  set_attribute(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (cudnnBackendFinalize(heuristics.get()) != CUDNN_STATUS_SUCCESS) {
    refusal = last_cudnn_message();
    return {};
  }
  int64_t available = 0;
  DPB_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr));
  // The results are copied into descriptors the caller created.
  std::vector<BackendDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> natives;
  for (int64_t i = 0; i < available; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    natives.push_back(configs.back().get());
  }
  int64_t returned = 0;
  DPB_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned, natives.data()));
  configs.resize(static_cast<size_t>(std::min(returned, available)));
  return configs;
}

}  // namespace

std::vector<CandidatePlan> candidate_plans(cudnnHandle_t handle, const BackendDescriptor& graph,
                                           cudnnBackendHeurMode_t mode, size_t workspace_limit, int max_plans,
                                           const std::function<bool(const EngineNotes&)>& excluded,
                                           CandidateCounts& counts) {
  std::vector<CandidatePlan> candidates;
  for (BackendDescriptor& config : heuristic_configs(graph, mode, counts.last_refusal)) {
    if (static_cast<int>(candidates.size()) == max_plans) break;
    ++counts.configs;
    const EngineNotes notes = engine_notes(config);
    if (excluded(notes)) {
      ++counts.excluded_by_notes;
      continue;
    }
    BackendDescriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    // Deprecated since cuDNN 9.8 like the graph's handle, still accepted, and required before.
    set_attribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    set_descriptor(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    // Any refusal here means this engine cannot run this graph after all (the heuristics
    // over-promise, runtime compilation fails for a shape): the next config is tried.
    if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) {
      ++counts.not_finalized;
      counts.last_refusal = last_cudnn_message();
      continue;
    }
    int64_t workspace = 0, count = 0;
    DPB_CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                             &count, &workspace));
    if (static_cast<size_t>(workspace) > workspace_limit) {
      ++counts.over_workspace;
      continue;
    }
    candidates.push_back({std::move(config), std::move(plan), notes, static_cast<size_t>(workspace)});
  }
  return candidates;
}

float time_plan(cudnnHandle_t handle, cudaStream_t stream, const BackendDescriptor& plan, const BackendDescriptor& pack,
                int runs) {
  if (cudnnBackendExecute(handle, plan.get(), pack.get()) != CUDNN_STATUS_SUCCESS) {
    (void)cudaGetLastError();  // a refused launch is this candidate's answer, not the thread's
    return -1.0f;
  }
  CudaEvent start(/*timing=*/true), stop(/*timing=*/true);
  DPB_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  for (int run = 0; run < runs; ++run) {
    if (cudnnBackendExecute(handle, plan.get(), pack.get()) != CUDNN_STATUS_SUCCESS) {
      (void)cudaGetLastError();
      DPB_CUDA_CHECK(cudaStreamSynchronize(stream));
      return -1.0f;
    }
  }
  DPB_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  DPB_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float milliseconds = 0.0f;
  DPB_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start.get(), stop.get()));
  return milliseconds / static_cast<float>(runs);
}

GraphOperation pointwise_operation(cudnnPointwiseMode_t mode, cudnnDataType_t precision,
                                       const BackendDescriptor& x, const BackendDescriptor* b,
                                       const BackendDescriptor* t, const BackendDescriptor& y,
                                       std::optional<int64_t> axis) {
  GraphOperation made{BackendDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR),
                          BackendDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)};
  set_attribute(made.descriptor, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  set_attribute(made.descriptor, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  if (axis) set_attribute(made.descriptor, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &*axis);
  finalize(made.descriptor, "a pointwise descriptor");
  set_descriptor(made.operation, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, made.descriptor);
  set_descriptor(made.operation, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b != nullptr) set_descriptor(made.operation, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  if (t != nullptr) set_descriptor(made.operation, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
  set_descriptor(made.operation, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  finalize(made.operation, "a pointwise operation");
  return made;
}

GraphOperation reduction_operation(cudnnReduceTensorOp_t reduce, const BackendDescriptor& x,
                                       const BackendDescriptor& y) {
  GraphOperation made{BackendDescriptor(CUDNN_BACKEND_REDUCTION_DESCRIPTOR),
                          BackendDescriptor(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)};
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set_attribute(made.descriptor, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
  set_attribute(made.descriptor, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  finalize(made.descriptor, "a reduction descriptor");
  set_descriptor(made.operation, CUDNN_ATTR_OPERATION_REDUCTION_DESC, made.descriptor);
  set_descriptor(made.operation, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
  set_descriptor(made.operation, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
  finalize(made.operation, "a reduction operation");
  return made;
}

}  // namespace dpbench
