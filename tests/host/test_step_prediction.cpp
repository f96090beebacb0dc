// The step simulation of `dpbench predict` (reports/step_prediction.h) against hand-computed
// cases: the alpha-beta formulas, overlap hidden and exposed, tree against ring, the hierarchical
// two levels, the parameter servers, measured curves, compute slowed beside transfers, and the shape of
// the predictions. Each case
// prices the schedule the strategies' table publishes for the configuration predict names so.
#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

#include "engine/training/parameter_set.h"
#include "reports/step_prediction.h"
#include "strategies/strategy_registry.h"

namespace dpbench {
namespace {

// 1 GB/s and 10 us inside a host, 8 GPUs per host sharing 4 GB/s and 100 us across hosts: round
// numbers, so 1e6 bytes take 1 ms at 1 GB/s.
SystemModel round_system(CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring) {
  SystemModel system;
  system.name = "round numbers";
  system.gpus_per_host = 8;
  system.intra_host = {1.0, 10.0};
  system.inter_host = {4.0, 100.0};
  system.host_copy = {0.5, 5.0};
  system.algorithm = algorithm;
  return system;
}

// One bucket of `bytes` ready at `ready_ms` of a 10 ms backward, in a 20 ms step with a 2 ms update.
MeasuredStep one_bucket(double bytes, double ready_ms) {
  MeasuredStep step;
  step.step_ms = 20;
  step.backward_ms = 10;
  step.update_ms = 2;
  step.buckets = {{bytes, ready_ms}};
  return step;
}

// The labels of predict's rows, the strategies' table's (strategy_registry.h).
const char* const kReplicated = "replicated (nccl)";
const char* const kNoOverlap = "replicated (nccl, no overlap)";
const char* const kFp16Transfer = "replicated (nccl, fp16 transfer)";
const char* const kSharded = "replicated (nccl, sharded update)";
const char* const kHierarchical = "distributed_all_reduce (nccl, hierarchical)";
const char* const kServerOnGpus = "parameter_server (gpu)";
const char* const kServerOnHost = "parameter_server (cpu)";

// The predicted configuration `label` names, with its schedule from the strategies' table for
// `step`'s buckets on `gpus` GPUs of `system`: each bucket one tensor, or the tensors (elements)
// `tensors` gives per bucket.
StepPrediction predict(const MeasuredStep& step, const std::string& label, int gpus, const SystemModel& system,
                       const CollectiveCost& cost, const std::vector<std::vector<size_t>>& tensors = {}) {
  std::vector<std::vector<size_t>> sizes = tensors;
  if (sizes.empty())
    for (const BucketReady& bucket : step.buckets) sizes.push_back({static_cast<size_t>(bucket.bytes / sizeof(float))});
  std::vector<GradientRange> plan;
  std::vector<size_t> in_order;
  for (const std::vector<size_t>& bucket : sizes) {
    const size_t count = std::accumulate(bucket.begin(), bucket.end(), size_t{0});
    plan.push_back({plan.empty() ? 0 : plan.back().end(), count});
    in_order.insert(in_order.end(), bucket.begin(), bucket.end());
  }
  ParameterLayout layout;  // laid out in reverse declaration order: the last declared first
  for (auto size = in_order.rbegin(); size != in_order.rend(); ++size)
    layout.declare("tensor", {static_cast<int64_t>(*size)});
  layout.finalize();
  for (const PredictedVariant& variant : predicted_variants()) {
    const StrategyEntry& entry = *find_strategy(variant.strategy);
    const StrategyOptions options = options_of(variant);
    if (strategy_label(entry.name, recorded_options(entry.name, options), false) != label) continue;
    return predict_step(step, entry.schedule(options, layout, plan, shape_on(system, gpus), ParameterUnits{}), gpus, system, cost);
  }
  FAIL("no predicted configuration is labelled " << label);
  return {};
}

}  // namespace

TEST_CASE("ring all-reduce follows the alpha-beta formula at 2 4 and 8 ranks", "[predict]") {
  const AlphaBetaCost cost(round_system());
  // 2(n-1) x 10 us + 2(n-1)/n x 1e6 bytes / 1 GB/s
  CHECK(cost.collective_ms(Collective::all_reduce, 1e6, 2, LinkKind::intra_host) == Approx(0.02 + 1.0));
  CHECK(cost.collective_ms(Collective::all_reduce, 1e6, 4, LinkKind::intra_host) == Approx(0.06 + 1.5));
  CHECK(cost.collective_ms(Collective::all_reduce, 1e6, 8, LinkKind::intra_host) == Approx(0.14 + 1.75));
  CHECK(cost.collective_ms(Collective::reduce_scatter, 1e6, 4, LinkKind::intra_host) == Approx(0.03 + 0.75));
  CHECK(cost.collective_ms(Collective::broadcast, 1e6, 4, LinkKind::intra_host) == Approx(0.03 + 1.0));
  CHECK(cost.collective_ms(Collective::all_reduce, 1e6, 1, LinkKind::intra_host) == 0);
}

TEST_CASE("across hosts a collective has the host's whole network and pays the network latency", "[predict]") {
  const AlphaBetaCost cost(round_system());
  // 16 ranks: 30 steps of 100 us; each host sends 2 x 15/16 x 1e6 bytes through its 4 GB/s.
  CHECK(cost.collective_ms(Collective::all_reduce, 1e6, 16, LinkKind::inter_host) == Approx(3.0 + 0.46875));
}

TEST_CASE("tree all-reduce pays log2 n latencies where the ring pays 2(n-1)", "[predict]") {
  const AlphaBetaCost ring(round_system(CollectiveAlgorithm::ring));
  const AlphaBetaCost tree(round_system(CollectiveAlgorithm::tree));
  CHECK(tree.collective_ms(Collective::all_reduce, 1e6, 8, LinkKind::intra_host) == Approx(0.06 + 1.75));
  // Small messages: latency decides, and the tree wins; at 2 ranks both take 2 steps.
  CHECK(tree.collective_ms(Collective::all_reduce, 1e3, 64, LinkKind::inter_host) <
        ring.collective_ms(Collective::all_reduce, 1e3, 64, LinkKind::inter_host));
  CHECK(tree.collective_ms(Collective::all_reduce, 1e6, 2, LinkKind::intra_host) ==
        Approx(ring.collective_ms(Collective::all_reduce, 1e6, 2, LinkKind::intra_host)));
}

TEST_CASE("one GPU predicts the measured step for every strategy", "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  for (const std::string& strategy : predicted_variant_labels()) {
    const StepPrediction one = predict(one_bucket(1e6, 5), strategy, 1, system, cost);
    CHECK(one.modelled);
    CHECK(one.step_ms == 20);
    CHECK(one.exposed_comm_ms == 0);
  }
}

