// The reference backend is the oracle for every [gpu] test, so each op is checked here against
// cases small enough to compute by hand; the 16-bit element-wise ops against the fp32 ones on
// the stored values, and the loss-scaling pieces of mixed precision.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/backend/counter_random.h"
#include "engine/backends.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "engine/reference/reference_device.h"
#include "tests/host/reference_cnn_test_support.h"

using namespace dpbench;

// What the tests allocate themselves, in the device's memory ledger.
const MemoryTag kTestBuffer{MemoryCategory::scratch, "test"};
using dpbench::testing::changed_by_rounding;
using dpbench::testing::check_same_bits;
using dpbench::testing::kHalfTypes;
using dpbench::testing::random_values;
using dpbench::testing::rounded;
using dpbench::testing::TypedBuffer;

namespace {

// A (2, 3) times B (3, 2), the operands also stored transposed for the trans_* cases.
const std::vector<float> kA = {1, 2, 3, 4, 5, 6};        // (2, 3)
const std::vector<float> kAt = {1, 4, 2, 5, 3, 6};       // (3, 2) = A^T
const std::vector<float> kB = {7, 8, 9, 10, 11, 12};     // (3, 2)
const std::vector<float> kBt = {7, 9, 11, 8, 10, 12};    // (2, 3) = B^T
const std::vector<float> kAB = {58, 64, 139, 154};       // (2, 2)

}  // namespace

TEST_CASE("reference gemm: all four transpose combinations give A*B", "[reference]") {
  ReferenceBackend ops;
  struct Case {
    Transpose trans_a, trans_b;
    const std::vector<float>* a;
    int lda;
    const std::vector<float>* b;
    int ldb;
  };
  const Case cases[] = {{Transpose::no, Transpose::no, &kA, 3, &kB, 2},
                        {Transpose::yes, Transpose::no, &kAt, 2, &kB, 2},
                        {Transpose::no, Transpose::yes, &kA, 3, &kBt, 3},
                        {Transpose::yes, Transpose::yes, &kAt, 2, &kBt, 3}};
  for (const Case& c : cases) {
    // beta == 0 must overwrite without reading: NaN in C may not leak through.
    std::vector<float> result(4, std::numeric_limits<float>::quiet_NaN());
    ops.gemm(c.trans_a, c.trans_b, 2, 2, 3, 1.0f, c.a->data(), c.lda, c.b->data(), c.ldb, 0.0f,
             result.data(), 2);
    CHECK(result == kAB);
  }
}

TEST_CASE("reference gemm: alpha, beta and padded leading dimensions", "[reference]") {
  ReferenceBackend ops;
  // A (2, 3) inside rows of 5, C (2, 2) inside rows of 4; the padding must stay untouched.
  const std::vector<float> a_padded = {1, 2, 3, -1, -1, 4, 5, 6, -1, -1};
  std::vector<float> c = {1, 2, 99, 99, 3, 4, 99, 99};
  ops.gemm(Transpose::no, Transpose::no, 2, 2, 3, 2.0f, a_padded.data(), 5, kB.data(), 2, 0.5f,
           c.data(), 4);
  // 2 * A*B + 0.5 * C
  CHECK(c == std::vector<float>{116.5f, 129.0f, 99, 99, 279.5f, 310.0f, 99, 99});
}

TEST_CASE("reference bias add and bias gradient", "[reference]") {
  ReferenceBackend ops;
  std::vector<float> y = {1, 2, 3, 4, 5, 6};  // (2, 3)
  const std::vector<float> bias = {10, 20, 30};
  ops.add_bias(y.data(), bias.data(), 2, 3);
  CHECK(y == std::vector<float>{11, 22, 33, 14, 25, 36});

  const std::vector<float> dy = {1, 2, 3, 4, 5, 6};  // (2, 3)
  std::vector<float> dbias = {-1, -1, -1};            // overwritten, not accumulated
  ops.bias_gradient(dy.data(), dbias.data(), 2, 3);
  CHECK(dbias == std::vector<float>{5, 7, 9});
}

TEST_CASE("reference relu forward and backward (in place too)", "[reference]") {
  ReferenceBackend ops;
  const std::vector<float> x = {-1.5f, 0.0f, 2.0f, 3.5f};
  std::vector<float> y(4);
  ops.relu_forward(x.data(), y.data(), 4);
  CHECK(y == std::vector<float>{0, 0, 2, 3.5f});

  std::vector<float> dy = {5, 6, 7, 8};
  ops.relu_backward(y.data(), dy.data(), dy.data(), 4);  // dx aliases dy
  CHECK(dy == std::vector<float>{0, 0, 7, 8});
}

