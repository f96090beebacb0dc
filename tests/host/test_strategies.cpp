// Strategies on the reference backend: the exchange planner, tensor placement, and the central
// promise that every strategy which averages gradients trains the same model as one device
// running N times the per-device batch.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/run_command.h"
#include "engine/backends.h"
#include "engine/errors.h"
#include "engine/training/runner.h"
#include "models/model_registry.h"
#include "strategies/all_reduce_spec.h"
#include "strategies/exchange_plan.h"
#include "strategies/parameter_server.h"
#include "strategies/strategy_options.h"
#include "strategies/strategy_registry.h"
#include "tests/host/strategy_test_support.h"

namespace dpbench {
namespace {

using namespace dpbench::testing;

ParameterLayout layout_of(const std::vector<int64_t>& counts) {
  ParameterLayout layout;
  for (size_t i = 0; i < counts.size(); ++i) layout.declare("t" + std::to_string(i), {counts[i]});
  layout.finalize();
  return layout;
}

// Offsets and counts of a plan, for compact comparisons.
std::vector<std::pair<size_t, size_t>> spans(const std::vector<GradientRange>& plan) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const GradientRange& range : plan) out.emplace_back(range.offset, range.count);
  return out;
}

// Every averaging strategy and exchange option. Tolerances: fp32 sums in another order differ in
// the last bits of each gradient (rtol 1e-5 over three steps). Compact transfers round each
// replica's gradient (scaled by 1/N) and the summed chunk to 11 (fp16) or 8 (bf16) significant
// bits: a relative error of at most 2 x 2^-11 (2 x 2^-8) per gradient, which the learning rate
// (0.01 for trivial) scales to absolute errors of about 1e-5 (1e-4) per step at |gradient| <= 1.
// They are checked under SGD only: Adam divides by sqrt(v), so a tiny gradient rounded to zero
// changes that element's update by up to the learning rate, whatever the transfer's precision.
std::vector<Variant> averaging_variants(bool compact_transfers) {
  std::vector<Variant> variants = {
      {"replicated nccl", replicated("nccl")},
      {"replicated nccl#3", replicated("nccl#3")},
      {"replicated xring", replicated("xring")},
      {"replicated xring#2", replicated("xring#2")},
      {"replicated psgpu", replicated("psgpu")},
      {"replicated pscpu", replicated("pscpu")},
      {"replicated psgpu#2", replicated("psgpu#2")},
      {"replicated nccl, per tensor", replicated("nccl", [](RunConfig& c) { c.bucket_cap_mb = 0; })},
      {"replicated xring, tiny buckets", replicated("xring", [](RunConfig& c) { c.bucket_cap_mb = 0.001; })},
      {"replicated psgpu, repacking 3", replicated("psgpu", [](RunConfig& c) { c.gradient_repacking = 3; })},
      {"replicated nccl, small tensors batched",
       replicated("nccl", [](RunConfig& c) { c.bucket_cap_mb = 0; c.agg_small_grads_max_bytes = 4096; c.agg_small_grads_max_group = 2; })},
      {"replicated nccl, no overlap", replicated("nccl", [](RunConfig& c) { c.overlap_comm = false; })},
      {"replicated xring, no overlap", replicated("xring", [](RunConfig& c) { c.overlap_comm = false; })},
      {"replicated nccl, sharded update", replicated("nccl", [](RunConfig& c) { c.sharded_update = true; })},
      {"replicated nccl#3, sharded update, per tensor",
       replicated("nccl#3", [](RunConfig& c) { c.sharded_update = true; c.bucket_cap_mb = 0; })},
      {"replicated nccl, sharded update, repacking 5, no overlap",
       replicated("nccl", [](RunConfig& c) { c.sharded_update = true; c.gradient_repacking = 5; c.overlap_comm = false; })},
      {"parameter_server gpu", parameter_server("gpu")},
      {"parameter_server gpu, per tensor", parameter_server("gpu", [](RunConfig& c) { c.bucket_cap_mb = 0; })},
      {"parameter_server gpu, no overlap", parameter_server("gpu", [](RunConfig& c) { c.overlap_comm = false; })},
      {"parameter_server cpu", parameter_server("cpu")},
      {"parameter_server cpu, repacking 2", parameter_server("cpu", [](RunConfig& c) { c.gradient_repacking = 2; })},
  };
  for (std::string spec : {"nccl", "psgpu", "pscpu"}) {
    if (!compact_transfers) break;
    variants.push_back({"replicated " + spec + " fp16 transfer",
                        replicated(spec, [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::fp16; }), 2e-3, 5e-5});
    variants.push_back({"replicated " + spec + " bf16 transfer",
                        replicated(spec, [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::bf16; }), 1.6e-2, 4e-4});
  }
  return variants;
}