TEST_CASE("a bucket whose all-reduce ends before backward does is hidden", "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  // Ready at 5 ms, 1.02 ms on 2 GPUs: done at 6.02, backward ends at 10.
  const StepPrediction hidden = predict(one_bucket(1e6, 5), kReplicated, 2, system, cost);
  CHECK(hidden.step_ms == Approx(20));
  CHECK(hidden.exposed_comm_ms == 0);
  CHECK(hidden.comm_ms == Approx(1.02));
  // Ready at 9.5 ms: ends at 10.52, 0.52 ms after backward.
  const StepPrediction exposed = predict(one_bucket(1e6, 9.5), kReplicated, 2, system, cost);
  CHECK(exposed.exposed_comm_ms == Approx(0.52));
  CHECK(exposed.step_ms == Approx(20.52));
  // Without overlap the whole all-reduce follows backward.
  const StepPrediction waits =
      predict(one_bucket(1e6, 5), kNoOverlap, 2, system, cost);
  CHECK(waits.exposed_comm_ms == Approx(1.02));
}

TEST_CASE("buckets queue on the communication stream", "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  MeasuredStep step = one_bucket(1e6, 1);
  step.buckets.push_back({1e6, 1.5});  // waits for the first: 1 -> 2.02 -> 3.04
  step.buckets.push_back({1e6, 9.9});  // starts at 9.9, ends at 10.92
  step.update_waits_for_every_exchange = true;  // the update after the last exchange: 0.92 ms exposed
  const StepPrediction queued = predict(step, kReplicated, 2, system, cost);
  CHECK(queued.comm_ms == Approx(3 * 1.02));
  CHECK(queued.exposed_comm_ms == Approx(0.92));
  CHECK(queued.step_ms == Approx(20.92));
}

