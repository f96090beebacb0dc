// The reference backend is the oracle for every [gpu] test, so each op is checked here against
// cases small enough to compute by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/counter_random.h"
#include "engine/device_factory.h"
#include "engine/errors.h"
#include "engine/reference/reference_backend.h"
#include "engine/reference/reference_device.h"

using namespace dpbench;

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
    ops.adam_update(params.data(), grads.data(), m.data(), v.data(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 1);
    CHECK(m[0] == Approx(0.05));
    // beta2 = 0.999f is 0.99900001 as a float, so 1 - beta2 is off by 1.3e-5 relative.
    CHECK(v[0] == Approx(0.00025).epsilon(1e-4));
    CHECK(params[0] == Approx(0.9));
    ops.adam_update(params.data(), grads.data(), m.data(), v.data(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 2);
    CHECK(m[0] == Approx(0.095));
    CHECK(v[0] == Approx(0.00049975).epsilon(1e-4));
    CHECK(params[0] == Approx(0.8));
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

  Buffer buffer = device.allocate(100 * sizeof(float));
  REQUIRE(buffer);
  CHECK(buffer.bytes() == 100 * sizeof(float));
  CHECK(reinterpret_cast<uintptr_t>(buffer.data()) % 64 == 0);
  CHECK(device.allocate(0));  // still a valid pointer

  std::vector<float> host(100), back(100);
  for (int i = 0; i < 100; ++i) host[i] = static_cast<float>(i);
  device.copy_from_host(buffer.data(), host.data(), 100 * sizeof(float));
  device.ops(StreamKind::communication).scale(buffer.as<float>(), 100, 2.0f);
  device.copy_to_host(back.data(), buffer.data(), 100 * sizeof(float));
  for (int i = 0; i < 100; ++i) CHECK(back[i] == 2.0f * i);

  Buffer loss = device.allocate_host_visible(sizeof(float));
  REQUIRE(loss);
  *loss.as<float>() = 1.0f;  // host-visible: the host may write it directly
  CHECK(*loss.as<float>() == 1.0f);

  CHECK(&device.ops(StreamKind::compute) == &device.ops(StreamKind::copy));
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
