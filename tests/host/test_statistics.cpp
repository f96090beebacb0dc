// Statistics of the measurement protocol against hand-computed values, checked with Python's
// statistics.quantiles(method="inclusive"), which is numpy's default 'linear' method.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "reports/statistics.h"

using dpbench::DistributionStats;

TEST_CASE("summarize 1..10", "[statistics]") {
  const std::vector<double> samples = {7, 3, 10, 1, 5, 2, 9, 4, 8, 6};  // unsorted on purpose
  const DistributionStats stats = dpbench::summarize(samples);
  CHECK(stats.count == 10);
  CHECK(stats.mean == Approx(5.5));
  CHECK(stats.median == Approx(5.5));
  // sqrt(82.5 / 9)
  CHECK(stats.stddev == Approx(3.0276503540974917));
  CHECK(stats.min == 1.0);
  CHECK(stats.max == 10.0);
  // rank (n - 1) * p / 100 = 0.45 and 8.55
  CHECK(stats.p5 == Approx(1.45));
  CHECK(stats.p95 == Approx(9.55));
}

TEST_CASE("summarize two samples and an odd count", "[statistics]") {
  const DistributionStats two = dpbench::summarize({2.0, 4.0});
  CHECK(two.count == 2);
  CHECK(two.mean == Approx(3.0));
  CHECK(two.median == Approx(3.0));
  CHECK(two.stddev == Approx(std::sqrt(2.0)));
  CHECK(two.p5 == Approx(2.1));
  CHECK(two.p95 == Approx(3.9));

  const DistributionStats odd = dpbench::summarize({1, 2, 3, 4, 100});
  CHECK(odd.median == Approx(3.0));
  CHECK(odd.mean == Approx(22.0));
  // deviations -21 -20 -19 -18 78: squares sum to 7610; / 4
  CHECK(odd.stddev == Approx(std::sqrt(1902.5)));
  // rank 0.2 -> 1.2; rank 3.8 -> 4 + 0.8 * 96
  CHECK(odd.p5 == Approx(1.2));
  CHECK(odd.p95 == Approx(80.8));
}

TEST_CASE("summarize of identical samples has zero spread", "[statistics]") {
  const DistributionStats stats = dpbench::summarize({5, 5, 5});
  CHECK(stats.stddev == 0.0);
  CHECK(stats.p5 == 5.0);
  CHECK(stats.p95 == 5.0);
  CHECK(dpbench::jitter({5, 5, 5}) == 0.0);
}

TEST_CASE("median and percentile", "[statistics]") {
  CHECK(dpbench::median({3, 1, 2}) == 2.0);
  CHECK(dpbench::median({4, 1, 3, 2}) == Approx(2.5));
  CHECK(dpbench::median({42}) == 42.0);
  const std::vector<double> samples = {10, 20, 30, 40};
  CHECK(dpbench::percentile(samples, 0) == 10.0);
  CHECK(dpbench::percentile(samples, 100) == 40.0);
  CHECK(dpbench::percentile(samples, 25) == Approx(17.5));  // rank 0.75
  CHECK(dpbench::percentile(samples, 90) == Approx(37.0));  // rank 2.7
  CHECK_THROWS_AS(dpbench::percentile(samples, -1), std::invalid_argument);
  CHECK_THROWS_AS(dpbench::percentile(samples, 100.5), std::invalid_argument);
  CHECK_THROWS_AS(dpbench::percentile(samples, std::nan("")), std::invalid_argument);
  CHECK_THROWS_AS(dpbench::percentile({}, 50), std::invalid_argument);
  CHECK_THROWS_AS(dpbench::median({}), std::invalid_argument);
}

TEST_CASE("jitter is 1.4826 x median absolute deviation", "[statistics]") {
  // median 3; |x - 3| = 2 1 0 1 97 -> median 1: the outlier does not move it
  CHECK(dpbench::jitter({1, 2, 3, 4, 100}) == Approx(1.4826));
  // median 5.5; |x - 5.5| = 0.5 0.5 1.5 1.5 ... 4.5 4.5 -> median 2.5
  CHECK(dpbench::jitter({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) == Approx(1.4826 * 2.5));
  // median 15; deviations 5 5 -> 5
  CHECK(dpbench::jitter({10, 20}) == Approx(1.4826 * 5));
}

TEST_CASE("speed_uncertainty is the standard error of the mean", "[statistics]") {
  CHECK(dpbench::speed_uncertainty({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) ==
        Approx(3.0276503540974917 / std::sqrt(10.0)));
  CHECK(dpbench::speed_uncertainty({}) == 0.0);
  CHECK(dpbench::speed_uncertainty({123.0}) == 0.0);
}

TEST_CASE("no aggregate from fewer than 2 samples", "[statistics]") {
  CHECK_THROWS_AS(dpbench::summarize({}), std::invalid_argument);
  CHECK_THROWS_WITH(dpbench::summarize({1.0}),
                    Catch::Contains("no aggregate from fewer than 2 samples"));
  CHECK_THROWS_AS(dpbench::jitter({}), std::invalid_argument);
  CHECK_THROWS_WITH(dpbench::jitter({1.0}),
                    Catch::Contains("no aggregate from fewer than 2 samples"));
}

TEST_CASE("NaN samples are refused rather than sorted", "[statistics]") {
  CHECK_THROWS_AS(dpbench::summarize({1.0, std::nan(""), 3.0}), std::invalid_argument);
  CHECK_THROWS_AS(dpbench::jitter({1.0, std::nan("")}), std::invalid_argument);
}
