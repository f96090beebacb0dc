// ReferenceBackend image ops other than convolution (reference_conv.cpp): channel bias, batch
// norm, pooling, dropout and channel slices. Plain loops, every sum in double: the oracle for the
// cuDNN versions. Image buffers of a 16-bit type are read as floats and each output is rounded
// once to that type; per-channel vectors stay fp32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "engine/reference/reference_storage.h"

namespace dpbench {
namespace {

using reference_detail::with_type;

// Both layouts are (outer, c, inner) in memory: NCHW is (n, c, h*w), NHWC is (n*h*w, c, 1). The
// per-channel ops walk that view in storage order, so NHWC is not read with a stride of c.
struct ChannelView {
  size_t outer = 0, inner = 0;
  int channels = 0;
  size_t at(size_t o, int c, size_t i) const { return (o * channels + c) * inner + i; }
};

ChannelView channel_view(const Tensor4& t) {
  const size_t pixels = static_cast<size_t>(t.h) * t.w;
  return t.format == DataFormat::nchw ? ChannelView{static_cast<size_t>(t.n), pixels, t.c}
                                      : ChannelView{static_cast<size_t>(t.n) * pixels, 1, t.c};
}

// Grows a thread_local scratch: each runner thread (reference device) keeps its own.
template <typename T>
T* scratch(std::vector<T>& buffer, size_t count) {
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

// ---- pooling helpers ------------------------------------------------------------------------

void check_pool_geometry(const PoolGeometry& g, const char* op) {
  const Tensor4& in = g.input;
  const Tensor4& out = g.output;
  const bool consistent =
      in.format == out.format && in.type == out.type && in.n == out.n && in.c == out.c &&
      g.stride_h > 0 && g.stride_w > 0 && g.pad_h >= 0 && g.pad_w >= 0 &&
      in.h + 2 * g.pad_h >= g.window_h && in.w + 2 * g.pad_w >= g.window_w &&
      out.h == (in.h + 2 * g.pad_h - g.window_h) / g.stride_h + 1 &&
      out.w == (in.w + 2 * g.pad_w - g.window_w) / g.stride_w + 1;
  if (!consistent) {
    throw RuntimeError(std::string(op) + ": inconsistent geometry " + describe(in) + " -> " +
                       describe(out) + " window " + std::to_string(g.window_h) + "x" +
                       std::to_string(g.window_w));
  }
}

// The part of output pixel (oh, ow)'s window that lies inside the input: rows [h0, h1), cols
// [w0, w1). Padding is never read: max pooling ignores it and average pooling only counts it.
struct Window {
  int h0, h1, w0, w1;
  int count() const { return std::max(0, h1 - h0) * std::max(0, w1 - w0); }
};

Window window_at(const PoolGeometry& g, int oh, int ow) {
  const int h_start = oh * g.stride_h - g.pad_h;
  const int w_start = ow * g.stride_w - g.pad_w;
  return Window{std::max(h_start, 0), std::min(h_start + g.window_h, g.input.h),
                std::max(w_start, 0), std::min(w_start + g.window_w, g.input.w)};
}

// Calls visit(offset) for each input element of window `win` over image b, channel c, in (h, w)
// order.
template <typename Visit>
void for_each_in_window(const PoolGeometry& g, int b, int c, const Window& win, Visit visit) {
  for (int ih = win.h0; ih < win.h1; ++ih) {
    for (int iw = win.w0; iw < win.w1; ++iw) visit(g.input.offset(b, c, ih, iw));
  }
}

// Calls visit(b, c, output offset, window) for every output element, in NCHW order.
template <typename Visit>
void for_each_window(const PoolGeometry& g, Visit visit) {
  const Tensor4& out = g.output;
  for (int b = 0; b < out.n; ++b) {
    for (int c = 0; c < out.c; ++c) {
      for (int oh = 0; oh < out.h; ++oh) {
        for (int ow = 0; ow < out.w; ++ow) {
          visit(b, c, out.offset(b, c, oh, ow), window_at(g, oh, ow));
        }
      }
    }
  }
}

// Offset of the first (lowest h, then w) maximum in the window; forward and backward both use it,
// so the gradient goes exactly where the forward took its value from.
template <DataType T>
size_t first_max_offset(const PoolGeometry& g, const void* x, int b, int c, const Window& win) {
  size_t best = g.input.offset(b, c, win.h0, win.w0);
  float best_value = load_as_float(T, x, best);
  for_each_in_window(g, b, c, win, [&](size_t at) {
    const float value = load_as_float(T, x, at);
    if (value > best_value) {  // strict: ties keep the earlier position
      best = at;
      best_value = value;
    }
  });
  return best;
}

double average_divisor(const PoolGeometry& g, const Window& win) {
  return g.mode == PoolMode::average_include_padding ? double(g.window_h) * g.window_w
                                                      : double(win.count());
}

// ---- channel-slice helpers ----------------------------------------------------------------------

void check_channel_slice(const Tensor4& part, const Tensor4& whole, int channel_offset,
                         const char* op) {
  // The copy moves bytes: a different element type on the two sides would be garbage.
  const bool fits = part.n == whole.n && part.h == whole.h && part.w == whole.w &&
                    part.format == whole.format && part.type == whole.type && channel_offset >= 0 &&
                    channel_offset + part.c <= whole.c;
  if (!fits) {
    throw RuntimeError(std::string(op) + ": " + describe(part) + " does not fit " +
                       describe(whole) + " at channel " + std::to_string(channel_offset));
  }
}

// Copies the channel slice [channel_offset, channel_offset + part.c) of `whole` from `part`
// (into_whole) or into it. Per outer index the slice is one contiguous run of part.c * inner
// elements on both sides.
void copy_channel_slice(const Tensor4& part_shape, const Tensor4& whole_shape, int channel_offset,
                        bool into_whole, const void* src, void* dst) {
  const ChannelView part = channel_view(part_shape);
  const ChannelView whole = channel_view(whole_shape);
  const size_t element = data_type_bytes(part_shape.type);
  const size_t run = static_cast<size_t>(part.channels) * part.inner;
  for (size_t o = 0; o < part.outer; ++o) {
    const size_t part_at = part.at(o, 0, 0) * element;
    const size_t whole_at = whole.at(o, channel_offset, 0) * element;
    std::memcpy(static_cast<char*>(dst) + (into_whole ? whole_at : part_at),
                static_cast<const char*>(src) + (into_whole ? part_at : whole_at), run * element);
  }
}

}  // namespace

// ---- channel bias -------------------------------------------------------------------------------

void ReferenceBackend::add_channel_bias(const Tensor4& shape, void* y, const float* bias,
                                        bool relu) {
  const ChannelView v = channel_view(shape);
  with_type(shape.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t o = 0; o < v.outer; ++o) {
      for (int c = 0; c < v.channels; ++c) {
        const size_t row = v.at(o, c, 0);  // (inner)
        for (size_t i = 0; i < v.inner; ++i) {
          const float sum = load_as_float(T, y, row + i) + bias[c];
          store_from_float(T, y, row + i, relu && !(sum > 0.0f) ? 0.0f : sum);
        }
      }
    }
  });
}

