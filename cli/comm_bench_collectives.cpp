// The collectives of `dpbench comm_bench` (see comm_bench_collectives.h).
#include "cli/comm_bench_collectives.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>


namespace dpbench {
namespace {

// Rank r's input element i: 1..4. Any sum over up to 64 ranks stays an integer <= 256, exact in
// fp32, fp16 and bf16 at every step, so the check below compares exactly.
float input_value(int rank, size_t index) { return static_cast<float>(1 + (static_cast<size_t>(rank) + index) % 4); }

// What element `index` of rank `rank`'s recv must hold. `sums[k]` is the sum over ranks of an
// element whose index is k modulo 4 (input_value repeats every 4), so no loop over ranks here.
float expected_value(Collective collective, int rank, const BenchShape& shape, const float (&sums)[4], size_t index) {
  switch (collective) {
    case Collective::all_reduce: return sums[index % 4];
    case Collective::broadcast: return input_value(0, index);
    case Collective::all_gather: return input_value(static_cast<int>(index / shape.count), index % shape.count);
    case Collective::reduce_scatter: return sums[(static_cast<size_t>(rank) * shape.count + index) % 4];
    case Collective::reduce: return sums[index % 4];  // on the root; check_result skips the others
    default: break;  // not measured (collective_table's `benchmarked`)
  }
  return 0;
}

constexpr size_t kStagingElements = size_t{1} << 22;  // host staging for fills and checks

}  // namespace

BenchShape shape_of(Collective collective, size_t bytes, int ranks, DataType type) {
  const size_t element_bytes = data_type_bytes(type);
  const size_t n = static_cast<size_t>(ranks);
  BenchShape shape;
  switch (collective) {
    case Collective::all_reduce:
    case Collective::reduce:
    case Collective::broadcast:
      shape.count = std::max<size_t>(1, bytes / element_bytes);
      shape.send_elements = shape.recv_elements = shape.count;
      shape.size_bytes = shape.count * element_bytes;
      break;
    case Collective::all_gather:
    case Collective::reduce_scatter: {
      // The size is the whole gathered (or scattered) buffer; each rank owns one n-th of it.
      shape.count = std::max<size_t>(1, bytes / element_bytes / n);
      const bool gather = collective == Collective::all_gather;
      shape.send_elements = gather ? shape.count : shape.count * n;
      shape.recv_elements = gather ? shape.count * n : shape.count;
      shape.size_bytes = shape.count * n * element_bytes;
      break;
    }
    default: throw std::logic_error(std::string("comm_bench does not measure ") + collective_name(collective));
  }
  return shape;
}

std::vector<size_t> measured_sizes(Collective collective, size_t min_bytes, size_t max_bytes, int ranks,
                                   DataType type) {
  std::vector<size_t> sizes;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    // Whole elements, and for a gather or scatter whole elements per rank: below one element per
    // rank several sizes round to the same one (3, 6 and 12 bytes of a 3-rank fp32 reduce_scatter
    // are all 12), measured once.
    const size_t moved = shape_of(collective, bytes, ranks, type).size_bytes;
    if (sizes.empty() || moved != sizes.back()) sizes.push_back(moved);
    if (bytes > max_bytes / 2) break;  // the next doubling would pass max_bytes (or overflow)
  }
  return sizes;
}

void issue(Communicator& comm, Collective collective, int rank, const void* send, void* recv,
           const BenchShape& shape, DataType type, StreamKind stream) {
  switch (collective) {
    case Collective::all_reduce:
      comm.all_reduce(rank, send, recv, shape.count, type, ReduceOp::sum, stream);
      break;
    case Collective::all_gather: comm.all_gather(rank, send, recv, shape.count, type, stream); break;
    case Collective::reduce_scatter:
      comm.reduce_scatter(rank, send, recv, shape.count, type, ReduceOp::sum, stream);
      break;
    case Collective::reduce: comm.reduce(rank, send, recv, shape.count, type, ReduceOp::sum, 0, stream); break;
    case Collective::broadcast: comm.broadcast(rank, send, recv, shape.count, type, 0, stream); break;
    default: throw std::logic_error(std::string("comm_bench does not measure ") + collective_name(collective));
  }
}

void fill_inputs(Device& device, void* send, size_t elements, DataType type, int rank) {
  const size_t element_bytes = data_type_bytes(type);
  std::vector<unsigned char> staging(std::min(elements, kStagingElements) * element_bytes);
  for (size_t first = 0; first < elements; first += kStagingElements) {
    const size_t n = std::min(kStagingElements, elements - first);
    for (size_t i = 0; i < n; ++i) store_from_float(type, staging.data(), i, input_value(rank, first + i));
    device.copy_from_host(static_cast<unsigned char*>(send) + first * element_bytes, staging.data(), n * element_bytes);
  }
}

std::string check_result(Device& device, const void* recv, Collective collective, int ranks, int rank,
                         const BenchShape& shape, DataType type) {
  // A reduce defines only the root's result (nccl-tests checks the root alone too).
  if (collective == Collective::reduce && rank != 0) return "";
  float sums[4] = {0, 0, 0, 0};
  for (size_t k = 0; k < 4; ++k) {
    for (int r = 0; r < ranks; ++r) sums[k] += input_value(r, k);
  }
  const size_t element_bytes = data_type_bytes(type);
  std::vector<unsigned char> staging(std::min(shape.recv_elements, kStagingElements) * element_bytes);
  for (size_t first = 0; first < shape.recv_elements; first += kStagingElements) {
    const size_t n = std::min(kStagingElements, shape.recv_elements - first);
    device.copy_to_host(staging.data(), static_cast<const unsigned char*>(recv) + first * element_bytes, n * element_bytes);
    for (size_t i = 0; i < n; ++i) {
      const float got = load_as_float(type, staging.data(), i);
      const float expected = round_to(type, expected_value(collective, rank, shape, sums, first + i));
      if (got != expected) {
        char text[200];
        std::snprintf(text, sizeof text, "rank %d element %zu is %g, expected %g", rank, first + i, got, expected);
        return text;
      }
    }
  }
  return "";
}

}  // namespace dpbench
