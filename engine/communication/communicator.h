// Communicator: collectives among the replicas of one process, one rank per device, each call
// enqueued on a stream of the calling rank's device. Two implementations: NCCL (cuda backend,
// one communicator per GPU from ncclCommInitAll) and an in-process one for the reference backend
// (the ranks' threads meet in host memory and sum in a fixed rank order, so results do not depend
// on thread timing).
//
// Rules, as NCCL's: every rank issues the same collectives in the same order, each from its own
// device thread; buffers are device memory of the calling rank (host memory on reference); counts
// are in elements of `type`. A call returns once the work is enqueued (on reference: once done).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/data_type.h"

namespace dpbench {

enum class ReduceOp { sum, average };

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int size() const = 0;
  // "nccl 2.28.3" or "in-process", for the result.
  virtual std::string description() const = 0;
  // True when the calls can be recorded into a CUDA graph (Device::capture) and replayed.
  virtual bool capturable() const = 0;

  // recv[i] = op over ranks of send[i], on every rank. send may equal recv (in place).
  virtual void all_reduce(int rank, const void* send, void* recv, size_t count, DataType type,
                          ReduceOp op, StreamKind stream) = 0;
  // Rank `root` gets op over ranks of send in recv; recv is ignored on the other ranks.
  virtual void reduce(int rank, const void* send, void* recv, size_t count, DataType type,
                      ReduceOp op, int root, StreamKind stream) = 0;
  // recv = root's send on every rank (root's send may equal its recv).
  virtual void broadcast(int rank, const void* send, void* recv, size_t count, DataType type,
                         int root, StreamKind stream) = 0;
  // recv (recv_count) = op over ranks of send[rank * recv_count, (rank + 1) * recv_count); send
  // holds size() * recv_count elements.
  virtual void reduce_scatter(int rank, const void* send, void* recv, size_t recv_count,
                              DataType type, ReduceOp op, StreamKind stream) = 0;
  // recv[r * send_count, (r + 1) * send_count) = rank r's send, for every r.
  virtual void all_gather(int rank, const void* send, void* recv, size_t send_count, DataType type,
                          StreamKind stream) = 0;
  // recv[r * chunk_count, (r + 1) * chunk_count) = rank r's send[rank * chunk_count, ...): every
  // rank sends its r-th chunk to rank r. send and recv hold size() * chunk_count elements each
  // and must not overlap.
  virtual void all_to_all(int rank, const void* send, void* recv, size_t chunk_count, DataType type,
                          StreamKind stream) = 0;

  // Calls of one rank between group_start and group_end are issued together (ncclGroupStart/End:
  // one launch, no ordering deadlock between collectives with different roots). Groups do not
  // nest. No-ops where calls already run one by one (reference).
  virtual void group_start(int rank) {}
  virtual void group_end(int rank) {}

  // Another rank failed: ranks blocked in (or later entering) a host-side rendezvous throw
  // RuntimeError instead of waiting forever. Callable from any thread.
  virtual void abort() {}
};

// Wraps `inner` so that each collective counts itself as work enqueued on the calling rank's
// device and stream (Note [counted launches] in engine/backend/device.h); `devices` by rank.
// engine/backends.cpp hands every communicator out wrapped.
std::unique_ptr<Communicator> counting_communicator(std::unique_ptr<Communicator> inner, std::vector<Device*> devices);

// Note [NCCL in replayed steps]
// Where a run replays its steps as CUDA graphs, NCCL's collectives sit inside them. By default
// NCCL supports mixing such graphs with parallel graphs or eager calls on the same communicator
// (NCCL_GRAPH_MIXING_SUPPORT=1: NCCL's source puts an event-wait node before and an event-record
// node after each captured call, chaining them to its uncaptured work through one event), and
// that support slows the whole graph, not only the exchange: on 4 H200, ResNet-50 b128 bf16's
// forward pass, which runs no collective, took 0.09 to 0.15 ms longer than on one GPU with it and
// 0 to 0.06 ms longer without it; the step was 0.4 to 1.0% faster without it
// (docs/BENCHMARKS.md, "NCCL's graph-mixing support"). A run never mixes: every
// collective belongs to a step, the steps before the capture run eagerly before any graph is
// launched, and after it each device's graphs follow one another on its compute stream, each
// device driven by its own thread. So a run that replays graphs turns the support off (unless
// NCCL_GRAPH_MIXING_SUPPORT is set already: the user's value stands), before any communicator
// exists; results record it with the other NCCL_ variables (environment.variables).
void prepare_collectives_for_replayed_steps();

}  // namespace dpbench