TEST_CASE("each bucket's update follows its own exchange, hiding the last ones behind the first updates",
          "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  // Three buckets as above: exchanges end at 2.02, 3.04 and 10.92; the 2 ms update is 2/3 ms each.
  // After backward (10): the first two updates end at 11.33, the third waits for nothing.
  MeasuredStep step = one_bucket(1e6, 1);
  step.buckets.push_back({1e6, 1.5});
  step.buckets.push_back({1e6, 9.9});
  const StepPrediction hidden = predict(step, kReplicated, 2, system, cost);
  CHECK(hidden.exposed_comm_ms == Approx(0));
  CHECK(hidden.step_ms == Approx(20));
  // A last bucket of 3e6 bytes (of 5e6): its exchange ends at 9.9 + 3.02 = 12.92, after the first
  // updates (0.4 ms each, to 10.8); its own 1.2 ms then ends at 14.12, 2.12 ms over backward and
  // the 2 ms update, where the update after every exchange would expose 2.92.
  step.buckets.back().bytes = 3e6;
  const StepPrediction partly = predict(step, kReplicated, 2, system, cost);
  CHECK(partly.exposed_comm_ms == Approx(2.12));
  CHECK(partly.step_ms == Approx(22.12));
  step.update_waits_for_every_exchange = true;
  CHECK(predict(step, kReplicated, 2, system, cost).exposed_comm_ms == Approx(2.92));
  // The parameter server's owners update after every reduce: no update by bucket there.
  step.update_waits_for_every_exchange = false;
  const StepPrediction owners = predict(step, kServerOnGpus, 2, system, cost);
  CHECK(owners.exposed_comm_ms > 2.92);
}

TEST_CASE("where communication runs on the compute thread every transfer lengthens the step", "[predict]") {
  SystemModel system = round_system();
  system.communication_overlaps_compute = false;
  const AlphaBetaCost cost(system);
  const StepPrediction inline_comm = predict(one_bucket(1e6, 5), kReplicated, 2, system, cost);
  CHECK(inline_comm.exposed_comm_ms == Approx(1.02));
  CHECK(inline_comm.step_ms == Approx(21.02));
}

TEST_CASE("fp16 transfer halves the bytes of each all-reduce", "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  const StepPrediction half =
      predict(one_bucket(1e6, 9.5), kFp16Transfer, 2, system, cost);
  CHECK(half.comm_ms == Approx(0.02 + 0.5));
}

TEST_CASE("sharded update splits the update and moves it into the exchange", "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  // 4 GPUs, ready at 9 ms: reduce-scatter 0.78, update 2/4 = 0.5, all-gather 0.78: ends at 11.06.
  const StepPrediction sharded =
      predict(one_bucket(1e6, 9), kSharded, 4, system, cost);
  CHECK(sharded.exposed_comm_ms == Approx(1.06));
  CHECK(sharded.step_ms == Approx(20 - 2 + 1.06));
}

TEST_CASE("hierarchical all-reduce is two levels across hosts and flat inside one", "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  const StepPrediction inside = predict(one_bucket(1e6, 10), kHierarchical, 8, system, cost);
  CHECK(inside.comm_ms == Approx(cost.collective_ms(Collective::all_reduce, 1e6, 8, LinkKind::intra_host)));
  // 16 GPUs on 2 hosts: reduce-scatter in the host (7 x 10 us + 7/8 ms), the 8 GPUs' all-reduces
  // of 1/8 over 2 hosts at once, one all-reduce of the bucket through the host's 4 GB/s (2 x 100
  // us + 2 x 1/2 x 1e6 bytes), all-gather in the host.
  const double expected = (0.07 + 0.875) + (0.2 + 0.25) + (0.07 + 0.875);
  const StepPrediction two_hosts = predict(one_bucket(1e6, 10), kHierarchical, 16, system, cost);
  CHECK(two_hosts.comm_ms == Approx(expected));
  CHECK(two_hosts.exposed_comm_ms == Approx(expected));
  // Cheaper than the flat ring across hosts, whose every step crosses the network.
  const StepPrediction flat = predict(one_bucket(1e6, 10), kReplicated, 16, system, cost);
  CHECK(two_hosts.step_ms < flat.step_ms);
}