TEST_CASE("reference add_tensors with and without ReLU, and its backward", "[reference]") {
  ReferenceBackend ops;
  const std::vector<float> a = {-3.0f, 1.0f, 2.0f, -0.5f};
  std::vector<float> b = {1.0f, -1.0f, 0.5f, 2.0f};
  std::vector<float> y(4);
  ops.add_tensors(a.data(), b.data(), y.data(), 4, false);
  CHECK(y == std::vector<float>{-2.0f, 0.0f, 2.5f, 1.5f});
  ops.add_tensors(a.data(), b.data(), b.data(), 4, true);  // y aliases b
  CHECK(b == std::vector<float>{0.0f, 0.0f, 2.5f, 1.5f});

  // With ReLU the gradient passes only where the output is positive; da aliases dy.
  std::vector<float> dy = {5, 6, 7, 8};
  std::vector<float> db(4, -1.0f);
  ops.add_tensors_backward(b.data(), dy.data(), true, dy.data(), db.data(), 4);
  CHECK(dy == std::vector<float>{0, 0, 7, 8});
  CHECK(db == std::vector<float>{0, 0, 7, 8});
  std::vector<float> plain = {5, 6, 7, 8}, da(4);
  ops.add_tensors_backward(b.data(), plain.data(), false, da.data(), nullptr, 4);
  CHECK(da == plain);
}

TEST_CASE("reference fill, scale and axpy", "[reference]") {
  ReferenceBackend ops;
  std::vector<float> x(3);
  ops.fill(x.data(), 3, 1.5f);
  CHECK(x == std::vector<float>{1.5f, 1.5f, 1.5f});
  ops.scale(x.data(), 3, 2.0f);
  CHECK(x == std::vector<float>{3, 3, 3});
  std::vector<float> y = {1, 2, 3};
  ops.axpy(0.5f, x.data(), y.data(), 3);
  CHECK(y == std::vector<float>{2.5f, 3.5f, 4.5f});
}

TEST_CASE("reference softmax cross-entropy on a 2x3 case worked by hand", "[reference]") {
  ReferenceBackend ops;
  // Row 0: logits (1, 2, 3), label 2: softmax = e^j / (e + e^2 + e^3) = (0.0900306, 0.2447285,
  //   0.6652410); loss = -log 0.6652410 = 0.4076059.
  // Row 1: logits all equal, label 0: softmax = 1/3 each; loss = log 3 = 1.0986123.
  // Mean loss 0.7531091; dlogits = (softmax - onehot) / 2.
  const std::vector<int32_t> labels = {2, 0};
  const std::vector<float> expected_dlogits = {0.0450153f,  0.1223642f, -0.1673795f,
                                               -0.3333333f, 0.1666667f, 0.1666667f};
  // The same logits shifted by +1000 must give the same answer: the row maximum is subtracted.
  for (float shift : {0.0f, 1000.0f}) {
    std::vector<float> logits = {1 + shift, 2 + shift, 3 + shift, 1 + shift, 1 + shift, 1 + shift};
    std::vector<float> row_losses(2), dlogits(6);
    float loss = -1.0f;
    ops.softmax_cross_entropy(logits.data(), labels.data(), 2, 3, row_losses.data(), &loss,
                              dlogits.data());
    CHECK(row_losses[0] == Approx(0.4076059).epsilon(1e-6));
    CHECK(row_losses[1] == Approx(1.0986123).epsilon(1e-6));
    CHECK(loss == Approx(0.7531091).epsilon(1e-6));
    for (int i = 0; i < 6; ++i) CHECK(dlogits[i] == Approx(expected_dlogits[i]).epsilon(1e-5));

    // dlogits may alias logits.
    ops.softmax_cross_entropy(logits.data(), labels.data(), 2, 3, row_losses.data(), &loss,
                              logits.data());
    CHECK(loss == Approx(0.7531091).epsilon(1e-6));
    for (int i = 0; i < 6; ++i) CHECK(logits[i] == Approx(expected_dlogits[i]).epsilon(1e-5));
  }
}

TEST_CASE("reference softmax cross-entropy rejects a label out of range", "[reference]") {
  ReferenceBackend ops;
  const std::vector<float> logits = {0, 0, 0};
  const std::vector<int32_t> labels = {3};
  std::vector<float> row_losses(1), dlogits(3);
  float loss = 0;
  CHECK_THROWS_AS(ops.softmax_cross_entropy(logits.data(), labels.data(), 1, 3, row_losses.data(),
                                            &loss, dlogits.data()),
                  RuntimeError);
}