void check_equivalence(const std::vector<std::string>& model_args, int batch, const std::vector<int>& counts,
                       bool compact_transfers) {
  for (int n : counts) {
    std::vector<std::string> one_device = model_args;
    for (const std::string& flag : std::vector<std::string>{"--num_gpus=1", "--batch_size=" + std::to_string(n * batch), "--num_warmup_batches=1",
                             "--num_batches=2", "--variable_update=independent"})
      one_device.push_back(flag);
    const std::vector<float> want = train(one_device).parameters.front();
    for (const Variant& variant : averaging_variants(compact_transfers)) {
      std::vector<std::string> args = model_args;
      for (const std::string& flag : std::vector<std::string>{"--num_gpus=" + std::to_string(n), "--batch_size=" + std::to_string(batch),
                               "--num_warmup_batches=1", "--num_batches=2"})
        args.push_back(flag);
      INFO(variant.name << " on " << n << " devices");
      const Trained trained = train(args, variant.adjust);
      REQUIRE(trained.parameters.size() == static_cast<size_t>(n));
      check_close(trained.parameters.front(), want, variant.rtol, variant.atol);
      // Replicas apply identical updates to identical values: bit for bit the same.
      for (int r = 1; r < n; ++r) CHECK(trained.parameters[r] == trained.parameters.front());
    }
  }
}

// --sparse_embedding_grads on the nccl spec (the only one it runs on), under the plan options
// that place the tables differently: one bucket holding everything, a range per tensor, repacking
// that cuts the tables into pieces, shards of the dense parts, and no overlap. Tolerances as the dense
// variants': the rows are summed in another order (each replica's pack, scaled by 1/N, in rank
// order), fp32 differences in the last bits.
std::vector<Variant> sparse_variants() {
  auto sparse = [](std::function<void(RunConfig&)> more = {}) {
    return [more](RunConfig& config) {
      config.sparse_embedding_grads = true;
      if (more) more(config);
    };
  };
  return {
      {"replicated nccl, sparse embeddings", replicated("nccl", sparse())},
      {"replicated nccl#3, sparse embeddings", replicated("nccl#3", sparse())},
      {"replicated nccl, per tensor, sparse embeddings",
       replicated("nccl", sparse([](RunConfig& c) { c.bucket_cap_mb = 0; }))},
      // 14 pieces cut the tiny rnnlm's table (1648 parameters, the table last) in three and
      // each table of the tiny nmt (852) in two.
      {"replicated nccl, repacking 14, sparse embeddings",
       replicated("nccl", sparse([](RunConfig& c) { c.gradient_repacking = 14; }))},
      {"replicated nccl, no overlap, sparse embeddings",
       replicated("nccl", sparse([](RunConfig& c) { c.overlap_comm = false; }))},
  };
}

void check_sparse_equivalence(const std::vector<std::string>& model_args, int batch, const std::vector<int>& counts) {
  for (int n : counts) {
    std::vector<std::string> one_device = model_args;
    for (const std::string& flag : std::vector<std::string>{"--num_gpus=1", "--batch_size=" + std::to_string(n * batch),
                                                            "--num_warmup_batches=1", "--num_batches=2",
                                                            "--variable_update=independent"})
      one_device.push_back(flag);
    const std::vector<float> want = train(one_device).parameters.front();
    for (const Variant& variant : sparse_variants()) {
      std::vector<std::string> args = model_args;
      for (const std::string& flag : std::vector<std::string>{"--num_gpus=" + std::to_string(n),
                                                              "--batch_size=" + std::to_string(batch),
                                                              "--num_warmup_batches=1", "--num_batches=2"})
        args.push_back(flag);
      INFO(variant.name << " on " << n << " devices");
      const Trained trained = train(args, variant.adjust);
      REQUIRE(trained.parameters.size() == static_cast<size_t>(n));
      CHECK(trained.comm.at("embedding_exchange") == "sparse");
      check_close(trained.parameters.front(), want, variant.rtol, variant.atol);
      for (int r = 1; r < n; ++r) CHECK(trained.parameters[r] == trained.parameters.front());
    }
  }
}

}  // namespace

