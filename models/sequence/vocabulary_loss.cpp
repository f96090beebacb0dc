// Chunked projection + softmax cross-entropy (see vocabulary_loss.h).
#include "models/sequence/vocabulary_loss.h"

#include <algorithm>

#include "engine/backend/counter_random.h"

namespace dpbench {

VocabularyProjection::VocabularyProjection(ParameterLayout& layout, const std::string& name,
                                           int hidden, int vocab)
    : hidden_(hidden), vocab_(vocab) {
  weights_id_ = layout.declare(name + "/weights", {vocab, hidden});
}

void VocabularyProjection::initialize(const ParameterLayout& layout, uint64_t seed,
                                      std::vector<float>& host_params) const {
  const TensorView& weights = layout.tensor(weights_id_);
  const uint64_t stream = kRandomStreamParameters + static_cast<uint64_t>(weights_id_);
  for (size_t i = 0; i < weights.count; ++i)
    host_params[weights.offset + i] = 0.1f * (2.0f * counter_uniform(seed, stream, i) - 1.0f);
}

int padded_logits_stride(int vocab) { return (vocab + 15) / 16 * 16; }

int default_loss_chunk_rows(int rows, int vocab) {
  const long long budget_floats = 2048ll << 20;  // 8 GiB of logits
  const long long by_budget = std::max<long long>(1, budget_floats / std::max(padded_logits_stride(vocab), 1));
  return static_cast<int>(std::min<long long>(rows, by_budget));
}

namespace {

int chunk_rows_of(int rows, int chunk_rows, int vocab) {
  return chunk_rows > 0 ? std::min(chunk_rows, rows) : default_loss_chunk_rows(rows, vocab);
}

}  // namespace

size_t loss_logits_bytes(int rows, int chunk_rows, int vocab, DataType type) {
  return data_type_bytes(type) * static_cast<size_t>(chunk_rows_of(rows, chunk_rows, vocab)) *
         static_cast<size_t>(padded_logits_stride(vocab));
}

VocabularyLossReplica::VocabularyLossReplica(const VocabularyProjection& projection,
                                             Device& device, int rows, int chunk_rows, DataType type)
    : projection_(projection), device_(device), rows_(rows),
      logits_stride_(padded_logits_stride(projection.vocab())), type_(type) {
  chunk_rows_ = chunk_rows_of(rows, chunk_rows, projection.vocab());
  // The logits are made and turned into their gradient within the loss (chunk by chunk where they
  // are chunked); the padded weights are refreshed every step.
  const MemoryTag projection_scratch{MemoryCategory::scratch, "output projection"};
  logits_ = device.allocate(loss_logits_bytes(rows, chunk_rows, projection.vocab(), type),
                            MemoryTag{MemoryCategory::activations, "output projection"});
  row_losses_ = device.allocate(sizeof(float) * static_cast<size_t>(rows), MemoryTag{MemoryCategory::scratch, "loss"});
  overlap_weight_gradient_ = chunk_rows_ >= rows_;
  if (logits_stride_ != projection.vocab()) {
    const size_t padded = static_cast<size_t>(logits_stride_) * projection.hidden();
    padded_weights_ = device.allocate(data_type_bytes(type) * padded, projection_scratch);
    padded_gradient_ = device.allocate(sizeof(float) * padded, projection_scratch);
    device.ops().fill(type, padded_weights_.data(), padded, 0.0f);  // the padding rows stay 0
  }
  if (overlap_weight_gradient_) {
    logits_gradient_ready_ = device.create_event(false);
    weight_gradient_done_ = device.create_event(false);
  }
}

void VocabularyLossReplica::finish_weight_gradient() {
  if (overlap_weight_gradient_) device_.wait(StreamKind::compute, *weight_gradient_done_);
}

void VocabularyLossReplica::forward_backward(const ParameterSet& params, const void* h,
                                             const int32_t* labels, float loss_weight,
                                             float gradient_scale, void* dh, float* loss_out,
                                             const float* loss_scale, const float* row_weights, bool gradients) {
  Backend& ops = device_.ops();
  // Every GEMM runs over Vp = ld columns (Note [padded logits rows]).
  const int H = projection_.hidden(), V = projection_.vocab(), ld = logits_stride_;
  const DataType type = type_;
  const void* P = params.parameter_as(projection_.weights_id(), type);  // (V, H)
  float* dP = params.gradient(projection_.weights_id());
  const bool padded = ld != V;
  const size_t projection_bytes = static_cast<size_t>(V) * H * data_type_bytes(type);
  if (padded) {
    ops.copy(padded_weights_.data(), P, projection_bytes);
    P = padded_weights_.data();  // (Vp, H), zero past row V
  }
  float* dP_padded = padded ? padded_gradient_.as<float>() : dP;  // (Vp, H)
  const size_t gradient_bytes = sizeof(float) * static_cast<size_t>(V) * H;
  void* logits = logits_.data();
  for (int first = 0; first < rows_; first += chunk_rows_) {
    const int rows = std::min(chunk_rows_, rows_ - first);
    const void* h_chunk = element_at(h, type, static_cast<size_t>(first) * H);
    // logits (rows, Vp) = h (rows, H) P^T; the padding columns come out 0
    ops.gemm(Transpose::no, Transpose::yes, rows, ld, H, 1.0f, type, h_chunk, H, P, H, 0.0f, type,
             logits, ld);
    ops.softmax_cross_entropy_rows(type, logits, labels + first, rows, V, gradient_scale,
                                   row_losses_.as<float>() + first, logits, loss_scale,
                                   row_weights != nullptr ? row_weights + first : nullptr, ld);
    if (!gradients) continue;
    // dh (rows, H) = dlogits P;  dP (Vp, H) (+)= dlogits^T h
    if (overlap_weight_gradient_) {
      // The only chunk: its logits stay untouched until the next step, so dP can run beside dh
      // and the layers' backward pass.
      logits_gradient_ready_->record(StreamKind::compute);
      device_.wait(StreamKind::auxiliary, *logits_gradient_ready_);
      device_.ops(StreamKind::auxiliary)
          .gemm(Transpose::yes, Transpose::no, ld, H, rows, 1.0f, type, logits, ld, h_chunk, H, 0.0f,
                DataType::f32, dP_padded, H);
      if (padded) device_.ops(StreamKind::auxiliary).copy(dP, dP_padded, gradient_bytes);
      weight_gradient_done_->record(StreamKind::auxiliary);
    }
    ops.gemm(Transpose::no, Transpose::no, rows, H, ld, 1.0f, type, logits, ld, P, H, 0.0f, type,
             element_at(dh, type, static_cast<size_t>(first) * H), H);
    if (!overlap_weight_gradient_)
      ops.gemm(Transpose::yes, Transpose::no, ld, H, rows, 1.0f, type, logits, ld, h_chunk, H,
               first == 0 ? 0.0f : 1.0f, DataType::f32, dP_padded, H);
  }
  if (gradients && padded && !overlap_weight_gradient_) ops.copy(dP, dP_padded, gradient_bytes);
  ops.sum_scaled(row_losses_.as<float>(), static_cast<size_t>(rows_), loss_weight, loss_out);
}

}  // namespace dpbench