TEST_CASE("reference optimizers: one step each, by hand", "[reference]") {
  ReferenceBackend ops;
  SECTION("sgd: p -= lr * g") {
    std::vector<float> params = {1.0f, 2.0f};
    const std::vector<float> grads = {0.5f, -1.0f};
    ops.sgd_update(params.data(), grads.data(), 2, 0.1f);
    CHECK(params[0] == Approx(0.95));
    CHECK(params[1] == Approx(2.1));
  }
  SECTION("momentum: v = 0.9 * 0.2 + 0.5 = 0.68; p = 1 - 0.1 * 0.68 = 0.932") {
    std::vector<float> params = {1.0f}, velocity = {0.2f};
    const std::vector<float> grads = {0.5f};
    ops.momentum_update(params.data(), grads.data(), velocity.data(), 1, 0.1f, 0.9f);
    CHECK(velocity[0] == Approx(0.68));
    CHECK(params[0] == Approx(0.932));
  }
  SECTION("adam with bias correction: a constant gradient moves p by lr per step") {
    // Step 1: m = 0.05, v = 0.00025; m_hat = 0.05 / 0.1 = 0.5, v_hat = 0.00025 / 0.001 = 0.25;
    //   p = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.9.
    // Step 2: m = 0.095, v = 0.00049975; m_hat = 0.095 / 0.19 = 0.5,
    //   v_hat = 0.00049975 / 0.001999 = 0.25; p = 0.9 - 0.1 = 0.8.
    std::vector<float> params = {1.0f}, m = {0.0f}, v = {0.0f};
    const std::vector<float> grads = {0.5f};
    ops.adam_update(params.data(), grads.data(), m.data(), v.data(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 1, 0.0f);
    CHECK(m[0] == Approx(0.05));
    // beta2 = 0.999f is 0.99900001 as a float, so 1 - beta2 is off by 1.3e-5 relative.
    CHECK(v[0] == Approx(0.00025).epsilon(1e-4));
    CHECK(params[0] == Approx(0.9));
    ops.adam_update(params.data(), grads.data(), m.data(), v.data(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 2, 0.0f);
    CHECK(m[0] == Approx(0.095));
    CHECK(v[0] == Approx(0.00049975).epsilon(1e-4));
    CHECK(params[0] == Approx(0.8));
  }
}

namespace {

// torch.optim.AdamW's algorithm in double, one element, from zero moments: the decay of
// 1 - lr * weight_decay first, then Adam's bias-corrected step. The float hyper-parameters are
// taken as the floats the op receives.
double adamw_in_double(double p, const std::vector<double>& gradients, float learning_rate, float weight_decay) {
  const double lr = learning_rate, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  double m = 0.0, v = 0.0;
  for (size_t t = 1; t <= gradients.size(); ++t) {
    const double g = gradients[t - 1];
    p *= 1.0 - lr * static_cast<double>(weight_decay);
    m = b1 * m + (1.0 - b1) * g;
    v = b2 * v + (1.0 - b2) * g * g;
    const double m_hat = m / (1.0 - std::pow(b1, static_cast<double>(t)));
    const double v_hat = v / (1.0 - std::pow(b2, static_cast<double>(t)));
    p -= lr * m_hat / (std::sqrt(v_hat) + eps);
  }
  return p;
}

}  // namespace

TEST_CASE("reference adam_update with weight decay is AdamW: the decay, then the Adam step", "[reference]") {
  ReferenceBackend ops;
  const float lr = 0.1f, decay = 0.5f;
  // Element 0, gradient 0.5 twice: each Adam step moves p by lr (adam's case above), after the
  // decay multiplied p by 1 - 0.1 * 0.5 = 0.95:
  //   step 1: 1 * 0.95 - 0.1 = 0.85;  step 2: 0.85 * 0.95 - 0.1 = 0.7075  (Adam alone: 0.9, 0.8).
  // Elements 1 and 2: other signs and sizes, against torch's algorithm in double.
  const std::vector<float> start = {1.0f, -2.0f, 0.25f};
  std::vector<float> params = start, m(3, 0.0f), v(3, 0.0f);
  const std::vector<float> first = {0.5f, 0.3f, -1.5f}, second = {0.5f, -0.7f, 0.01f};
  ops.adam_update(params.data(), first.data(), m.data(), v.data(), 3, lr, 0.9f, 0.999f, 1e-8f, 1, decay);
  CHECK(params[0] == Approx(0.85).epsilon(1e-6));
  ops.adam_update(params.data(), second.data(), m.data(), v.data(), 3, lr, 0.9f, 0.999f, 1e-8f, 2, decay);
  CHECK(params[0] == Approx(0.7075).epsilon(1e-6));
  // m, v and p are stored as floats after each step: a few float roundings, 1e-6 relative.
  for (size_t i = 0; i < 3; ++i) {
    INFO("element " << i);
    CHECK(params[i] == Approx(adamw_in_double(start[i], {first[i], second[i]}, lr, decay)).epsilon(1e-6));
  }
  // The decay never touches the moments: they are Adam's.
  std::vector<float> adam_params = start, adam_m(3, 0.0f), adam_v(3, 0.0f);
  ops.adam_update(adam_params.data(), first.data(), adam_m.data(), adam_v.data(), 3, lr, 0.9f, 0.999f, 1e-8f, 1, 0.0f);
  ops.adam_update(adam_params.data(), second.data(), adam_m.data(), adam_v.data(), 3, lr, 0.9f, 0.999f, 1e-8f, 2,
                  0.0f);
  CHECK(adam_m == m);
  CHECK(adam_v == v);
  CHECK(adam_params[0] == Approx(0.8).epsilon(1e-6));
  for (size_t i = 0; i < 3; ++i) {
    INFO("element " << i);
    CHECK(adam_params[i] == Approx(adamw_in_double(start[i], {first[i], second[i]}, lr, 0.0f)).epsilon(1e-6));
    CHECK(std::fabs(adam_params[i] - params[i]) > 0.01);  // the decay made a difference far above rounding
  }
}

TEST_CASE("reference synthetic fills are pure functions of the element index", "[reference]") {
  ReferenceBackend ops;
  const uint64_t seed = 42;
  std::vector<float> whole(10), tail(5);
  ops.fill_uniform_by_index(whole.data(), 10, seed, kRandomStreamInputs, 0, -1.0f, 1.0f);
  ops.fill_uniform_by_index(tail.data(), 5, seed, kRandomStreamInputs, 5, -1.0f, 1.0f);
  CHECK(std::vector<float>(whole.begin() + 5, whole.end()) == tail);
  for (size_t i = 0; i < whole.size(); ++i) {
    CHECK(whole[i] >= -1.0f);
    CHECK(whole[i] < 1.0f);
    CHECK(whole[i] == Approx(-1.0 + 2.0 * counter_uniform(seed, kRandomStreamInputs, i)));
  }
  std::vector<float> other_seed(10);
  ops.fill_uniform_by_index(other_seed.data(), 10, seed + 1, kRandomStreamInputs, 0, -1.0f, 1.0f);
  CHECK(other_seed != whole);

  std::vector<int32_t> labels(1000), label_tail(500);
  ops.fill_labels_by_index(labels.data(), 1000, seed, kRandomStreamLabels, 0, 7);
  ops.fill_labels_by_index(label_tail.data(), 500, seed, kRandomStreamLabels, 500, 7);
  CHECK(std::vector<int32_t>(labels.begin() + 500, labels.end()) == label_tail);
  std::vector<int> seen(7, 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    REQUIRE(labels[i] >= 0);
    REQUIRE(labels[i] < 7);
    CHECK(static_cast<uint32_t>(labels[i]) == counter_uint(seed, kRandomStreamLabels, i) % 7);
    ++seen[labels[i]];
  }
  for (int count : seen) CHECK(count > 0);  // 1000 draws over 7 classes reach every class
}

TEST_CASE("reference sum of squares", "[reference]") {
  ReferenceBackend ops;
  const std::vector<float> x = {1, -2, 3};
  CHECK(ops.sum_squares(x.data(), 3, nullptr) == 14.0);
  CHECK(ops.sum_squares(x.data(), 0, nullptr) == 0.0);
}

TEST_CASE("reference device: memory, copies, streams and events", "[reference]") {
  auto devices = create_devices(BackendKind::reference, {0, 3});
  REQUIRE(devices.size() == 2);
  Device& device = *devices[1];
  CHECK(device.kind() == BackendKind::reference);
  CHECK(device.index() == 3);
  CHECK(device.description().name == "reference-cpu-3");
  CHECK(device.description().compute_capability.empty());
  CHECK(device.description().memory_bytes > 0);
  device.make_current();

  Buffer buffer = device.allocate(100 * sizeof(float), kTestBuffer);
  REQUIRE(buffer);
  CHECK(buffer.bytes() == 100 * sizeof(float));
  CHECK(reinterpret_cast<uintptr_t>(buffer.data()) % 64 == 0);
  CHECK(device.allocate(0, kTestBuffer));  // still a valid pointer

  std::vector<float> host(100), back(100);
  for (int i = 0; i < 100; ++i) host[i] = static_cast<float>(i);
  device.copy_from_host(buffer.data(), host.data(), 100 * sizeof(float));
  device.ops(StreamKind::communication).scale(buffer.as<float>(), 100, 2.0f);
  device.copy_to_host(back.data(), buffer.data(), 100 * sizeof(float));
  for (int i = 0; i < 100; ++i) CHECK(back[i] == 2.0f * i);

  Buffer loss = device.allocate_host_visible(sizeof(float), kTestBuffer);
  REQUIRE(loss);
  *loss.as<float>() = 1.0f;  // host-visible: the host may write it directly
  CHECK(*loss.as<float>() == 1.0f);

  CHECK(&device.ops(StreamKind::compute).implementation() == &device.ops(StreamKind::copy).implementation());
  CHECK(device.ops().kind() == BackendKind::reference);

  auto start = device.create_event(true);
  auto end = device.create_event(true);
  start->record(StreamKind::compute);
  device.ops().fill(buffer.as<float>(), 100, 0.0f);
  end->record(StreamKind::compute);
  end->synchronize();
  device.wait(StreamKind::communication, *end);
  device.synchronize();
  CHECK(end->elapsed_ms_since(*start) >= 0.0);
  CHECK(start->elapsed_ms_since(*start) == 0.0);

  auto never_recorded = device.create_event(true);
  CHECK_THROWS_AS(never_recorded->elapsed_ms_since(*start), RuntimeError);
}

TEST_CASE("a device counts the work enqueued on each stream, not the queries", "[reference]") {
  std::unique_ptr<Device> device = create_reference_device(0);
  Buffer buffer = device->allocate(16 * sizeof(float), kTestBuffer);
  const int64_t compute = device->enqueued(StreamKind::compute);
  CHECK(device->enqueued(StreamKind::communication) == 0);
  device->ops(StreamKind::communication).fill(buffer.as<float>(), 16, 1.0f);
  device->ops(StreamKind::communication).scale(buffer.as<float>(), 16, 2.0f);
  device->enqueue_host_function(StreamKind::communication, [] {});
  CHECK(device->enqueued(StreamKind::communication) == 3);
  CHECK(device->enqueued(StreamKind::compute) == compute);
  (void)device->ops().sum_squares_scratch_bytes();  // a query: nothing enqueued
  float host[16];
  device->copy_to_host(host, buffer.data(), sizeof host);  // blocking copies are not stream work
  CHECK(device->enqueued(StreamKind::compute) == compute);
  device->ops().axpy(1.0f, buffer.as<float>(), buffer.as<float>(), 16);
  CHECK(device->enqueued(StreamKind::compute) == compute + 1);
}

TEST_CASE("reference append_scalar files values under a moving cursor", "[reference]") {
  ReferenceBackend ops;
  std::vector<float> history(3, -1.0f);
  int32_t cursor = 0;
  const float first = 2.5f, second = -0.75f;
  ops.append_scalar(&first, history.data(), &cursor);
  ops.append_scalar(&second, history.data(), &cursor);
  CHECK(cursor == 2);
  CHECK(history == std::vector<float>{2.5f, -0.75f, -1.0f});
}

// ---- mixed precision --------------------------------------------------------------------------

TEST_CASE("reference element-wise ops in fp16 and bf16: the fp32 op on the stored values, rounded",
          "[reference]") {
  ReferenceBackend ops;
  const size_t n = 4096;
  for (DataType type : kHalfTypes) {
    INFO(data_type_name(type));
    const std::vector<float> a = random_values(n, 101, -4.0f, 4.0f);
    const std::vector<float> b = random_values(n, 102, -4.0f, 4.0f);
    const std::vector<float> dy = random_values(n, 103);
    const std::vector<float> a16 = rounded(type, a), b16 = rounded(type, b);
    const std::vector<float> dy16 = rounded(type, dy);
    const TypedBuffer a_buffer(type, a), b_buffer(type, b), dy_buffer(type, dy);
    REQUIRE(a_buffer.values() == a16);

    std::vector<float> expected(n);
    TypedBuffer y(type, n, 0.0f);
    ops.relu_forward(type, a_buffer.data(), y.data(), n);
    ops.relu_forward(a16.data(), expected.data(), n);
    check_same_bits(y.values(), expected, "relu_forward");

    for (bool relu : {false, true}) {
      INFO((relu ? "add_tensors with relu" : "add_tensors"));
      ops.add_tensors(a16.data(), b16.data(), expected.data(), n, relu);
      // Two stored values rarely add up to a stored value: many sums really are rounded (about
      // half of them, of which the ReLU zeroes half).
      REQUIRE(changed_by_rounding(type, expected) > n / 8);
      ops.add_tensors(type, a_buffer.data(), b_buffer.data(), y.data(), n, relu);
      check_same_bits(y.values(), rounded(type, expected), "add_tensors");
      TypedBuffer in_place = b_buffer;  // y may alias b
      ops.add_tensors(type, a_buffer.data(), in_place.data(), in_place.data(), n, relu);
      check_same_bits(in_place.values(), rounded(type, expected), "add_tensors in place");

      // Backward masks by the stored y; da aliases dy.
      const std::vector<float> y16 = y.values();
      std::vector<float> expected_grad(n);
      ops.add_tensors_backward(y16.data(), dy16.data(), relu, expected_grad.data(), nullptr, n);
      TypedBuffer da = dy_buffer, db(type, n, 0.0f);
      ops.add_tensors_backward(type, y.data(), da.data(), relu, da.data(), db.data(), n);
      check_same_bits(da.values(), expected_grad, "add_tensors_backward da");
      check_same_bits(db.values(), expected_grad, "add_tensors_backward db");
    }

    ops.relu_forward(type, a_buffer.data(), y.data(), n);
    TypedBuffer dx = dy_buffer;  // dx aliases dy
    ops.relu_backward(type, y.data(), dx.data(), dx.data(), n);
    const std::vector<float> y16 = y.values();
    ops.relu_backward(y16.data(), dy16.data(), expected.data(), n);
    check_same_bits(dx.values(), expected, "relu_backward");
    size_t passed = 0;
    for (float value : expected) passed += value != 0.0f;
    CHECK(passed > n / 4);
    CHECK(passed < 3 * n / 4);
  }
}

TEST_CASE("reference convert: dst = src * scale, rounded once, between every pair of types",
          "[reference]") {
  ReferenceBackend ops;
  const DataType types[] = {DataType::f32, DataType::f16, DataType::bf16};
  std::vector<float> values = random_values(1000, 111, -3.0f, 3.0f);
  values.push_back(1000.0f);  // * 128 overflows fp16
  values.push_back(-0.0f);
  values.push_back(std::numeric_limits<float>::infinity());
  const size_t n = values.size();
  for (DataType src_type : types) {
    for (DataType dst_type : types) {
      for (float scale : {1.0f, 128.0f, 0.3f}) {
        INFO(data_type_name(src_type) << " -> " << data_type_name(dst_type) << " scale " << scale);
        const TypedBuffer src(src_type, values);
        const std::vector<float> stored = src.values();
        TypedBuffer dst(dst_type, n, std::numeric_limits<float>::quiet_NaN());
        ops.convert(src_type, src.data(), dst_type, dst.data(), n, scale);
        std::vector<float> expected(n);
        for (size_t i = 0; i < n; ++i) expected[i] = round_to(dst_type, stored[i] * scale);
        check_same_bits(dst.values(), expected, "convert");
        if (src_type == dst_type) {  // the one case where dst may alias src
          TypedBuffer in_place = src;
          ops.convert(src_type, in_place.data(), dst_type, in_place.data(), n, scale);
          check_same_bits(in_place.values(), expected, "convert in place");
        }
      }
    }
  }
  // The scale applies before the rounding: 3e-8 is below fp16's normal range (to 2^-25 it would
  // round), times 1024 it is an ordinary half.
  const float tiny = 3.0e-8f;
  uint16_t half = 0;
  ops.convert(DataType::f32, &tiny, DataType::f16, &half, 1, 1024.0f);
  CHECK(half == float_to_f16_bits(tiny * 1024.0f));
  CHECK(f16_bits_to_float(half) == Approx(3.072e-5).epsilon(1e-3));
  const float big = 1000.0f;
  ops.convert(DataType::f32, &big, DataType::f16, &half, 1, 128.0f);
  CHECK(half == 0x7c00);  // 128000 overflows to infinity
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ops.convert(DataType::f32, &nan, DataType::bf16, &half, 1);
  CHECK(std::isnan(bf16_bits_to_float(half)));
}

TEST_CASE("reference softmax cross-entropy: loss_scale scales dlogits, not the loss",
          "[reference]") {
  ReferenceBackend ops;
  const std::vector<float> logits = random_values(5 * 7, 121, -3.0f, 3.0f);  // (5, 7)
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1};
  std::vector<float> row_losses(5), dlogits(35);
  float loss = 0.0f;
  ops.softmax_cross_entropy(logits.data(), labels.data(), 5, 7, row_losses.data(), &loss,
                            dlogits.data());
  for (float scale : {1.0f, 1024.0f, 65536.0f, 3.0f}) {
    INFO("loss scale " << scale);
    std::vector<float> scaled_row_losses(5), scaled(35);
    float scaled_loss = 0.0f;
    ops.softmax_cross_entropy(logits.data(), labels.data(), 5, 7, scaled_row_losses.data(),
                              &scaled_loss, scaled.data(), &scale);
    CHECK(float_bits(scaled_loss) == float_bits(loss));
    check_same_bits(scaled_row_losses, row_losses, "row losses");
    for (size_t i = 0; i < scaled.size(); ++i) {
      if (scale != 3.0f) {
        // A power of two scales a double exactly, before the one rounding to float.
        CHECK(scaled[i] == dlogits[i] * scale);
      } else {
        CHECK(scaled[i] == Approx(3.0 * dlogits[i]).epsilon(1e-6));
      }
    }
  }
}

namespace {

enum class Rule { sgd, momentum, adam, adamw };

// One update of a fixed starting state; `first` and `second` are velocity (momentum) or m and v
// (adam, adamw).
struct UpdateState {
  std::vector<float> params, first, second;
};

UpdateState start_state(size_t n) {
  return UpdateState{random_values(n, 131), random_values(n, 132, -0.1f, 0.1f),
                     random_values(n, 133, 0.0f, 0.01f)};
}

UpdateState update(ReferenceBackend& ops, Rule rule, const std::vector<float>& grads,
                   const UpdateExtras& extras) {
  UpdateState s = start_state(grads.size());
  const size_t n = grads.size();
  switch (rule) {
    case Rule::sgd: ops.sgd_update(s.params.data(), grads.data(), n, 0.1f, extras); break;
    case Rule::momentum:
      ops.momentum_update(s.params.data(), grads.data(), s.first.data(), n, 0.1f, 0.9f, extras);
      break;
    case Rule::adam:
    case Rule::adamw:
      ops.adam_update(s.params.data(), grads.data(), s.first.data(), s.second.data(), n, 0.01f,
                      0.9f, 0.999f, 1e-8f, 3, rule == Rule::adamw ? 0.1f : 0.0f, extras);
      break;
  }
  return s;
}

void check_same_state(const UpdateState& actual, const UpdateState& expected) {
  check_same_bits(actual.params, expected.params, "params");
  check_same_bits(actual.first, expected.first, "velocity or m");
  check_same_bits(actual.second, expected.second, "v");
}

const char* rule_name(Rule rule) {
  switch (rule) {
    case Rule::sgd: return "sgd";
    case Rule::momentum: return "momentum";
    case Rule::adam: return "adam";
    case Rule::adamw: return "adamw";
  }
  return "?";
}

}  // namespace

TEST_CASE("reference optimizers: every field of UpdateExtras", "[reference]") {
  ReferenceBackend ops;
  const size_t n = 512;
  const std::vector<float> grads = random_values(n, 134);
  // Plain blocks rather than SECTIONs: Catch runs a SECTION inside a loop for one pass only.
  for (Rule rule : {Rule::sgd, Rule::momentum, Rule::adam, Rule::adamw}) {
    INFO(rule_name(rule));
    const UpdateState plain = update(ops, rule, grads, {});
    REQUIRE(plain.params != start_state(n).params);

    {
      INFO("skip = 0 and an inverse scale of 1 change nothing");
      const int32_t no_skip = 0;
      const float one = 1.0f;
      UpdateExtras extras;
      extras.skip = &no_skip;
      extras.inverse_loss_scale = &one;
      check_same_state(update(ops, rule, grads, extras), plain);
    }

    {
      INFO("skip != 0 leaves parameters, state and the 16-bit copy as they were");
      for (int32_t skip_value : {1, -1}) {
        TypedBuffer half(DataType::f16, n, 7.0f);
        UpdateExtras extras;
        extras.skip = &skip_value;
        extras.half_params = half.data();
        extras.half_type = DataType::f16;
        check_same_state(update(ops, rule, grads, extras), start_state(n));
        CHECK(half.values() == std::vector<float>(n, 7.0f));
      }
    }

    {
      INFO("gradients are multiplied by the inverse loss scale before the rule sees them");
      // A power-of-two scale is undone exactly: the very same update as unscaled gradients.
      std::vector<float> scaled(n);
      for (size_t i = 0; i < n; ++i) scaled[i] = grads[i] * 1024.0f;
      const float inverse = 1.0f / 1024.0f;
      UpdateExtras extras;
      extras.inverse_loss_scale = &inverse;
      check_same_state(update(ops, rule, scaled, extras), plain);
      // Any other scale: the rule sees grads * inverse as a float product.
      const float third = 1.0f / 3.0f;
      extras.inverse_loss_scale = &third;
      std::vector<float> unscaled(n);
      for (size_t i = 0; i < n; ++i) unscaled[i] = grads[i] * third;
      check_same_state(update(ops, rule, grads, extras), update(ops, rule, unscaled, {}));
      CHECK(update(ops, rule, grads, extras).params != plain.params);
    }

    {
      INFO("the updated parameters are also stored, rounded, in the 16-bit copy");
      for (DataType type : kHalfTypes) {
        INFO(data_type_name(type));
        TypedBuffer half(type, n, 0.0f);
        UpdateExtras extras;
        extras.half_params = half.data();
        extras.half_type = type;
        const UpdateState updated = update(ops, rule, grads, extras);
        check_same_state(updated, plain);  // the fp32 master weights are not rounded
        check_same_bits(half.values(), rounded(type, plain.params), "half params");
        CHECK(changed_by_rounding(type, plain.params) > n / 2);
      }
    }

    {
      INFO("all fields at once");
      std::vector<float> scaled(n);
      for (size_t i = 0; i < n; ++i) scaled[i] = grads[i] * 256.0f;
      const float inverse = 1.0f / 256.0f;
      const int32_t no_skip = 0;
      TypedBuffer half(DataType::bf16, n, 0.0f);
      UpdateExtras extras{&inverse, &no_skip, half.data(), DataType::bf16};
      check_same_state(update(ops, rule, scaled, extras), plain);
      check_same_bits(half.values(), rounded(DataType::bf16, plain.params), "half params");
    }
  }
}

TEST_CASE("reference find_non_finite flags infinities and NaN, never clears", "[reference]") {
  ReferenceBackend ops;
  std::vector<float> x = random_values(100, 141, -1.0e30f, 1.0e30f);
  x.push_back(std::numeric_limits<float>::max());
  x.push_back(-std::numeric_limits<float>::denorm_min());
  LossScaleState state;
  state.scale = 8.0f;
  ops.find_non_finite(x.data(), x.size(), &state);
  CHECK(state.non_finite == 0);
  const float infinity = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {infinity, -infinity, nan, -nan}) {
    INFO("value " << bad);
    for (size_t at : {size_t{0}, size_t{57}, x.size() - 1}) {
      std::vector<float> with_bad = x;
      with_bad[at] = bad;
      LossScaleState flagged;
      ops.find_non_finite(with_bad.data(), with_bad.size(), &flagged);
      CHECK(flagged.non_finite == 1);
      // Only x[0, n) is looked at.
      LossScaleState before;
      ops.find_non_finite(with_bad.data(), at, &before);
      CHECK(before.non_finite == 0);
    }
  }
  // A later finite buffer in the same step does not clear the flag, and nothing else changes.
  state.non_finite = 1;
  ops.find_non_finite(x.data(), x.size(), &state);
  CHECK(state.non_finite == 1);
  CHECK(state.scale == 8.0f);
}