TEST_CASE("buckets close once they reach the cap, in readiness order", "[strategies][plan]") {
  // Declared t0..t4; laid out in reverse: t4 at offset 0 (ready first). Sizes in whole
  // alignments (64 elements), so the tensors abut.
  const ParameterLayout layout = layout_of({256, 128, 640, 64, 64});  // bytes: 1024 512 2560 256 256
  ExchangePlanOptions options;
  options.bucket_cap_bytes = 512;
  // Readiness order: t4 (64), t3 (64), t2 (640), t1 (128), t0 (256).
  CHECK(spans(plan_exchanges(layout, options)) ==
        std::vector<std::pair<size_t, size_t>>{{0, 128}, {128, 640}, {768, 128}, {896, 256}});
  options.bucket_cap_bytes = 1 << 20;
  CHECK(spans(plan_exchanges(layout, options)) == std::vector<std::pair<size_t, size_t>>{{0, 1152}});
}

TEST_CASE("a tail bucket holds only the tensors backward produces last", "[strategies][plan]") {
  // Readiness order: t4 (64 floats), t3 (64), t2 (640), t1 (128), t0 (256) at offsets 0, 64, 128,
  // 768, 896.
  const ParameterLayout layout = layout_of({256, 128, 640, 64, 64});
  ExchangePlanOptions options;
  options.bucket_cap_bytes = 3072;  // 768 floats: t4 + t3 + t2 close the first bucket
  // Without a tail the last bucket holds everything after t2 closed the first: t1 and t0.
  CHECK(spans(plan_exchanges(layout, options)) == std::vector<std::pair<size_t, size_t>>{{0, 768}, {768, 384}});
  // A 1 KiB tail is t0 alone (256 floats reach it); the rest is cut as before.
  options.tail_bucket_bytes = 1024;
  CHECK(spans(plan_exchanges(layout, options)) == std::vector<std::pair<size_t, size_t>>{{0, 768}, {768, 128}, {896, 256}});
  // A tail smaller than the last tensor still holds that tensor; one larger takes t1 as well.
  options.tail_bucket_bytes = 4;
  CHECK(spans(plan_exchanges(layout, options)).back() == std::pair<size_t, size_t>{896, 256});
  options.tail_bucket_bytes = 1025;
  CHECK(spans(plan_exchanges(layout, options)) == std::vector<std::pair<size_t, size_t>>{{0, 768}, {768, 384}});
  // A tail as large as the buffer is one bucket.
  options.tail_bucket_bytes = 1 << 20;
  CHECK(spans(plan_exchanges(layout, options)) == std::vector<std::pair<size_t, size_t>>{{0, 1152}});
}

TEST_CASE("exchanges cover the gaps that align the tensors", "[strategies][plan]") {
  // t1 (50) at 0, t0 (100) at 64: t1's exchange takes its extent, so the plan tiles the buffer.
  const ParameterLayout layout = layout_of({100, 50});
  REQUIRE(layout.tensor(0).offset == 64);
  ExchangePlanOptions options;
  options.bucket_cap_bytes = 0;
  CHECK(spans(plan_exchanges(layout, options)) == std::vector<std::pair<size_t, size_t>>{{0, 64}, {64, 100}});
}

TEST_CASE("per-tensor exchanges, with small tensors batched up to a group size", "[strategies][plan]") {
  // Laid out: t5 (8) at 0, t4 (300) at 64, t3 (7) at 384, t2 (6) at 448, t1 (5) at 512, t0 at 576.
  const ParameterLayout layout = layout_of({100, 5, 6, 7, 300, 8});  // ready: t5 t4 t3 t2 t1 t0
  ExchangePlanOptions options;
  options.bucket_cap_bytes = 0;
  CHECK(plan_exchanges(layout, options).size() == 6);
  options.agg_small_max_bytes = 40;  // tensors of at most 10 floats (their own size, not the gap)
  options.agg_small_max_group = 2;
  // t5 alone before the large t4; t3 + t2 grouped; t1 starts a new group; t0 large.
  CHECK(spans(plan_exchanges(layout, options)) ==
        std::vector<std::pair<size_t, size_t>>{{0, 64}, {64, 320}, {384, 128}, {512, 64}, {576, 100}});
}

