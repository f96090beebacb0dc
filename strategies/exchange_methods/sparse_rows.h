// --sparse_embedding_grads: an embedding table's gradient travels as the rows the step touched
// instead of the dense table. Each replica lists its touched rows, packs their ids and values at
// a fixed capacity, all-gathers the packs and scatter-adds them into a zeroed table gradient,
// rank by rank (the same order everywhere, so replicas stay bit-identical). The strategy gives
// this method the tables and the dense method the rest of each range (plan_parts).
#pragma once

#include <memory>

#include "strategies/exchange_methods/exchange_method.h"

namespace dpbench {

// What exchanging a planned range means once the tables are taken out: the parts exchanged
// densely, and the tables' ranges exchanged as rows. A table cut by the plan is exchanged with
// the first range holding part of it (each of them completes only after the model announced the
// whole table).
struct RangeParts {
  std::vector<GradientRange> dense;
  std::vector<GradientRange> tables;
};

class SparseRows final : public CommunicatorExchange {
 public:
  SparseRows();
  ~SparseRows() override;
  std::string description() const override { return "embedding rows all-gathered"; }
  // Needs prepare (the tables' capacities); `table` is one table's whole range.
  RangeSchedule schedule(GradientRange table, const ScheduleShape& shape) const override;
  std::string busbw_formula() const override;
  void add_details(nlohmann::json& details) const override;

  // After prepare: every planned range cut into its dense parts and the tables it exchanges.
  std::vector<RangeParts> plan_parts(const std::vector<GradientRange>& plan) const;

 protected:
  // Checks the replicas' tables (the same everywhere, each a (rows, dim) range of its own).
  void allocate(size_t largest) override;
  // `table` is one table's whole range, as plan_parts gives it.
  void exchange_shard(int replica, GradientRange table) override;

 private:
  struct Buffers;
  void check_tables();
  size_t table_at(GradientRange range) const;
  // Elements of one replica's pack of table `table`: the row ids (as many as the capacity,
  // padded to a multiple of 4 so the values start 16-byte aligned), then capacity x dim values
  // (padded likewise, so that every rank's pack in the gathered buffer is aligned as well).
  size_t pack_ids(size_t table) const;
  size_t pack_floats(size_t table) const;

  std::vector<SparseGradientSource> tables_;  // replica 0's; the same on every replica
  std::vector<size_t> by_offset_;             // table indices by offset
  std::vector<size_t> capacity_;              // per table: min(ids, rows)
  std::vector<std::unique_ptr<Buffers>> buffers_;  // per replica
};

}  // namespace dpbench
