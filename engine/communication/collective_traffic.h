// The bus-bandwidth factor of each collective, as nccl-tests defines it: the one place that
// knows 2(n-1)/n and (n-1)/n. The comm benchmark, the strategies' traffic models and their
// exchange methods all read it from here.
#pragma once

namespace dpbench {

enum class Collective { all_reduce, reduce_scatter, all_gather, all_to_all, reduce, broadcast };

// busbw = algbw x collective_bus_factor(collective, ranks), where algbw = size / time and `size`
// is the buffer nccl-tests reports: the whole buffer for all_reduce, reduce and broadcast, the
// whole gathered (scattered, exchanged) buffer of n chunks for the others. busbw is then the rate
// the busiest link carries under an optimal algorithm, so one figure compares rank counts with
// each other and with the link's peak:
// - all_reduce: an optimal all-reduce is a reduce-scatter followed by an all-gather; in each,
//   every rank sends and receives the (n-1)/n of the buffer it does not own: 2(n-1)/n in all.
// - reduce_scatter, all_gather, all_to_all: every rank sends (receives) the n-1 chunks it does
//   not own, (n-1)/n of size.
// - reduce, broadcast: a pipelined chain moves each byte over each link once: 1.
// Bytes a device sends under such an algorithm are size x the factor as well.
inline double collective_bus_factor(Collective collective, int ranks) {
  const double n = ranks;
  if (ranks <= 0) return 0.0;
  switch (collective) {
    case Collective::all_reduce: return 2.0 * (n - 1) / n;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all: return (n - 1) / n;
    case Collective::reduce:
    case Collective::broadcast: return 1.0;
  }
  return 1.0;
}

}  // namespace dpbench