TEST_CASE("repacking cuts the whole buffer into N nearly equal pieces", "[strategies][plan]") {
  const ParameterLayout layout = layout_of({10});
  ExchangePlanOptions options;
  options.gradient_repacking = 3;
  CHECK(spans(plan_exchanges(layout, options)) == std::vector<std::pair<size_t, size_t>>{{0, 4}, {4, 3}, {7, 3}});
  options.gradient_repacking = 20;  // more pieces than elements: one per element
  CHECK(plan_exchanges(layout, options).size() == 10);
  CHECK(split_range(GradientRange{5, 0}, 3).empty());
}

TEST_CASE("the readiness tracker completes a range when every element was announced", "[strategies][plan]") {
  ReadinessTracker tracker({GradientRange{0, 10}, GradientRange{10, 5}, GradientRange{15, 5}});
  CHECK(tracker.mark_ready(GradientRange{0, 4}).empty());
  CHECK(tracker.mark_ready(GradientRange{4, 8}) == std::vector<size_t>{0});  // spans two ranges
  CHECK(tracker.mark_ready(GradientRange{15, 5}) == std::vector<size_t>{2});  // out of order is fine
  CHECK_FALSE(tracker.all_ready());
  CHECK(tracker.mark_ready(GradientRange{12, 3}) == std::vector<size_t>{1});
  CHECK(tracker.all_ready());
  CHECK_THROWS_AS(tracker.mark_ready(GradientRange{0, 1}), RuntimeError);  // twice in one step
  tracker.begin_step();
  CHECK_FALSE(tracker.all_ready());
}

TEST_CASE("parameter server places the largest tensors first on the least loaded device", "[strategies]") {
  const ParameterLayout layout = layout_of({10, 40, 30, 20, 5});
  const std::vector<int> owner = place_tensors(layout, 2);
  // 40 -> 0, 30 -> 1, 20 -> 1 (30 < 40), 10 -> 0 (40 < 50), 5 -> 0 (50 = 50: lowest index)
  CHECK(owner == std::vector<int>{0, 0, 1, 1, 0});
  CHECK(place_tensors(layout, 1) == std::vector<int>(5, 0));
  // 55 of 105 on device 0; on 4 devices 40 alone is the most; one device owns everything.
  CHECK(largest_owned_share(layout, 2) == Approx(55.0 / 105.0));
  CHECK(largest_owned_share(layout, 4) == Approx(40.0 / 105.0));
  CHECK(largest_owned_share(layout, 1) == Approx(1.0));
}

TEST_CASE("all-reduce specs parse as alg and alg#k", "[strategies]") {
  CHECK(parse_all_reduce_spec("nccl").text() == "nccl");
  CHECK(parse_all_reduce_spec("nccl#1").text() == "nccl");
  CHECK(parse_all_reduce_spec("xring#4").shards == 4);
  CHECK_THROWS_AS(parse_all_reduce_spec("ring"), ConfigError);
  CHECK_THROWS_AS(parse_all_reduce_spec("nccl#0"), ConfigError);
  CHECK_THROWS_AS(parse_all_reduce_spec("nccl#x"), ConfigError);
}

TEST_CASE("every averaging strategy trains trivial as one device with N times the batch",
          "[strategies][equivalence]") {
  check_equivalence({"--model=trivial"}, 2, {1, 2, 4}, true);
}

TEST_CASE("every averaging strategy trains rnnlm (Adam, embeddings) as one device with N times the batch",
          "[strategies][equivalence]") {
  check_equivalence({"--model=rnnlm", "--vocab_size=40", "--embedding_dim=6", "--num_units=8", "--num_layers=2",
                     "--seq_len=4"},
                    3, {2, 4}, false);
}

// Dropout 0: the transformer's sub-layer dropouts place their masks per replica (its
// activations are sequence-major), so with dropout one device and N differ by their masks. SGD:
// the keys' bias has a zero gradient (a softmax ignores a constant added to every score of a
// row), so its gradient is rounding noise, which Adam would scale up to whole steps of either
// sign.
const std::vector<std::string> kTinyTransformer = {"--optimizer=sgd", "--learning_rate=0.1",
    "--model=nmt", "--encoder_type=transformer", "--src_vocab_size=13", "--tgt_vocab_size=11", "--num_units=8",
    "--num_heads=2", "--ffn_units=12", "--num_encoder_layers=2", "--num_decoder_layers=2", "--src_max_len=5",
    "--tgt_max_len=4", "--dropout=0"};