size_t ReferenceBackend::channel_bias_workspace_bytes(const Tensor4&) { return 0; }

void ReferenceBackend::channel_bias_gradient(const Tensor4& shape, const void* y, void* dy,
                                             float* dbias, bool relu, void*) {
  const ChannelView v = channel_view(shape);
  std::vector<double> sums(static_cast<size_t>(v.channels), 0.0);
  with_type(shape.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t o = 0; o < v.outer; ++o) {
      for (int c = 0; c < v.channels; ++c) {
        const size_t row = v.at(o, c, 0);
        for (size_t i = 0; i < v.inner; ++i) {
          if (relu && !(load_as_float(T, y, row + i) > 0.0f)) {
            store_from_float(T, dy, row + i, 0.0f);
          }
          sums[c] += load_as_float(T, dy, row + i);
        }
      }
    }
  });
  for (int c = 0; c < v.channels; ++c) dbias[c] = static_cast<float>(sums[c]);
}

// ---- batch normalisation ------------------------------------------------------------------------

namespace {

// A batch norm's statistics over the batch, in double, and its normalisation of element `at` of
// channel c: gamma * (x - mean) * inv_std + beta. The storage type T is a constant (with_type), so
// the loads fold to plain accesses.
template <DataType T>
struct BatchStatistics {
  std::vector<double> mean, inv_std;
  double normalised(const void* x, size_t at, int c, const float* gamma, const float* beta) const {
    return double(gamma[c]) * (load_as_float(T, x, at) - mean[c]) * inv_std[c] + beta[c];
  }
};

// Also leaves the float statistics the backward pass reads in saved_mean and saved_inv_std. With
// `sums` (Backend::batch_norm_forward_training's x_statistics) they come from those instead of x.
template <DataType T>
BatchStatistics<T> batch_statistics(const Tensor4& shape, const void* x, float epsilon, float* saved_mean,
                                    float* saved_inv_std, const float* sums = nullptr) {
  const ChannelView v = channel_view(shape);
  const double count = static_cast<double>(v.outer * v.inner);  // M = n * h * w per channel
  BatchStatistics<T> s{std::vector<double>(static_cast<size_t>(v.channels), 0.0),
                       std::vector<double>(static_cast<size_t>(v.channels), 0.0)};
  std::vector<double> variance(static_cast<size_t>(v.channels), 0.0);
  if (sums != nullptr) {
    for (int c = 0; c < v.channels; ++c) {
      s.mean[c] = sums[c] / count;
      const double biased = std::max(0.0, sums[v.channels + c] / count - s.mean[c] * s.mean[c]);
      s.inv_std[c] = 1.0 / std::sqrt(biased + epsilon);
      saved_mean[c] = static_cast<float>(s.mean[c]);
      saved_inv_std[c] = static_cast<float>(s.inv_std[c]);
    }
    return s;
  }
  for (size_t o = 0; o < v.outer; ++o) {
    for (int c = 0; c < v.channels; ++c) {
      for (size_t i = 0; i < v.inner; ++i) s.mean[c] += load_as_float(T, x, v.at(o, c, i));
    }
  }
  for (double& m : s.mean) m /= count;
  // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which cancels badly.
  for (size_t o = 0; o < v.outer; ++o) {
    for (int c = 0; c < v.channels; ++c) {
      for (size_t i = 0; i < v.inner; ++i) {
        const double d = load_as_float(T, x, v.at(o, c, i)) - s.mean[c];
        variance[c] += d * d;
      }
    }
  }
  for (int c = 0; c < v.channels; ++c) {
    s.inv_std[c] = 1.0 / std::sqrt(variance[c] / count + epsilon);  // biased variance
    saved_mean[c] = static_cast<float>(s.mean[c]);
    saved_inv_std[c] = static_cast<float>(s.inv_std[c]);
  }
  return s;
}

// y = act(value(at, c)), rounded once; the same comparison as relu_forward, so a fused op equals
// the ops in sequence.
template <DataType T, typename Value>
void store_activated(const Tensor4& shape, bool relu, void* y, Value value) {
  const ChannelView v = channel_view(shape);
  for (size_t o = 0; o < v.outer; ++o) {
    for (int c = 0; c < v.channels; ++c) {
      for (size_t i = 0; i < v.inner; ++i) {
        const size_t at = v.at(o, c, i);
        const float result = static_cast<float>(value(at, c));
        store_from_float(T, y, at, relu ? (result > 0.0f ? result : 0.0f) : result);
      }
    }
  }
}

}  // namespace

