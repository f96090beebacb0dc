// The collectives dpbench issues, described once: one `Collective` type and its one table (the
// name every command spells it by: comm_bench's --op and its curves' "op", the in-process
// communicator's messages, predict's costs; whether comm_bench measures it), and beside it the
// bus-bandwidth factors as nccl-tests defines them: the one place that knows 2(n-1)/n and
// (n-1)/n. The comm benchmark, the exchange methods' schedules (engine/communication/collective_schedule.h) and
// their prediction all read them from here.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dpbench {

// The communicator's collectives (engine/communication/communicator.h), then the copies of our own that some
// exchanges use instead (the peer algorithms, the parameter server on the host): a schedule
// names those too, so that one type describes everything an exchange moves.
enum class Collective {
  all_reduce,
  reduce_scatter,
  all_gather,
  all_to_all,
  reduce,
  broadcast,
  peer_copy,       // one device copies a chunk from another's memory
  copy_to_host,    // one device copies into host memory
  copy_from_host,  // one device copies from host memory
};

struct CollectiveDescription {
  Collective collective;
  const char* name;   // "all_reduce": comm_bench's --op, its curves' "op"
  bool benchmarked;   // `dpbench comm_bench --op` measures it (and predict reads its curves)
};

// Every collective, in the enum's order (the order lists of them follow: comm_bench's --op,
// predict's costs).
inline const std::vector<CollectiveDescription>& collective_table() {
  static const std::vector<CollectiveDescription> table = {
      {Collective::all_reduce, "all_reduce", true},
      {Collective::reduce_scatter, "reduce_scatter", true},
      {Collective::all_gather, "all_gather", true},
      {Collective::all_to_all, "all_to_all", false},
      {Collective::reduce, "reduce", true},
      {Collective::broadcast, "broadcast", true},
      {Collective::peer_copy, "peer_copy", false},
      {Collective::copy_to_host, "copy_to_host", false},
      {Collective::copy_from_host, "copy_from_host", false},
  };
  return table;
}

inline const char* collective_name(Collective collective) {
  for (const CollectiveDescription& entry : collective_table())
    if (entry.collective == collective) return entry.name;
  return "?";
}

inline std::optional<Collective> collective_named(const std::string& name) {
  for (const CollectiveDescription& entry : collective_table())
    if (name == entry.name) return entry.collective;
  return std::nullopt;
}

// The ones `dpbench comm_bench` measures, in the table's order.
inline std::vector<Collective> benchmarked_collectives() {
  std::vector<Collective> measured;
  for (const CollectiveDescription& entry : collective_table())
    if (entry.benchmarked) measured.push_back(entry.collective);
  return measured;
}

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
// - a copy (peer, to or from the host) moves each byte over one link once: 1.
inline double collective_bus_factor(Collective collective, int ranks) {
  const double n = ranks;
  if (ranks <= 0) return 0.0;
  switch (collective) {
    case Collective::all_reduce: return 2.0 * (n - 1) / n;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all: return (n - 1) / n;
    case Collective::reduce:
    case Collective::broadcast:
    case Collective::peer_copy:
    case Collective::copy_to_host:
    case Collective::copy_from_host: return 1.0;
  }
  return 1.0;
}

// The bytes one rank sends, on average over the ranks, per byte of `size` (as above), under the
// algorithms the bus factors assume: the ring's for all_reduce, reduce_scatter, all_gather and
// all_to_all (the bus factor); a chain for reduce and broadcast, where every rank but one sends
// the buffer once ((n-1)/n on average); a copy is sent by the device that issues it, except one
// from the host (that device receives it).
inline double collective_send_factor(Collective collective, int ranks) {
  const double n = ranks;
  if (ranks <= 0) return 0.0;
  switch (collective) {
    case Collective::reduce:
    case Collective::broadcast: return (n - 1) / n;
    case Collective::copy_from_host: return 0.0;
    default: return collective_bus_factor(collective, ranks);
  }
}

}  // namespace dpbench