TEST_CASE("every averaging strategy trains the transformer as one device with N times the batch",
          "[strategies][equivalence][transformer]") {
  check_equivalence(kTinyTransformer, 3, {2}, false);
}

// SGD for the reason the transformer's test gives; dropout 0 by default.
const std::vector<std::string> kTinyGpt = {"--optimizer=sgd", "--learning_rate=0.1", "--model=gpt",
                                           "--vocab_size=13", "--seq_len=5", "--num_layers=2",
                                           "--num_heads=2", "--hidden_size=8"};

TEST_CASE("every averaging strategy trains gpt as one device with N times the batch",
          "[strategies][equivalence][gpt]") {
  check_equivalence(kTinyGpt, 3, {2, 4}, false);
}

TEST_CASE("sparse embedding gradients train the transformer as one device with N times the batch",
          "[strategies][equivalence][sparse][transformer]") {
  check_sparse_equivalence(kTinyTransformer, 3, {2});
}

TEST_CASE("sparse embedding gradients train rnnlm as one device with N times the batch",
          "[strategies][equivalence][sparse]") {
  // 40 rows, 12 ids per replica and step: every replica touches a different subset of rows.
  check_sparse_equivalence({"--model=rnnlm", "--vocab_size=40", "--embedding_dim=6", "--num_units=8",
                            "--num_layers=2", "--seq_len=4"},
                           3, {2, 4});
}

TEST_CASE("sparse embedding gradients train a tiny nmt (two tables) as one device with N times the batch",
          "[strategies][equivalence][sparse]") {
  // Source vocabulary 13 with 12 ids per replica, target 11 with 9: the capacity is the ids in
  // one table and nearly the rows in the other. The bidirectional dynamic encoder reads the
  // source table twice (forward and reversed ids).
  check_sparse_equivalence({"--model=nmt", "--src_vocab_size=13", "--tgt_vocab_size=11", "--embedding_dim=5",
                            "--num_units=4", "--num_encoder_layers=2", "--num_decoder_layers=2",
                            "--src_max_len=4", "--tgt_max_len=3", "--loss_chunk_rows=4"},
                           3, {2, 4});
}

TEST_CASE("sparse embedding gradients: the comm section counts the gathered rows", "[strategies][sparse]") {
  const std::vector<std::string> args = {"--model=rnnlm", "--vocab_size=40", "--embedding_dim=6", "--num_units=8",
                                         "--num_layers=2", "--seq_len=4", "--batch_size=3",
                                         "--num_warmup_batches=1", "--num_batches=2"};
  for (int n : {2, 4}) {
    std::vector<std::string> with_devices = args;
    with_devices.push_back("--num_gpus=" + std::to_string(n));
    const Trained trained =
        train(with_devices, replicated("nccl", [](RunConfig& c) { c.sparse_embedding_grads = true; }));
    const nlohmann::json& comm = trained.comm;
    INFO(comm.dump());
    // The table (40, 6); 4 x 3 = 12 ids a step, so 12 rows at most: 12 ids (a multiple of 4
    // already) and 12 x 6 values, 84 floats, from each replica. The rest is all-reduced.
    const double sparse = 84 * 4.0;
    const double dense = 4.0 * (static_cast<double>(trained.parameters.front().size()) - 40 * 6);
    CHECK(comm.at("embedding_exchange") == "sparse");
    CHECK(comm.at("sparse_embedding_tables") == 1);
    CHECK(comm.at("sparse_rows_per_table") == nlohmann::json::array({12}));
    CHECK(comm.at("sparse_bytes_per_step").get<double>() == Approx(sparse));
    CHECK(comm.at("dense_bytes_per_step").get<double>() == Approx(dense));
    CHECK(comm.at("bytes_per_step").get<double>() == Approx(dense + sparse));
    // Ring traffic per device: 2(n-1)/n of the all-reduced bytes, (n-1) packs of the all-gather.
    const double sent = 2.0 * (n - 1) / n * dense + (n - 1) * sparse;
    CHECK(comm.at("bytes_sent_per_device_per_step").get<double>() == Approx(sent));
    CHECK(comm.at("collectives_per_step") == 2);  // one bucket: its dense part, then the table
    CHECK(comm.at("busbw_gbps").get<double>() ==
          Approx(comm.at("algbw_gbps").get<double>() * sent / (dense + sparse)));
  }
  // 14 pieces cut the table (the last 240 of 1648 elements) at 1414 and 1531: the piece holding
  // its start exchanges it once, after all-reducing its dense part [1297, 1408); the two pieces
  // of table alone exchange nothing. 11 + 1 all-reduces and one all-gather.
  std::vector<std::string> repacked = args;
  repacked.push_back("--num_gpus=2");
  const Trained pieces = train(repacked, replicated("nccl", [](RunConfig& c) {
                                 c.sparse_embedding_grads = true;
                                 c.gradient_repacking = 14;
                               }));
  CHECK(pieces.comm.at("exchanges_per_step") == 14);
  CHECK(pieces.comm.at("collectives_per_step") == 13);
  CHECK(pieces.comm.at("sparse_bytes_per_step").get<double>() == Approx(84 * 4.0));
  // Without the flag the table is all-reduced with everything else.
  std::vector<std::string> dense_args = args;
  dense_args.push_back("--num_gpus=2");
  const Trained dense = train(dense_args, replicated("nccl"));
  CHECK(dense.comm.at("embedding_exchange") == "dense");
  CHECK(dense.comm.at("bytes_per_step").get<double>() == Approx(4.0 * dense.parameters.front().size()));
  CHECK_FALSE(dense.comm.contains("sparse_bytes_per_step"));
}