TEST_CASE("parameter servers reduce during backward and send the parameters back after the update", "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  // GPU: reduce hidden (ready at 1 ms); the bucket's one tensor has one owner, whose whole 2 ms
  // update the others wait for; broadcast 0.03 + 1 ms after it.
  const StepPrediction gpu = predict(one_bucket(1e6, 1), kServerOnGpus, 4, system, cost);
  CHECK(gpu.exposed_comm_ms == Approx(1.03));
  CHECK(gpu.step_ms == Approx(20 - 2 + 2 + 1.03));
  // Four tensors of about a quarter each (all but the last a whole number of alignments): four
  // owners update at once, the largest's share (62608 of 250000) setting the pace; each owner's
  // run is reduced and broadcast by itself, 4 x (0.03 + its bytes) after the update.
  const StepPrediction quarters =
      predict(one_bucket(1e6, 1), kServerOnGpus, 4, system, cost, {{62464, 62464, 62464, 62608}});
  CHECK(quarters.exposed_comm_ms == Approx(4 * 0.03 + 1.0));
  CHECK(quarters.step_ms == Approx(20 - 2 + 2 * 62608.0 / 250000 + 4 * 0.03 + 1.0));
  // Host: 5 us + 2 ms up (hidden) and the same down.
  const StepPrediction host = predict(one_bucket(1e6, 1), kServerOnHost, 4, system, cost);
  CHECK(host.exposed_comm_ms == Approx(2.005));
  // Owners unevenly loaded: of two tensors on 4 GPUs, the one with half the parameters updates
  // half of them, 1 ms.
  CHECK(predict(one_bucket(1e6, 1), kServerOnGpus, 4, system, cost, {{124992, 125008}}).step_ms ==
        Approx(20 - 2 + 2 * 125008.0 / 250000 + 2 * 0.03 + 1.0));
  const StepPrediction over_hosts =
      predict(one_bucket(1e6, 1), kServerOnHost, 16, system, cost);
  CHECK_FALSE(over_hosts.modelled);
  CHECK(over_hosts.why_not.find("one host") != std::string::npos);
}

TEST_CASE("predicted steps never shrink as GPUs are added", "[predict]") {
  const SystemModel system = round_system();
  const AlphaBetaCost cost(system);
  MeasuredStep step = one_bucket(4e6, 6);
  step.buckets.push_back({2e6, 9});
  step.buckets.push_back({1e5, 10});
  for (const std::string& strategy : predicted_variant_labels()) {
    if (strategy == kServerOnGpus) continue;  // its update shrinks with N
    double previous = 0;
    for (int gpus : predicted_gpu_counts(1024)) {
      const StepPrediction prediction = predict(step, strategy, gpus, system, cost);
      if (!prediction.modelled) continue;
      CHECK(prediction.step_ms >= previous - 1e-9);
      previous = prediction.step_ms;
    }
  }
}

TEST_CASE("measured curves price a collective by its bus bandwidth at that size", "[predict]") {
  const SystemModel system = round_system();
  auto formulas = std::make_shared<AlphaBetaCost>(system);
  // 2 GB/s at 1 MB, 8 GB/s at 4 MB: 2 MB sits halfway in log2(size), 5 GB/s.
  const MeasuredCurveCost curves({{{Collective::all_reduce, LinkKind::intra_host}, {{2, {{1e6, 2.0}, {4e6, 8.0}}}}}},
                                 formulas);
  CHECK(curves.collective_ms(Collective::all_reduce, 2e6, 2, LinkKind::intra_host) == Approx(2e6 * 1.0 / 5e6));
  CHECK(curves.collective_ms(Collective::all_reduce, 16e6, 4, LinkKind::intra_host) == Approx(16e6 * 1.5 / 8e6));
  // Below the smallest size: the smallest size's time (latency-bound).
  CHECK(curves.collective_ms(Collective::all_reduce, 10, 2, LinkKind::intra_host) == Approx(1e6 / 2e6));
  // No curve for the network: the formulas.
  CHECK(curves.collective_ms(Collective::all_reduce, 1e6, 16, LinkKind::inter_host) ==
        Approx(formulas->collective_ms(Collective::all_reduce, 1e6, 16, LinkKind::inter_host)));
}

TEST_CASE("predicted GPU counts double up to the largest", "[predict]") {
  CHECK(predicted_gpu_counts(1) == std::vector<int>{1});
  CHECK(predicted_gpu_counts(8) == std::vector<int>{1, 2, 4, 8});
  CHECK(predicted_gpu_counts(12) == std::vector<int>{1, 2, 4, 8, 12});
  CHECK(predicted_gpu_counts(1024).back() == 1024);
}

}  // namespace dpbench