bool ReferenceBackend::conv2d_forward_statistics_fused(const ConvGeometry&) { return fuse_convolution_statistics_; }

void ReferenceBackend::prepare_conv2d_backward_data_accumulate(const ConvGeometry&, size_t) {}

// conv2d_forward, then the sums of the stored y in double, rounded to fp32.
void ReferenceBackend::conv2d_forward_statistics(const ConvGeometry& g, const void* x, const void* w, void* y,
                                                 float* statistics, void* workspace, size_t workspace_bytes) {
  conv2d_forward(g, x, w, y, workspace, workspace_bytes);
  const ChannelView v = channel_view(g.output);
  std::vector<double> sums(2 * static_cast<size_t>(v.channels), 0.0);
  with_type(g.output.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t o = 0; o < v.outer; ++o) {
      for (int c = 0; c < v.channels; ++c) {
        for (size_t i = 0; i < v.inner; ++i) {
          const double value = load_as_float(T, y, v.at(o, c, i));
          sums[c] += value;
          sums[v.channels + c] += value * value;
        }
      }
    }
  });
  for (size_t i = 0; i < sums.size(); ++i) statistics[i] = static_cast<float>(sums[i]);
}

size_t ReferenceBackend::batch_norm_workspace_bytes(const Tensor4&) { return 0; }