TEST_CASE("sparse embedding gradients run on the nccl spec only", "[strategies][sparse]") {
  // The rule lives in the strategies' descriptions (checked once, before anything is built).
  for (const std::string spec : {"xring", "psgpu", "pscpu#2"}) {
    StrategyOptions options;
    options.all_reduce_spec = spec;
    options.sparse_embedding_grads = true;
    INFO(spec);
    CHECK_THROWS_WITH(find_strategy("replicated")->validate(StrategyRequest{"replicated", options, {}, false, 1}),
                      Catch::Matchers::Contains("--sparse_embedding_grads=true with --all_reduce_spec=" + spec));
  }
}

TEST_CASE("independent replicas drift apart while averaging keeps them together", "[strategies][equivalence]") {
  const std::vector<std::string> args = {"--model=trivial", "--num_gpus=2", "--batch_size=2", "--num_warmup_batches=0",
                                         "--num_batches=2"};
  const Trained independent = train(args);
  CHECK(independent.parameters[0] != independent.parameters[1]);
  const Trained averaged = train(args, replicated("nccl"));
  CHECK(averaged.parameters[0] == averaged.parameters[1]);
}

TEST_CASE("exchange launches are counted by the devices: more pieces launch more", "[strategies][launches]") {
  const std::vector<std::string> args = {"--model=trivial", "--num_gpus=2", "--batch_size=2", "--num_warmup_batches=1",
                                         "--num_batches=2"};
  auto launches = [&](const std::string& spec, int pieces) {
    return train(args, replicated(spec, [pieces](RunConfig& c) { c.gradient_repacking = pieces; }))
        .strategy_launches_per_step;
  };
  const int64_t one = launches("nccl", 1), four = launches("nccl", 4);
  CHECK(one > 0);
  // Each more piece: its transfer clock's start and stop, one all-reduce, and (Note [update by
  // bucket]) the wait clock's start and stop around the compute stream's wait for it, and its update.
  CHECK(four - one == 3 * 6);
  // nccl#2: every piece is two all-reduces.
  CHECK(launches("nccl#2", 4) - four == 4);
  // Our own ring: every piece is copies and reduce kernels of its own.
  CHECK(launches("xring", 4) > launches("xring", 1));
  // A parameter server on the host: one more copy up per piece.
  const auto host = [&](int pieces) {
    return train(args, parameter_server("cpu", [pieces](RunConfig& c) { c.gradient_repacking = pieces; }))
        .strategy_launches_per_step;
  };
  CHECK(host(4) > host(1));
}

