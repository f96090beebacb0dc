// The exchange methods' table (see the header). A new method is its own unit in this folder plus
// one entry here; the first entry that takes the spec and options wins.
#include "strategies/exchange_methods/exchange_methods.h"

#include <functional>
#include <vector>

#include "engine/errors.h"
#include "strategies/exchange_methods/compact_transfer.h"
#include "strategies/exchange_methods/dense_all_reduce.h"
#include "strategies/exchange_methods/hierarchical_all_reduce.h"
#include "strategies/exchange_methods/peer_all_reduce.h"
#include "strategies/exchange_methods/sharded_update.h"
#include "strategies/exchange_methods/sparse_rows.h"

namespace dpbench {
namespace {

struct MethodEntry {
  std::function<bool(const AllReduceSpec&, const StrategyOptions&)> takes;
  std::function<std::unique_ptr<ExchangeMethod>(const AllReduceSpec&, const StrategyOptions&)> create;
};

bool on_nccl(const AllReduceSpec& spec) { return spec.algorithm == AllReduceAlgorithm::nccl; }

const std::vector<MethodEntry>& dense_methods() {
  static const std::vector<MethodEntry> entries = {
      {[](const AllReduceSpec& spec, const StrategyOptions& options) {
         return on_nccl(spec) && options.hierarchical_all_reduce;
       },
       [](const AllReduceSpec& spec, const StrategyOptions&) { return std::make_unique<HierarchicalAllReduce>(spec); }},
      {[](const AllReduceSpec& spec, const StrategyOptions& options) {
         return on_nccl(spec) && options.sharded_update;
       },
       [](const AllReduceSpec& spec, const StrategyOptions&) { return std::make_unique<ShardedUpdate>(spec); }},
      {[](const AllReduceSpec& spec, const StrategyOptions& options) {
         return on_nccl(spec) && compact_transfer_type(options) != DataType::f32;
       },
       [](const AllReduceSpec& spec, const StrategyOptions& options) {
         return std::make_unique<CompactTransfer>(spec, compact_transfer_type(options));
       }},
      {[](const AllReduceSpec& spec, const StrategyOptions&) { return on_nccl(spec); },
       [](const AllReduceSpec& spec, const StrategyOptions&) { return std::make_unique<DenseAllReduce>(spec); }},
      {[](const AllReduceSpec& spec, const StrategyOptions&) { return !on_nccl(spec); },
       [](const AllReduceSpec& spec, const StrategyOptions& options) {
         return std::make_unique<PeerAllReduce>(spec, compact_transfer_type(options));
       }},
  };
  return entries;
}

}  // namespace

DataType compact_transfer_type(const StrategyOptions& options) {
  switch (options.compact_gradient_transfer) {
    case TransferWidth::fp16: return DataType::f16;
    case TransferWidth::bf16: return DataType::bf16;
    case TransferWidth::full: break;
  }
  return DataType::f32;
}

std::unique_ptr<ExchangeMethod> choose_dense_exchange(const AllReduceSpec& spec, const StrategyOptions& options) {
  for (const MethodEntry& entry : dense_methods())
    if (entry.takes(spec, options)) return entry.create(spec, options);
  throw ConfigError("--all_reduce_spec=" + spec.text() + ": no exchange method takes it");
}

std::unique_ptr<SparseRows> choose_embedding_exchange(const AllReduceSpec& spec, const StrategyOptions& options) {
  if (!options.sparse_embedding_grads) return nullptr;
  // Only with the nccl spec (the strategy's rules refuse the others, strategy_registry.cpp): the
  // touched rows travel by the communicator's all-gather.
  return std::make_unique<SparseRows>();
}

}  // namespace dpbench
