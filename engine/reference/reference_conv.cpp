// ReferenceBackend convolutions, lowered onto ReferenceBackend::gemm (im2col / col2im).
// Each output is still one dot product over the filter taps accumulated in double, exactly the
// textbook sum; the lowering only puts those sums where the gemm's vectorising inner loop runs
// them, so CI can afford ResNet, Inception and VGG end to end (a 7-deep loop could not).
// 16-bit tensors are widened to float as they enter the columns (16-bit values are exact floats),
// so a 16-bit convolution is the fp32 one on the same values, its output rounded once at the end.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "engine/reference/reference_storage.h"

namespace dpbench {
namespace {

using reference_detail::with_type;

// The column matrix has one row per output pixel (b, oh, ow) of the whole batch and one column per
// filter tap. Tap (c, r, s) sits in column filter.offset(0, c, r, s), so the stored filter, KCRS or
// KRSC, is already the (k, taps) matrix that multiplies it: no reordering of the weights.
//
// Columns are built a chunk of pixels at a time: VGG's 224x224x64 layer would otherwise need a
// 115 MB column matrix per image. 4 Mi floats (16 MiB) keeps the scratch modest and the chunks
// long enough that the gemm dominates.
constexpr size_t kMaxColumnFloats = size_t{1} << 22;

// A hand-built geometry that disagrees with itself would silently read out of bounds.
void check_geometry(const ConvGeometry& g, const char* op) {
  const Tensor4& in = g.input;
  const Tensor4& out = g.output;
  const FilterShape& f = g.filter;
  const bool consistent =
      f.k > 0 && f.c > 0 && f.r > 0 && f.s > 0 && in.format == out.format &&
      f.format == in.format && in.type == out.type && f.type == in.type && f.c == in.c &&
      out.c == f.k && out.n == in.n && g.stride_h > 0 && g.stride_w > 0 && g.pad_h >= 0 &&
      g.pad_w >= 0 &&
      in.h + 2 * g.pad_h >= f.r && in.w + 2 * g.pad_w >= f.s &&
      out.h == (in.h + 2 * g.pad_h - f.r) / g.stride_h + 1 &&
      out.w == (in.w + 2 * g.pad_w - f.s) / g.stride_w + 1;
  if (!consistent) {
    throw RuntimeError(std::string(op) + ": inconsistent geometry " + describe(g));
  }
}

// Where output pixel `pixel` (flat over (b, oh, ow)) sits.
struct Pixel {
  int b, oh, ow;
};
Pixel pixel_at(const Tensor4& out, size_t pixel) {
  const size_t per_image = static_cast<size_t>(out.h) * out.w;
  const size_t in_image = pixel % per_image;
  return Pixel{static_cast<int>(pixel / per_image), static_cast<int>(in_image / out.w),
               static_cast<int>(in_image % out.w)};
}

// Distance between consecutive channels of one pixel: h*w in NCHW, 1 in NHWC.
size_t channel_step(const Tensor4& t) {
  return t.format == DataFormat::nchw ? size_t(t.h) * t.w : 1;
}
// Distance between consecutive input channels of one tap: r*s in KCRS, 1 in KRSC.
size_t channel_step(const FilterShape& f) {
  return f.format == DataFormat::nchw ? size_t(f.r) * f.s : 1;
}

// Calls visit(row, column, x_offset, inside) for every (row, r, s) of the chunk of pixels
// [first, first + rows): `column` is where channel 0 of tap (r, s) sits in the column row, x_offset
// where channel 0 of the input under it sits (meaningless when the tap is in the padding).
// im2col and col2im share it, so they can never disagree on a tap.
template <typename Visit>
void for_each_tap(const ConvGeometry& g, size_t first, size_t rows, Visit visit) {
  const FilterShape& f = g.filter;
  for (size_t row = 0; row < rows; ++row) {
    const Pixel p = pixel_at(g.output, first + row);
    for (int r = 0; r < f.r; ++r) {
      const int ih = p.oh * g.stride_h - g.pad_h + r;
      for (int s = 0; s < f.s; ++s) {
        const int iw = p.ow * g.stride_w - g.pad_w + s;
        const bool inside = ih >= 0 && ih < g.input.h && iw >= 0 && iw < g.input.w;
        const size_t x_offset = inside ? g.input.offset(p.b, 0, ih, iw) : 0;
        visit(row, f.offset(0, 0, r, s), x_offset, inside);
      }
    }
  }
}

// col (rows, taps) = the input values under each tap of pixels [first, first + rows); zero padding.
template <DataType T>
void im2col(const ConvGeometry& g, const void* x, size_t first, size_t rows, float* col) {
  const size_t taps = g.filter.count() / g.filter.k;
  const size_t x_step = channel_step(g.input);
  const size_t col_step = channel_step(g.filter);
  const int channels = g.filter.c;
  for_each_tap(g, first, rows, [&](size_t row, size_t tap, size_t x_offset, bool inside) {
    float* dst = col + row * taps + tap;
    if (!inside) {
      for (int c = 0; c < channels; ++c) dst[c * col_step] = 0.0f;
      return;
    }
    for (int c = 0; c < channels; ++c) {
      dst[c * col_step] = load_as_float(T, x, x_offset + c * x_step);
    }
  });
}

// dx_sum += each tap's column value at the input element it was read from (padding taps drop).
// The sums over overlapping windows are kept in double, like the gemm's.
void col2im_add(const ConvGeometry& g, const float* col, size_t first, size_t rows,
                double* dx_sum) {
  const size_t taps = g.filter.count() / g.filter.k;
  const size_t x_step = channel_step(g.input);
  const size_t col_step = channel_step(g.filter);
  const int channels = g.filter.c;
  for_each_tap(g, first, rows, [&](size_t row, size_t tap, size_t x_offset, bool inside) {
    if (!inside) return;
    const float* src = col + row * taps + tap;
    double* dst = dx_sum + x_offset;
    for (int c = 0; c < channels; ++c) dst[c * x_step] += src[c * col_step];
  });
}

// pixels (rows, k) <-> the activation tensor t, for pixels [first, first + rows); scatter rounds
// to T.
template <DataType T>
void gather_pixels(const Tensor4& t, const void* data, size_t first, size_t rows, float* pixels) {
  const size_t step = channel_step(t);
  for (size_t row = 0; row < rows; ++row) {
    const Pixel p = pixel_at(t, first + row);
    const size_t src = t.offset(p.b, 0, p.oh, p.ow);
    float* dst = pixels + row * t.c;
    for (int c = 0; c < t.c; ++c) dst[c] = load_as_float(T, data, src + c * step);
  }
}
template <DataType T>
void scatter_pixels(const Tensor4& t, const float* pixels, size_t first, size_t rows, void* data) {
  const size_t step = channel_step(t);
  for (size_t row = 0; row < rows; ++row) {
    const Pixel p = pixel_at(t, first + row);
    const size_t dst = t.offset(p.b, 0, p.oh, p.ow);
    const float* src = pixels + row * t.c;
    for (int c = 0; c < t.c; ++c) store_from_float(T, data, dst + c * step, src[c]);
  }
}

// Grows a thread_local scratch: each runner thread (reference device) keeps its own.
template <typename T>
T* scratch(std::vector<T>& buffer, size_t count) {
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

struct Chunks {
  size_t pixels;  // n * out_h * out_w
  size_t taps;    // c * r * s
  size_t rows;    // pixels per chunk
};
Chunks chunks_of(const ConvGeometry& g) {
  Chunks c;
  c.pixels = static_cast<size_t>(g.output.n) * g.output.h * g.output.w;
  c.taps = g.filter.count() / g.filter.k;
  c.rows = std::max<size_t>(1, std::min(c.pixels, kMaxColumnFloats / c.taps));
  return c;
}

}  // namespace

void ReferenceBackend::conv2d_forward(const ConvGeometry& g, const void* x, const void* w,
                                      void* y, void* /*workspace*/, size_t /*workspace_bytes*/) {
  check_geometry(g, "conv2d_forward");
  const Chunks chunks = chunks_of(g);
  const int k = g.filter.k;
  thread_local std::vector<float> col_buffer, w_t_buffer, y_rows_buffer;
  float* col = scratch(col_buffer, chunks.rows * chunks.taps);     // (rows, taps)
  float* y_rows = scratch(y_rows_buffer, chunks.rows * k);          // (rows, k)
  // The gemm multiplies a non-transposed B by contiguous rank-1 updates that vectorise, while a
  // transposed B becomes scalar dot products; a copy of the small filter buys the fast path.
  float* w_t = scratch(w_t_buffer, chunks.taps * k);  // (taps, k)
  with_type(g.input.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (int out = 0; out < k; ++out) {
      for (size_t tap = 0; tap < chunks.taps; ++tap) {
        w_t[tap * k + out] = load_as_float(T, w, out * chunks.taps + tap);
      }
    }
    for (size_t first = 0; first < chunks.pixels; first += chunks.rows) {
      const size_t rows = std::min(chunks.rows, chunks.pixels - first);
      im2col<T>(g, x, first, rows, col);
      // y_rows (rows, k) = col (rows, taps) * w^T (taps, k)
      gemm(Transpose::no, Transpose::no, static_cast<int>(rows), k, static_cast<int>(chunks.taps),
           1.0f, col, static_cast<int>(chunks.taps), w_t, k, 0.0f, y_rows, k);
      scatter_pixels<T>(g.output, y_rows, first, rows, y);
    }
  });
}

void ReferenceBackend::conv2d_backward_data(const ConvGeometry& g, const void* dy, const void* w,
                                            void* dx, void* /*workspace*/,
                                            size_t /*workspace_bytes*/, bool accumulate) {
  check_geometry(g, "conv2d_backward_data");
  const Chunks chunks = chunks_of(g);
  const int k = g.filter.k;
  const size_t weights = g.filter.count();
  thread_local std::vector<float> col_buffer, dy_rows_buffer, w_float_buffer;
  thread_local std::vector<double> dx_sum_buffer;
  float* dcol = scratch(col_buffer, chunks.rows * chunks.taps);  // (rows, taps)
  float* dy_rows = scratch(dy_rows_buffer, chunks.rows * k);     // (rows, k)
  double* dx_sum = scratch(dx_sum_buffer, g.input.count());      // laid out as dx
  with_type(g.input.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    // The gemm reads the filter as a float (k, taps) matrix: fp32 filters as they are, 16-bit
    // ones widened once per call.
    const float* w_float = static_cast<const float*>(w);
    if (T != DataType::f32) {
      float* widened = scratch(w_float_buffer, weights);
      for (size_t i = 0; i < weights; ++i) widened[i] = load_as_float(T, w, i);
      w_float = widened;
    }
    for (size_t i = 0; i < g.input.count(); ++i) {
      dx_sum[i] = accumulate ? load_as_float(T, dx, i) : 0.0;
    }
    for (size_t first = 0; first < chunks.pixels; first += chunks.rows) {
      const size_t rows = std::min(chunks.rows, chunks.pixels - first);
      gather_pixels<T>(g.output, dy, first, rows, dy_rows);
      // dcol (rows, taps) = dy_rows (rows, k) * w (k, taps)
      gemm(Transpose::no, Transpose::no, static_cast<int>(rows), static_cast<int>(chunks.taps), k,
           1.0f, dy_rows, k, w_float, static_cast<int>(chunks.taps), 0.0f, dcol,
           static_cast<int>(chunks.taps));
      col2im_add(g, dcol, first, rows, dx_sum);
    }
    // The old dx and the new sum meet in double and are rounded once (to float, then to T).
    for (size_t i = 0; i < g.input.count(); ++i) {
      store_from_float(T, dx, i, static_cast<float>(dx_sum[i]));
    }
  });
}

