// SparseRows (see the header).
#include "strategies/exchange_methods/sparse_rows.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "engine/errors.h"

namespace dpbench {

// Per replica, sized for the largest table and shared by all of them (a replica's sparse
// exchanges run one after another on its communication stream).
struct SparseRows::Buffers {
  Buffer touched;    // int32 (ids): the distinct rows a step touched, ascending
  Buffer count;      // int32 (1): how many; stays on the device
  Buffer workspace;  // embedding_touched_rows' scratch
  Buffer pack;       // this replica's pack: pack_ids int32 ids, then (capacity, dim) values
  Buffer gathered;   // every replica's pack, rank after rank
};

SparseRows::SparseRows() : CommunicatorExchange(1) {}

SparseRows::~SparseRows() = default;

void SparseRows::allocate(size_t /*largest*/) {
  check_tables();
  // A step touches at most min(ids, rows) distinct rows: the fixed size every pack has, so that
  // the host never needs the step's actual count.
  for (const SparseGradientSource& table : tables_)
    capacity_.push_back(std::min(table.num_ids, static_cast<size_t>(table.rows)));
  size_t most_ids = 1, most_pack = 1;
  for (size_t t = 0; t < tables_.size(); ++t) {
    most_ids = std::max(most_ids, tables_[t].num_ids);
    most_pack = std::max(most_pack, pack_floats(t));
  }
  for (const Replica& replica : context().replicas) {
    Device& device = *replica.device;
    device.make_current();
    size_t workspace = 1;
    for (const SparseGradientSource& table : tables_)
      workspace = std::max(workspace, device.ops().embedding_touched_rows_workspace_bytes(table.num_ids, table.rows));
    auto buffers = std::make_unique<Buffers>();
    const MemoryTag exchange_buffers{MemoryCategory::communication, "sparse rows"};
    buffers->touched = device.allocate(most_ids * sizeof(int32_t), exchange_buffers);
    buffers->count = device.allocate(sizeof(int32_t), exchange_buffers);
    buffers->workspace = device.allocate(workspace, exchange_buffers);
    buffers->pack = device.allocate(most_pack * sizeof(float), exchange_buffers);
    buffers->gathered = device.allocate(world_size() * most_pack * sizeof(float), exchange_buffers);
    // The ids' padding (up to a multiple of 4) is never written again: keep it row 0.
    device.ops().fill(buffers->pack.as<float>(), most_pack, 0.0f);
    buffers_.push_back(std::move(buffers));
  }
}

void SparseRows::check_tables() {
  const Replica& first = context().replicas.front();
  tables_ = first.sparse;
  if (tables_.empty())
    throw ConfigError("--sparse_embedding_grads: the model has no embedding tables to exchange sparsely; "
                      "drop --sparse_embedding_grads");
  auto same_table = [](const SparseGradientSource& a, const SparseGradientSource& b) {
    return a.range.offset == b.range.offset && a.range.count == b.range.count && a.rows == b.rows &&
           a.dim == b.dim && a.num_ids == b.num_ids;
  };
  for (const Replica& replica : context().replicas) {
    const std::vector<SparseGradientSource>& tables = replica.sparse;
    if (tables.size() != tables_.size() || !std::equal(tables.begin(), tables.end(), tables_.begin(), same_table))
      throw RuntimeError("--sparse_embedding_grads: replica " + std::to_string(replica.index) +
                         " reports other embedding tables than replica 0");
  }
  // The tables by offset: they must lie inside the buffer, without overlapping.
  by_offset_.resize(tables_.size());
  std::iota(by_offset_.begin(), by_offset_.end(), size_t{0});
  std::sort(by_offset_.begin(), by_offset_.end(),
            [&](size_t a, size_t b) { return tables_[a].range.offset < tables_[b].range.offset; });
  size_t previous_end = 0;
  for (size_t t : by_offset_) {
    const SparseGradientSource& table = tables_[t];
    if (table.rows <= 0 || table.dim <= 0 ||
        table.range.count != static_cast<size_t>(table.rows) * static_cast<size_t>(table.dim) ||
        table.range.offset < previous_end || table.range.end() > first.parameters->count())
      throw RuntimeError("--sparse_embedding_grads: embedding table " + std::to_string(t) + " at [" +
                         std::to_string(table.range.offset) + ", " + std::to_string(table.range.end()) +
                         ") is not a (rows, dim) range of its own inside the gradient buffer");
    previous_end = table.range.end();
  }
}

std::vector<RangeParts> SparseRows::plan_parts(const std::vector<GradientRange>& plan) const {
  std::vector<RangeParts> planned;
  std::vector<bool> assigned(tables_.size(), false);
  for (const GradientRange& range : plan) {
    RangeParts parts;
    size_t cursor = range.offset;  // first element not yet covered
    for (size_t t : by_offset_) {
      const GradientRange table = tables_[t].range;
      if (table.end() <= range.offset || table.offset >= range.end()) continue;
      if (table.offset > cursor) parts.dense.push_back(GradientRange{cursor, table.offset - cursor});
      cursor = std::max(cursor, std::min(table.end(), range.end()));
      if (!assigned[t]) parts.tables.push_back(table);
      assigned[t] = true;
    }
    if (cursor < range.end()) parts.dense.push_back(GradientRange{cursor, range.end() - cursor});
    planned.push_back(parts);
  }
  return planned;
}

size_t SparseRows::table_at(GradientRange range) const {
  for (size_t t = 0; t < tables_.size(); ++t)
    if (tables_[t].range.offset == range.offset && tables_[t].range.count == range.count) return t;
  throw RuntimeError("--sparse_embedding_grads: [" + std::to_string(range.offset) + ", " +
                     std::to_string(range.end()) + ") is not an embedding table");
}

size_t SparseRows::pack_ids(size_t table) const { return (capacity_[table] + 3) / 4 * 4; }

size_t SparseRows::pack_floats(size_t table) const {
  const size_t values = capacity_[table] * static_cast<size_t>(tables_[table].dim);
  return pack_ids(table) + (values + 3) / 4 * 4;  // every rank's pack starts 16-byte aligned too
}

// One table, on the communication stream, nothing read back by the host (capturable):
//   touched rows -> pack (ids, values / N) at the capacity -> all-gather of the packs ->
//   zeroed table gradient += every rank's pack, rank by rank.
// Rows only some replicas touched get the others' zeros implicitly, so the result is the dense
// mean. Within one rank's pack the rows are distinct (the padding adds zeros to row 0), so even
// the GPU's atomic scatter-add sums each element in rank order: every replica computes the same
// bits.
void SparseRows::exchange_shard(int replica, GradientRange range) {
  const size_t table_index = table_at(range);
  const Replica& self = replica_at(replica);
  const SparseGradientSource& table = self.sparse[table_index];  // this replica's ids
  Buffers& buffers = *buffers_[replica];
  Backend& ops = self.device->ops(StreamKind::communication);
  const size_t n = world_size();
  const size_t capacity = capacity_[table_index];
  const size_t ids = pack_ids(table_index), floats = pack_floats(table_index);
  float* gradient = self.parameters->gradients() + table.range.offset;  // (rows, dim)
  int32_t* touched = buffers.touched.as<int32_t>();
  int32_t* count = buffers.count.as<int32_t>();
  float* pack = buffers.pack.as<float>();
  float* gathered = buffers.gathered.as<float>();
  if (capacity > 0) {
    ops.embedding_touched_rows(table.ids, table.num_ids, table.rows, touched, count, buffers.workspace.data());
    ops.gather_rows(gradient, table.dim, touched, count, capacity, reinterpret_cast<int32_t*>(pack), pack + ids);
    ops.scale(pack + ids, capacity * static_cast<size_t>(table.dim), 1.0f / static_cast<float>(n));
    // The int32 ids ride in an fp32 all-gather as bit patterns: an all-gather copies bytes and
    // does no arithmetic, so they arrive unchanged.
    communicator().all_gather(replica, pack, gathered, floats, DataType::f32, StreamKind::communication);
  }
  ops.fill(gradient, table.range.count, 0.0f);
  for (size_t rank = 0; rank < n && capacity > 0; ++rank) {
    const float* block = gathered + rank * floats;
    ops.embedding_backward(reinterpret_cast<const int32_t*>(block), block + ids, capacity, table.dim, gradient);
  }
}

// G bytes of pack each replica contributes (ids and values at the capacity, fp32 whatever
// --compact_gradient_transfer says) to one all-gather of the job's packs, N x G as nccl-tests
// counts it. `table` must be one of the tables prepare found.
RangeSchedule SparseRows::schedule(GradientRange table, const ScheduleShape& shape) const {
  RangeSchedule schedule;
  schedule.message_bytes = static_cast<double>(pack_floats(table_at(table))) * sizeof(float);
  schedule.steps.push_back(collective_step(Collective::all_gather, shape.world * schedule.message_bytes, shape.world));
  return schedule;
}

// With the dense method's all-reduce: one busbw for both is their traffic over the transfer time.
std::string SparseRows::busbw_formula() const {
  return "all-reduce of D dense bytes + all-gather of G bytes from each replica (dense_bytes_per_step, "
         "sparse_bytes_per_step): busbw = (2(n-1)/n x D + (n-1) x G) / transfer time, the per-device ring "
         "traffic in fp32 bytes (each collective's nccl-tests busbw); algbw = (D + G) / transfer time";
}

void SparseRows::add_details(nlohmann::json& details) const {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t capacity : capacity_) rows.push_back(capacity);  // min(ids per step, rows)
  details["sparse_embedding_tables"] = tables_.size();
  details["sparse_rows_per_table"] = rows;
  details["sparse_transfer_type"] = "fp32";
}

}  // namespace dpbench