void ReferenceBackend::batch_norm_forward_training(const Tensor4& shape, const void* x,
                                                   const float* gamma, const float* beta,
                                                   float epsilon, bool relu, void* y,
                                                   float* saved_mean, float* saved_inv_std,
                                                   void* /*workspace*/, const void* residual,
                                                   const float* x_statistics) {
  with_type(shape.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    const BatchStatistics<T> s = batch_statistics<T>(shape, x, epsilon, saved_mean, saved_inv_std, x_statistics);
    store_activated<T>(shape, relu, y, [&](size_t at, int c) {
      const double value = s.normalised(x, at, c, gamma, beta);
      return residual != nullptr ? value + load_as_float(T, residual, at) : value;
    });
  });
}

void ReferenceBackend::batch_norm_pair_forward_training(const Tensor4& shape, const void* x, const float* gamma,
                                                        const float* beta, float* saved_mean, float* saved_inv_std,
                                                        const void* z, const float* z_gamma, const float* z_beta,
                                                        float* z_saved_mean, float* z_saved_inv_std, float epsilon,
                                                        bool relu, void* y, void* /*workspace*/,
                                                        const float* x_statistics, const float* z_statistics) {
  with_type(shape.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    const BatchStatistics<T> s = batch_statistics<T>(shape, x, epsilon, saved_mean, saved_inv_std, x_statistics);
    const BatchStatistics<T> z_s =
        batch_statistics<T>(shape, z, epsilon, z_saved_mean, z_saved_inv_std, z_statistics);
    store_activated<T>(shape, relu, y, [&](size_t at, int c) {
      return s.normalised(x, at, c, gamma, beta) + z_s.normalised(z, at, c, z_gamma, z_beta);
    });
  });
}

void ReferenceBackend::batch_norm_inference(const Tensor4& shape, const void* x, const InferenceNorm& norm,
                                            const void* z, const InferenceNorm* z_norm, bool relu, void* y) {
  const ChannelView v = channel_view(shape);
  auto scale_of = [](const InferenceNorm& n, int c) {
    return double(n.gamma[c]) / std::sqrt(double(n.variance[c]) + n.epsilon);
  };
  with_type(shape.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t o = 0; o < v.outer; ++o) {
      for (int c = 0; c < v.channels; ++c) {
        const double scale = scale_of(norm, c);
        const double z_scale = z_norm != nullptr ? scale_of(*z_norm, c) : 1.0;
        for (size_t i = 0; i < v.inner; ++i) {
          const size_t at = v.at(o, c, i);
          double value = scale * (load_as_float(T, x, at) - double(norm.mean[c])) + norm.beta[c];
          if (z != nullptr) {
            const double residual = load_as_float(T, z, at);
            value += z_norm != nullptr ? z_scale * (residual - double(z_norm->mean[c])) + z_norm->beta[c] : residual;
          }
          const float result = static_cast<float>(value);
          store_from_float(T, y, at, relu ? (result > 0.0f ? result : 0.0f) : result);
        }
      }
    }
  });
}

