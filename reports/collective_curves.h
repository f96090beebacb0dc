// Measured collective curves for `dpbench predict --curves`: each a `dpbench comm_bench --json`
// file, one collective on one rank count over one link kind, whose rows give bus bandwidth
// against message size. They become a MeasuredCurveCost (reports/step_prediction.h), with the
// system file's formulas for whatever no curve covers; what came from where is worded here for
// the report.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/step_prediction.h"

namespace dpbench {

struct CollectiveCurve {
  std::string path;
  Collective op = Collective::all_reduce;
  LinkKind link = LinkKind::intra_host;
  bool link_recorded = true;  // false: a comm_bench from before "link", which ran in one process
  int ranks = 0;
  int hosts = 1;
  std::string backend;       // "cuda", "reference"
  std::string communicator;  // "nccl 2.28.9", "in-process"
  std::string data_type;     // "fp32"
  std::vector<MeasuredCurveCost::Point> points;  // by ascending size, busbw > 0
};

using CurveMap = MeasuredCurveCost::Curves;

// Throws RuntimeError "predict: curve file '<path>': <what is wrong>; <the fix>" (escaped: no
// control byte of the file's) for a document that is not comm_bench output, names an unknown
// collective, has a rank or host count no measurement has (fewer than 2 ranks, more hosts than
// ranks), or has no usable rows (a size missing or not whole bytes from 1 to 2^53, a bus
// bandwidth missing, not positive or past any link's, a size repeated). The largest size
// comm_bench measures is the caller's to check (reports know no flag's limits).
CollectiveCurve parse_collective_curve(const nlohmann::json& document, const std::string& path);
// The file at `path`, read and parsed; the same errors, and one for a file that cannot be read, is
// not JSON or holds a number no double holds (1e400).
CollectiveCurve load_collective_curve(const std::string& path);

// The curves by (collective, link) and rank count. Throws RuntimeError naming both files where two
// measure the same collective over the same link kind on the same number of ranks.
CurveMap curves_by_collective(const std::vector<CollectiveCurve>& curves);

// In words, for the report: "all_reduce intra_host: `c.json`, 2 ranks on 1 host (reference,
// in-process, fp32), 1 KB to 16 MB".
std::string describe_curve(const CollectiveCurve& curve);
// "4 KB", "16 MB", "1 GB" (powers of 2; exact bytes where the size is not a whole unit).
std::string format_byte_size(double bytes);

// Which collective and link costs the prediction took from the system file: every (op, link)
// that no curve covers, as "reduce_scatter intra_host"; host copies always.
std::vector<std::string> costs_from_system_file(const std::vector<CollectiveCurve>& curves);

}  // namespace dpbench