TEST_CASE("reference update_loss_scale: halve on non-finite, double after good steps, bounded",
          "[reference]") {
  ReferenceBackend ops;
  const int every = 3;
  LossScaleState state;
  state.scale = 32768.0f;
  state.inverse_scale = 1.0f / 32768.0f;

  // Good steps count up; the third doubles the scale and restarts the count.
  ops.update_loss_scale(&state, every);
  ops.update_loss_scale(&state, every);
  CHECK(state.scale == 32768.0f);
  CHECK(state.good_steps == 2);
  ops.update_loss_scale(&state, every);
  CHECK(state.scale == 65536.0f);
  CHECK(state.inverse_scale == 1.0f / 65536.0f);
  CHECK(state.good_steps == 0);

  // A non-finite step halves the scale, restarts the count and clears the flag.
  ops.update_loss_scale(&state, every);
  CHECK(state.good_steps == 1);
  state.non_finite = 1;
  ops.update_loss_scale(&state, every);
  CHECK(state.scale == 32768.0f);
  CHECK(state.inverse_scale == 1.0f / 32768.0f);
  CHECK(state.good_steps == 0);
  CHECK(state.non_finite == 0);
  // The count after a halving starts from zero: two good steps are not enough.
  ops.update_loss_scale(&state, every);
  ops.update_loss_scale(&state, every);
  CHECK(state.scale == 32768.0f);

  // Never below 1.
  LossScaleState low;
  low.scale = 2.0f;
  low.inverse_scale = 0.5f;
  for (int i = 0; i < 3; ++i) {
    low.non_finite = 1;
    ops.update_loss_scale(&low, every);
  }
  CHECK(low.scale == 1.0f);
  CHECK(low.inverse_scale == 1.0f);
  CHECK(low.good_steps == 0);
  CHECK(low.non_finite == 0);

  // Never above 2^24; the count still restarts there.
  LossScaleState high;
  high.scale = 8388608.0f;  // 2^23
  high.inverse_scale = 1.0f / high.scale;
  for (int i = 0; i < 2 * every; ++i) ops.update_loss_scale(&high, every);
  CHECK(high.scale == 16777216.0f);
  CHECK(high.inverse_scale == 1.0f / 16777216.0f);
  CHECK(high.good_steps == 0);
  ops.update_loss_scale(&high, every);
  CHECK(high.good_steps == 1);

  // increase_every = 1: every good step doubles.
  LossScaleState eager;
  ops.update_loss_scale(&eager, 1);
  ops.update_loss_scale(&eager, 1);
  CHECK(eager.scale == 4.0f);
  CHECK(eager.inverse_scale == 0.25f);
}