void ReferenceBackend::batch_norm_backward(const Tensor4& shape, const void* x, const void* y,
                                           const void* dy, const float* gamma,
                                           const float* saved_mean, const float* saved_inv_std,
                                           float /*epsilon*/, bool relu, void* dx, float* dgamma,
                                           float* dbeta, void* /*workspace*/, void* d_residual) {
  // epsilon is already inside saved_inv_std; it stays in the signature for symmetry with forward.
  const ChannelView v = channel_view(shape);
  const double count = static_cast<double>(v.outer * v.inner);
  std::vector<double> sum_dy(static_cast<size_t>(v.channels), 0.0);
  std::vector<double> sum_dy_xhat(static_cast<size_t>(v.channels), 0.0);
  with_type(shape.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    // dy' = dy where the fused ReLU passed its input, as relu_backward would have left it. The
    // mask is the stored y: a positive output that rounded to zero let no gradient through.
    auto masked_dy = [&](size_t at) -> double {
      return !relu || load_as_float(T, y, at) > 0.0f ? load_as_float(T, dy, at) : 0.0;
    };
    auto xhat = [&](size_t at, int c) -> double {
      return (double(load_as_float(T, x, at)) - saved_mean[c]) * saved_inv_std[c];
    };
    for (size_t o = 0; o < v.outer; ++o) {
      for (int c = 0; c < v.channels; ++c) {
        for (size_t i = 0; i < v.inner; ++i) {
          const size_t at = v.at(o, c, i);
          const double g = masked_dy(at);
          sum_dy[c] += g;
          sum_dy_xhat[c] += g * xhat(at, c);
        }
      }
    }
    // The residual's gradient: dy' itself (a masked 16-bit dy is exact in 16 bits). Written after
    // the sums, before dx, so dx may still alias dy.
    if (d_residual != nullptr) {
      for (size_t o = 0; o < v.outer; ++o) {
        for (int c = 0; c < v.channels; ++c) {
          for (size_t i = 0; i < v.inner; ++i) {
            const size_t at = v.at(o, c, i);
            store_from_float(T, d_residual, at, static_cast<float>(masked_dy(at)));
          }
        }
      }
    }
    // Every element's dy is read before its dx is written (and only then): dx may alias dy.
    for (size_t o = 0; o < v.outer; ++o) {
      for (int c = 0; c < v.channels; ++c) {
        const double factor = double(gamma[c]) * saved_inv_std[c] / count;
        for (size_t i = 0; i < v.inner; ++i) {
          const size_t at = v.at(o, c, i);
          const double value =
              factor * (count * masked_dy(at) - sum_dy[c] - xhat(at, c) * sum_dy_xhat[c]);
          store_from_float(T, dx, at, static_cast<float>(value));
        }
      }
    }
  });
  for (int c = 0; c < v.channels; ++c) {
    dgamma[c] = static_cast<float>(sum_dy_xhat[c]);
    dbeta[c] = static_cast<float>(sum_dy[c]);
  }
}

// ---- pooling ------------------------------------------------------------------------------------