void ReferenceBackend::conv2d_backward_filter(const ConvGeometry& g, const void* x,
                                              const void* dy, void* dw, void* /*workspace*/,
                                              size_t /*workspace_bytes*/) {
  check_geometry(g, "conv2d_backward_filter");
  const Chunks chunks = chunks_of(g);
  const int k = g.filter.k;
  const size_t weights = g.filter.count();
  thread_local std::vector<float> col_buffer, dy_rows_buffer, dw_chunk_buffer;
  thread_local std::vector<double> dw_sum_buffer;
  float* col = scratch(col_buffer, chunks.rows * chunks.taps);  // (rows, taps)
  float* dy_rows = scratch(dy_rows_buffer, chunks.rows * k);    // (rows, k)
  float* dw_chunk = scratch(dw_chunk_buffer, weights);          // (k, taps)
  // Chunks' partial sums meet in double, so chunking loses nothing against one big gemm.
  double* dw_sum = scratch(dw_sum_buffer, weights);  // (k, taps)
  std::fill(dw_sum, dw_sum + weights, 0.0);
  with_type(g.input.type, [&](auto tag) {
    constexpr DataType T = decltype(tag)::value;
    for (size_t first = 0; first < chunks.pixels; first += chunks.rows) {
      const size_t rows = std::min(chunks.rows, chunks.pixels - first);
      im2col<T>(g, x, first, rows, col);
      gather_pixels<T>(g.output, dy, first, rows, dy_rows);
      // dw_chunk (k, taps) = dy_rows^T (k, rows) * col (rows, taps)
      gemm(Transpose::yes, Transpose::no, k, static_cast<int>(chunks.taps), static_cast<int>(rows),
           1.0f, dy_rows, k, col, static_cast<int>(chunks.taps), 0.0f, dw_chunk,
           static_cast<int>(chunks.taps));
      for (size_t i = 0; i < weights; ++i) dw_sum[i] += dw_chunk[i];
    }
    for (size_t i = 0; i < weights; ++i) store_from_float(T, dw, i, static_cast<float>(dw_sum[i]));
  });
}

size_t ReferenceBackend::conv2d_workspace_bytes(const ConvGeometry& /*g*/) {
  return 0;  // the passes keep their columns in thread_local scratch
}

// Never fused: the convolution, then the bias pass, each the oracle of its own op.
void ReferenceBackend::conv2d_forward_bias(const ConvGeometry& g, const void* x, const void* w, const float* bias,
                                           bool relu, void* y, void* workspace, size_t workspace_bytes) {
  conv2d_forward(g, x, w, y, workspace, workspace_bytes);
  add_channel_bias(g.output, y, bias, relu);
}

size_t ReferenceBackend::conv2d_bias_workspace_bytes(const ConvGeometry& g, bool /*relu*/) {
  return conv2d_workspace_bytes(g);
}

bool ReferenceBackend::conv2d_forward_bias_fused(const ConvGeometry& /*g*/, bool /*relu*/) { return false; }

size_t ReferenceBackend::conv2d_statistics_workspace_bytes(const ConvGeometry& g) {
  return conv2d_workspace_bytes(g);
}

}  // namespace dpbench