namespace dpbench {

// Note [compute beside communication]: while a transfer runs, compute progresses at 1 / (1 + s).
TEST_CASE("a transfer beside backward slows it by what backward could not do beside it", "[predict]") {
  SystemModel system = round_system();
  system.compute_slowdown_beside_communication = 0.5;
  const AlphaBetaCost cost(system);
  // Ready at 5 ms, 1.02 ms on 2 GPUs, wholly inside backward: backward does 1.02 / 1.5 = 0.68 ms
  // of its work beside it, so it ends 1.02 - 0.68 = 0.34 ms late (s / (1 + s) of the transfer).
  const StepPrediction inside = predict(one_bucket(1e6, 5), kReplicated, 2, system, cost);
  CHECK(inside.exposed_comm_ms == Approx(0.34));
  CHECK(inside.step_ms == Approx(20.34));
  CHECK(inside.comm_ms == Approx(1.02));
  // Ready at 9.5 ms: backward's last 0.5 ms take 0.75 beside it, ending at 10.25, before the
  // transfer does (10.52): the slowdown is capped by the overlap, the transfer exposed as before.
  const StepPrediction capped = predict(one_bucket(1e6, 9.5), kReplicated, 2, system, cost);
  CHECK(capped.exposed_comm_ms == Approx(0.52));
  // Without overlap nothing runs beside anything: as without a slowdown.
  CHECK(predict(one_bucket(1e6, 5), kNoOverlap, 2, system, cost).exposed_comm_ms == Approx(1.02));
  SystemModel on_compute_thread = system;
  on_compute_thread.communication_overlaps_compute = false;
  CHECK(predict(one_bucket(1e6, 5), kReplicated, 2, on_compute_thread, AlphaBetaCost(on_compute_thread))
            .exposed_comm_ms == Approx(1.02));
}

TEST_CASE("a transfer that slows backward delays the buckets after it", "[predict]") {
  SystemModel system = round_system();
  system.compute_slowdown_beside_communication = 0.5;
  const AlphaBetaCost cost(system);
  // The first bucket's transfer runs 1 to 2.02 ms, where backward reaches 1 + 0.68 = 1.68 ms of its
  // work; the second bucket (9.9 ms of work) is ready 0.34 ms late, at 10.24, and its transfer
  // ends at 11.26. Backward's last 0.1 ms runs beside it (0.15 ms), ending at 10.39: the update
  // after every exchange waits for 11.26, 1.26 ms past the 1-GPU backward (0.92 unslowed).
  MeasuredStep step = one_bucket(1e6, 1);
  step.buckets.push_back({1e6, 9.9});
  step.update_waits_for_every_exchange = true;
  const StepPrediction delayed = predict(step, kReplicated, 2, system, cost);
  CHECK(delayed.exposed_comm_ms == Approx(1.26));
  CHECK(delayed.step_ms == Approx(21.26));
  system.compute_slowdown_beside_communication = 0;
  CHECK(predict(step, kReplicated, 2, system, AlphaBetaCost(system)).exposed_comm_ms == Approx(0.92));
}

TEST_CASE("measured curves give compute's slowdown beside a collective where they measured it", "[predict]") {
  SystemModel system = round_system();
  system.compute_slowdown_beside_communication = 0.05;
  auto formulas = std::make_shared<AlphaBetaCost>(system);
  // 10% at 1 MB, 30% at 4 MB: 2 MB sits halfway in log2(size), 20%; held at the ends.
  const MeasuredCurveCost curves(
      {{{Collective::all_gather, LinkKind::intra_host}, {{2, {{1e6, 2.0, 0.1}, {4e6, 8.0, 0.3}}}}},
       {{Collective::all_reduce, LinkKind::intra_host}, {{2, {{1e6, 2.0}, {4e6, 8.0}}}}}},
      formulas);
  CHECK(curves.compute_slowdown(Collective::all_gather, 2e6, 2, LinkKind::intra_host) == Approx(0.2));
  CHECK(curves.compute_slowdown(Collective::all_gather, 10, 2, LinkKind::intra_host) == Approx(0.1));
  CHECK(curves.compute_slowdown(Collective::all_gather, 64e6, 4, LinkKind::intra_host) == Approx(0.3));
  // A curve measured without --beside_compute, or none: the system file's.
  CHECK(curves.compute_slowdown(Collective::all_reduce, 2e6, 2, LinkKind::intra_host) == 0.05);
  CHECK(curves.compute_slowdown(Collective::all_gather, 2e6, 16, LinkKind::inter_host) == 0.05);
}

}  // namespace dpbench