void ReferenceBackend::pool_forward(const PoolGeometry& g, const void* x, void* y) {
  check_pool_geometry(g, "pool_forward");
  with_type(g.output.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for_each_window(g, [&](int b, int c, size_t out_at, const Window& win) {
      float value = 0.0f;  // a window wholly in the padding (pad >= window) sees only zeros
      if (win.count() > 0) {
        if (g.mode == PoolMode::max) {
          value = load_as_float(T, x, first_max_offset<T>(g, x, b, c, win));
        } else {
          double sum = 0.0;
          for_each_in_window(g, b, c, win, [&](size_t at) { sum += load_as_float(T, x, at); });
          value = static_cast<float>(sum / average_divisor(g, win));
        }
      }
      store_from_float(T, y, out_at, value);
    });
  });
}

void ReferenceBackend::pool_backward(const PoolGeometry& g, const void* x, const void* /*y*/,
                                     const void* dy, void* dx) {
  check_pool_geometry(g, "pool_backward");
  // Overlapping windows (3x3 stride 2) send several gradients to one element: sum them in double.
  thread_local std::vector<double> dx_sum_buffer;
  double* dx_sum = scratch(dx_sum_buffer, g.input.count());
  std::fill(dx_sum, dx_sum + g.input.count(), 0.0);
  with_type(g.output.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for_each_window(g, [&](int b, int c, size_t out_at, const Window& win) {
      if (win.count() == 0) return;
      const double grad = load_as_float(T, dy, out_at);
      if (g.mode == PoolMode::max) {
        dx_sum[first_max_offset<T>(g, x, b, c, win)] += grad;
        return;
      }
      // Times the reciprocal: the GPU's gather makes one division per window instead of one per
      // channel, and matches this bit for bit.
      const double share = grad * (1.0 / average_divisor(g, win));
      for_each_in_window(g, b, c, win, [&](size_t at) { dx_sum[at] += share; });
    });
    for (size_t i = 0; i < g.input.count(); ++i) {
      const bool relu_passes = !g.relu_input || load_as_float(T, x, i) > 0.0f;
      store_from_float(T, dx, i, relu_passes ? static_cast<float>(dx_sum[i]) : 0.0f);
    }
  });
}

// ---- dropout ------------------------------------------------------------------------------------

void ReferenceBackend::dropout_forward(DataType type, const void* x, void* y, size_t n, float rate,
                                       uint64_t seed, uint64_t first_index, const int32_t* step) {
  // Multiply in float by the scale as written in backend_ops.h, so the GPU kernel can match bit for bit.
  const uint64_t stream_key = dropout_stream_key(seed, *step);
  const uint32_t threshold = dropout_threshold(rate);
  const float keep_scale = dropout_keep_scale(rate);
  with_type(type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t i = 0; i < n; ++i) {
      const bool keep = dropout_keeps_keyed(stream_key, first_index + i, threshold);
      store_from_float(T, y, i, keep ? load_as_float(T, x, i) * keep_scale : 0.0f);
    }
  });
}

// The gradient goes through the forward's mask and scale: the same map, applied to dy.
void ReferenceBackend::dropout_backward(DataType type, const void* dy, void* dx, size_t n,
                                        float rate, uint64_t seed, uint64_t first_index,
                                        const int32_t* step) {
  dropout_forward(type, dy, dx, n, rate, seed, first_index, step);
}

// ---- channel slices -----------------------------------------------------------------------------

void ReferenceBackend::copy_into_channels(const Tensor4& src_shape, const void* src,
                                          const Tensor4& dst_shape, void* dst,
                                          int channel_offset) {
  check_channel_slice(src_shape, dst_shape, channel_offset, "copy_into_channels");
  copy_channel_slice(src_shape, dst_shape, channel_offset, /*into_whole=*/true, src, dst);
}

void ReferenceBackend::copy_from_channels(const Tensor4& src_shape, const void* src,
                                          int channel_offset, const Tensor4& dst_shape,
                                          void* dst) {
  check_channel_slice(dst_shape, src_shape, channel_offset, "copy_from_channels");
  copy_channel_slice(dst_shape, src_shape, channel_offset, /*into_whole=*/false, src, dst);
}

}  // namespace dpbench
