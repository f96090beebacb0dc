// Where the replicated strategy's exchange methods are chosen: the dense one from
// --all_reduce_spec and its options (one table entry per method), the sparse rows for embedding
// tables with --sparse_embedding_grads.
#pragma once

#include <memory>

#include "strategies/all_reduce_spec.h"
#include "strategies/exchange_methods/exchange_method.h"
#include "strategies/exchange_methods/sparse_rows.h"
#include "strategies/strategy_options.h"

namespace dpbench {

// fp16 | bf16 from --compact_gradient_transfer; f32 for none.
DataType compact_transfer_type(const StrategyOptions& options);

// The method that exchanges the dense ranges. Throws ConfigError where no method takes the
// combination.
std::unique_ptr<ExchangeMethod> choose_dense_exchange(const AllReduceSpec& spec, const StrategyOptions& options);

// The method for the embedding tables: sparse rows with --sparse_embedding_grads (nccl spec
// only), else none (the tables travel with the dense ranges).
std::unique_ptr<SparseRows> choose_embedding_exchange(const AllReduceSpec& spec, const StrategyOptions& options);

}  // namespace dpbench