TEST_CASE("each range is updated once its exchange is done: the same parameters as one update after all",
          "[strategies][update]") {
  // Note [update by bucket]: rnnlm's Adam over 1 range (the whole update after every exchange) and
  // over 2 and 5 (one update per range, each after its own exchange) gives the same bits.
  const std::vector<std::string> args = {"--model=rnnlm", "--vocab_size=40", "--embedding_dim=6", "--num_units=8",
                                         "--num_layers=2", "--seq_len=4", "--num_gpus=3", "--batch_size=2",
                                         "--num_warmup_batches=1", "--num_batches=3"};
  const auto pieces = [](int count) { return [count](RunConfig& c) { c.gradient_repacking = count; }; };
  const Trained whole = train(args, replicated("nccl", pieces(1)));
  const Trained five = train(args, replicated("nccl", pieces(5)));
  const Trained two = train(args, replicated("nccl", pieces(2)));
  REQUIRE(five.comm["exchanges_per_step"] == 5);
  REQUIRE(two.comm["exchanges_per_step"] == 2);
  for (size_t r = 0; r < whole.parameters.size(); ++r) {
    CHECK(five.parameters[r] == whole.parameters[r]);
    CHECK(two.parameters[r] == whole.parameters[r]);
  }
  // The update moved the parameters (a vacuous equality would pass too).
  std::vector<std::string> one_step = args;
  one_step.back() = "--num_batches=1";
  const Trained fewer = train(one_step, replicated("nccl", pieces(5)));
  CHECK(fewer.parameters[0] != five.parameters[0]);
}

TEST_CASE("fp16's automatic loss scaling updates once, after every exchange", "[strategies][update]") {
  // It looks at every gradient for overflow before any update, so no range can go first: one
  // more piece adds only its transfer clock's start and stop and its all-reduce. A fixed scale
  // updates by range.
  auto launches = [&](bool automatic, int pieces) {
    std::vector<std::string> args = {"--model=cifar10_cnn", "--num_gpus=2", "--batch_size=1", "--num_warmup_batches=1",
                                     "--num_batches=1", "--precision=fp16"};
    if (automatic) args.push_back("--fp16_enable_auto_loss_scale");
    return train(args, replicated("nccl", [pieces](RunConfig& c) { c.gradient_repacking = pieces; }))
        .strategy_launches_per_step;
  };
  CHECK(launches(true, 4) - launches(true, 1) == 3 * 3);
  CHECK(launches(false, 4) - launches(false, 1) == 3 * 6);
}

TEST_CASE("the result's comm section describes the exchange", "[strategies]") {
  const std::vector<std::string> args = {"--model=trivial", "--num_gpus=4", "--batch_size=2", "--num_warmup_batches=1",
                                         "--num_batches=3"};
  const Trained ring = train(args, replicated("xring", [](RunConfig& c) { c.bucket_cap_mb = 0; }));
  CHECK(ring.comm.at("exchange") == "all-reduce (xring)");
  CHECK(ring.comm.at("exchanges_per_step") == 4);  // trivial: two dense layers, weights and biases
  // The whole buffer: the 10-element bias's extent is 64 elements (the next tensor starts aligned).
  CHECK(ring.comm.at("bytes_per_step").get<double>() == Approx(4.0 * (32 * 32 * 3 * 256 + 256 + 256 * 10 + 64)));
  CHECK(ring.comm.at("bytes_sent_per_device_per_step").get<double>() ==
        Approx(1.5 * ring.comm.at("bytes_per_step").get<double>()));
  CHECK(ring.comm.at("transfer_ms_per_step").get<double>() > 0);
  CHECK(ring.comm.at("exposed_comm_ms_per_step").get<double>() >= 0);
  CHECK(ring.comm.at("busbw_gbps").get<double>() == Approx(1.5 * ring.comm.at("algbw_gbps").get<double>()));
  CHECK(ring.comm.at("embedding_exchange") == "dense");
  const Trained host = train(args, parameter_server("cpu"));
  CHECK(host.comm.at("exchange") == "parameter server on the host");
  CHECK(host.comm.at("transfer_type") == "fp32");
  const Trained compact = train(args, replicated("psgpu", [](RunConfig& c) { c.compact_gradient_transfer = TransferWidth::bf16; }));
  CHECK(compact.comm.at("transfer_type") == "bf16");
  CHECK(compact.comm.at("bytes_sent_per_device_per_step").get<double>() ==
        Approx(0.75 * compact.comm.at("bytes_per_step").get<double>()));
}

}  // namespace dpbench
