// The collectives `dpbench comm_bench` measures, each as nccl-tests sizes, issues and checks it:
// the buffer shapes of one size, the call on a Communicator, inputs that make every result exact,
// the check of a result. The harness (cli/comm_bench_command.cpp) times them. The collectives, their
// names and bus factors are engine/communication/collective_traffic.h's (`benchmarked` marks the ones measured
// here, in --op's order); one it does not measure yet is marked there and gets a case in each
// switch here.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/communication/collective_traffic.h"
#include "engine/communication/communicator.h"
#include "engine/data_type.h"

namespace dpbench {

// Buffer shapes of one measured size (nccl-tests' getCollByteCount): the call's count argument,
// the elements each rank sends and receives, and the size the table reports.
struct BenchShape {
  size_t count = 0;
  size_t send_elements = 0;
  size_t recv_elements = 0;
  size_t size_bytes = 0;
};

BenchShape shape_of(Collective collective, size_t bytes, int ranks, DataType type);

// The sizes measured on `ranks` ranks: doubling from `min_bytes` up to `max_bytes`, each rounded to
// what one call moves (shape_of's size_bytes), ascending, none twice. The smallest may exceed
// `max_bytes` where that is less than one call moves.
std::vector<size_t> measured_sizes(Collective collective, size_t min_bytes, size_t max_bytes, int ranks,
                                   DataType type);

// `rank` is the one the communicator is called with (this process's device).
void issue(Communicator& comm, Collective collective, int rank, const void* send, void* recv,
           const BenchShape& shape, DataType type, StreamKind stream);

// Fills rank `rank`'s (of the whole collective) send buffer of `elements` with its inputs.
void fill_inputs(Device& device, void* send, size_t elements, DataType type, int rank);

// Empty when `recv` holds what the collective must produce on `rank` (of `ranks`), else the first
// difference.
std::string check_result(Device& device, const void* recv, Collective collective, int ranks, int rank,
                         const BenchShape& shape, DataType type);

}  // namespace dpbench
