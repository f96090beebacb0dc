// Token embeddings of the sequence models, and their synthetic token data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/training/model.h"
#include "engine/training/parameter_set.h"

namespace dpbench {

class EmbeddingTable {
 public:
  // Declares "<name>/table" (vocab, dim).
  EmbeddingTable(ParameterLayout& layout, const std::string& name, int vocab, int dim);
  int vocab() const { return vocab_; }
  int dim() const { return dim_; }
  int table_id() const { return table_id_; }
  GradientRange gradient_range(const ParameterLayout& layout) const {
    return layout.range_of(table_id_, table_id_);
  }
  // The table as a strategy sees it for a sparse exchange, indexed by `ids` (num_ids): its own
  // (vocab, dim) elements, without the gap that aligns the next tensor.
  SparseGradientSource sparse_source(const ParameterLayout& layout, const int32_t* ids,
                                     size_t num_ids) const {
    const TensorView& table = layout.tensor(table_id_);
    return SparseGradientSource{GradientRange{table.offset, table.count}, vocab_, dim_, ids, num_ids};
  }
  // Uniform in [-0.1, 0.1], as TensorFlow's NMT initialised every variable.
  void initialize(const ParameterLayout& layout, uint64_t seed, std::vector<float>& host_params) const;

  // y (n, dim; of `type`) = rows of the table picked by ids (n); a 16-bit y gathers from the
  // 16-bit weight copy.
  void forward(Backend& ops, const ParameterSet& params, const int32_t* ids, size_t n, DataType type,
               void* y) const;
  // The table's (fp32) gradient = the scatter-add of dy (n, dim; of `type`) over ids; zeroes it
  // first when `first` (a table read twice adds its second gradient to the first).
  void backward(Backend& ops, const ParameterSet& params, const int32_t* ids, size_t n, DataType type,
                const void* dy, bool first) const;

 private:
  int vocab_, dim_, table_id_;
};

// Synthetic tokens (T, B), sequence-major, in [0, vocab): token t of global sample s is the
// counter-random value at index t * global_batch + s, so a sample's tokens do not depend on
// which replica trains it. `reversed` stores time step T-1-t at row t (what a backward-in-time
// encoder reads).
void fill_sequence_tokens(Backend& ops, int32_t* ids, int seq_len, const ReplicaShard& shard,
                          uint64_t stream, int vocab, bool reversed = false);

}  // namespace dpbench
