// Measured collective curves (see collective_curves.h).
#include "reports/collective_curves.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <tuple>

#include "engine/errors.h"
#include "engine/machine/text_content.h"
#include "reports/result_json.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

using json = nlohmann::json;

constexpr LinkKind kAllLinks[] = {LinkKind::intra_host, LinkKind::inter_host};
const char* const kHowToMeasure = "write one with dpbench comm_bench --op=all_reduce --json FILE";
// A petabyte per second: a thousand times the fastest link there is. More is an edited file.
constexpr double kMaxBusbwGbPerS = 1e6;
// Sizes are whole bytes that a double holds exactly (and the report prints as integers).
constexpr double kMaxExactBytes = 9007199254740992.0;  // 2^53
constexpr int kMaxCurveRanks = 1 << 24;
// A system file's compute_slowdown_beside_communication is below it too.
constexpr double kMaxSlowdown = 5;

// The whole line escaped: it may quote the file (a name, a link kind).
[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw RuntimeError(escaped_value("predict: curve file '" + path + "': " + why));
}

std::string string_at(const json& object, const char* key) {
  return object.is_object() && object.contains(key) && object.at(key).is_string() ? object.at(key).get<std::string>()
                                                                                   : "";
}

// The whole number from 1 to kMaxCurveRanks at `key`; 0 where there is none, and a refusal
// naming `field` where there is something else.
int count_at(const json& object, const char* key, const std::string& field, const std::string& path) {
  if (!object.is_object() || !object.contains(key)) return 0;
  const json& value = object.at(key);
  const bool whole = value.is_number_integer() &&
                     !(value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(kMaxCurveRanks));
  if (!whole || value.get<int64_t>() < 1 || value.get<int64_t>() > kMaxCurveRanks)
    fail(path, field + " is " + escaped_value(value.dump(), kQuotedExcerptBytes) + "; expected a whole number from 1 to " +
                   std::to_string(kMaxCurveRanks) + ": give the file comm_bench wrote, unedited");
  return static_cast<int>(value.get<int64_t>());
}

// The collectives comm_bench measures (engine/communication/collective_traffic.h's table): the ones a curve can be of.
Collective op_named(const std::string& name, const std::string& path) {
  std::string accepted;
  for (Collective op : benchmarked_collectives()) {
    if (name == collective_name(op)) return op;
    accepted += (accepted.empty() ? "" : ", ") + std::string(collective_name(op));
  }
  fail(path, "config.op '" + name + "' is no collective dpbench predicts with; accepted: " + accepted);
}

std::vector<MeasuredCurveCost::Point> points_of(const json& rows, const std::string& path) {
  if (!rows.is_array() || rows.empty())
    fail(path, "no rows (sizes measured); rerun dpbench comm_bench with --json");
  std::vector<MeasuredCurveCost::Point> points;
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    const std::string where = "row " + std::to_string(i) + " ";
    if (!row.is_object() || !row.contains("size_bytes") || !row.contains("busbw_gbps") ||
        !row.at("size_bytes").is_number() || !row.at("busbw_gbps").is_number())
      fail(path, where + "has no numeric size_bytes and busbw_gbps; give the file comm_bench wrote, unedited");
    const double bytes = row.at("size_bytes").get<double>(), busbw = row.at("busbw_gbps").get<double>();
    if (!row.at("size_bytes").is_number_integer() || !(bytes >= 1) || !(bytes <= kMaxExactBytes))
      fail(path, where + "has size_bytes " + row.at("size_bytes").dump() + "; sizes are whole bytes from 1 to 2^53");
    // A time too short for the clock reads as 0 GB/s, which would make the collective free.
    if (!(busbw > 0) || !std::isfinite(busbw))
      fail(path, where + "(" + row.at("size_bytes").dump() + " B) has busbw_gbps " + row.at("busbw_gbps").dump() +
                     "; a curve needs a positive bus bandwidth at every size: rerun comm_bench with more --iters");
    if (busbw > kMaxBusbwGbPerS)
      fail(path, where + "(" + row.at("size_bytes").dump() + " B) has busbw_gbps " + row.at("busbw_gbps").dump() +
                     ", impossible for a link (expected at most 1e6 GB/s): give the file comm_bench wrote, unedited");
    MeasuredCurveCost::Point point{bytes, busbw, std::nullopt, std::nullopt};
    if (row.contains("compute_slowdown")) {
      const json& slowdown = row.at("compute_slowdown");
      // Beside a collective compute runs at most a few times slower; noise may make it a little faster.
      if (!slowdown.is_number() || !(slowdown.get<double>() > -1) || !(slowdown.get<double>() < kMaxSlowdown))
        fail(path, where + "(" + row.at("size_bytes").dump() + " B) has compute_slowdown " + slowdown.dump() +
                       "; expected a fraction above -1 and below 5: give the file comm_bench wrote, unedited");
      point.compute_slowdown = slowdown.get<double>();
      // The same row's times beside and alone give the collective's own slowdown.
      const bool timed = row.contains("time_us") && row.contains("time_beside_compute_us") &&
                         row.at("time_us").is_number() && row.at("time_beside_compute_us").is_number() &&
                         row.at("time_us").get<double>() > 0 && row.at("time_beside_compute_us").get<double>() > 0;
      if (!timed)
        fail(path, where + "(" + row.at("size_bytes").dump() + " B) has compute_slowdown but no positive time_us and "
                       "time_beside_compute_us; give the file comm_bench --beside_compute wrote, unedited");
      point.collective_slowdown = row.at("time_beside_compute_us").get<double>() / row.at("time_us").get<double>() - 1;
    }
    points.push_back(point);
  }
  const size_t with_slowdown = static_cast<size_t>(std::count_if(
      points.begin(), points.end(), [](const MeasuredCurveCost::Point& p) { return p.compute_slowdown.has_value(); }));
  if (with_slowdown != 0 && with_slowdown != points.size())
    fail(path, "compute_slowdown in " + std::to_string(with_slowdown) + " of " + std::to_string(points.size()) +
                   " rows; comm_bench --beside_compute writes it in every row: give the file comm_bench wrote, unedited");
  std::sort(points.begin(), points.end(),
            [](const MeasuredCurveCost::Point& a, const MeasuredCurveCost::Point& b) { return a.bytes < b.bytes; });
  for (size_t i = 1; i < points.size(); ++i)
    if (points[i].bytes == points[i - 1].bytes)
      fail(path, "size " + format_byte_size(points[i].bytes) + " appears twice; give one comm_bench run per file");
  return points;
}

// "4.1% to 9.0%": the least and the most compute was slowed beside a curve's sizes.
std::string slowdown_range(const std::vector<MeasuredCurveCost::Point>& points) {
  double least = *points.front().compute_slowdown, most = least;
  for (const MeasuredCurveCost::Point& point : points) {
    least = std::min(least, *point.compute_slowdown);
    most = std::max(most, *point.compute_slowdown);
  }
  char text[80];
  std::snprintf(text, sizeof text, "%.1f%% to %.1f%%", 100 * least, 100 * most);
  return text;
}

}  // namespace

CollectiveCurve parse_collective_curve(const json& document, const std::string& path) {
  if (!document.is_object()) fail(path, "not a JSON object; " + std::string(kHowToMeasure));
  if (string_at(document, "command") != "comm_bench") {
    const bool a_run = document.contains("summary") && document.contains("config");
    fail(path, a_run ? "a training result, not dpbench comm_bench output; give runs to compare with as MEASURED "
                       "(before --curves), and curves that comm_bench measured: " + std::string(kHowToMeasure)
                     : "not dpbench comm_bench output (no \"command\": \"comm_bench\"); " + std::string(kHowToMeasure));
  }
  if (!document.contains("schema_version") || document.at("schema_version") != 1)
    fail(path, "schema_version " + (document.contains("schema_version") ? document.at("schema_version").dump() : "missing") +
                   "; this dpbench reads comm_bench files of schema_version 1: rerun comm_bench with this dpbench");
  const json config = document.contains("config") ? document.at("config") : json();
  CollectiveCurve curve;
  curve.path = path;
  curve.op = op_named(string_at(config, "op"), path);
  // Before comm_bench recorded "link" and "ranks" it always ran in one process: one host, its
  // --num_gpus ranks.
  curve.link_recorded = document.contains("link");
  if (curve.link_recorded) {
    const std::string link = string_at(document, "link");
    if (link == link_kind_name(LinkKind::intra_host)) curve.link = LinkKind::intra_host;
    else if (link == link_kind_name(LinkKind::inter_host)) curve.link = LinkKind::inter_host;
    else fail(path, "link " + document.at("link").dump() + " unknown; accepted: \"intra_host\", \"inter_host\"");
  }
  curve.ranks = document.contains("ranks") ? count_at(document, "ranks", "ranks", path)
                                           : count_at(config, "num_gpus", "config.num_gpus", path);
  if (curve.ranks == 0) fail(path, "no rank count (\"ranks\", a whole number >= 1); give the file comm_bench wrote");
  if (curve.ranks < 2)
    fail(path, "measured on 1 rank, where a collective moves nothing; measure on 2 or more (comm_bench --num_gpus=2)");
  curve.hosts = std::max(1, count_at(document, "hosts", "hosts", path));
  if (curve.hosts > curve.ranks)
    fail(path, "hosts " + std::to_string(curve.hosts) + " is more than its " + std::to_string(curve.ranks) +
                   " ranks, impossible for a measurement: give the file comm_bench wrote, unedited");
  curve.backend = string_at(config, "backend");
  curve.communicator = string_at(document, "communicator");
  curve.data_type = string_at(config, "data_type");
  curve.points = points_of(document.contains("rows") ? document.at("rows") : json(), path);
  return curve;
}

CollectiveCurve load_collective_curve(const std::string& path) {
  std::string text;
  try {
    text = read_text_file(path, "curve file");
  } catch (const RuntimeError& error) {
    throw RuntimeError("predict: " + std::string(error.what()) + "; give a file dpbench comm_bench --json wrote");
  }
  json document;
  std::string detail;
  const std::string why_not = parse_json_text(text, &document, &detail);
  if (!why_not.empty()) fail(path, why_not + (detail.empty() ? "" : " (" + detail + ")") + "; " + kHowToMeasure);
  return parse_collective_curve(document, path);
}

CurveMap curves_by_collective(const std::vector<CollectiveCurve>& curves) {
  CurveMap map;
  std::map<std::tuple<Collective, LinkKind, int>, const CollectiveCurve*> first;
  for (const CollectiveCurve& curve : curves) {
    const auto key = std::make_tuple(curve.op, curve.link, curve.ranks);
    if (const auto seen = first.find(key); seen != first.end()) {
      throw RuntimeError("predict: curve files '" + seen->second->path + "' and '" + curve.path + "' both measure " +
                         collective_name(curve.op) + " over " + link_kind_name(curve.link) + " on " +
                         std::to_string(curve.ranks) +
                         " ranks; give one curve per collective, link kind and rank count (the prediction for "
                         "N GPUs takes the one of the most ranks not above N)");
    }
    first[key] = &curve;
    map[{curve.op, curve.link}][curve.ranks] = curve.points;
  }
  return map;
}

std::string format_byte_size(double bytes) {
  const char* const units[] = {"GiB", "MiB", "KiB"};
  const double scales[] = {1073741824.0, 1048576.0, 1024.0};
  for (int i = 0; i < 3; ++i)
    if (bytes >= scales[i] && std::fmod(bytes, scales[i]) == 0)
      return std::to_string(static_cast<int64_t>(bytes / scales[i])) + " " + units[i];
  return std::to_string(static_cast<int64_t>(bytes)) + " B";
}

std::string describe_curve(const CollectiveCurve& curve) {
  std::string text = std::string(collective_name(curve.op)) + " " + link_kind_name(curve.link) + ": `" +
                     curve.path + "`, " + std::to_string(curve.ranks) + " ranks on " + std::to_string(curve.hosts) +
                     (curve.hosts == 1 ? " host" : " hosts");
  std::string measured_by;
  for (const std::string& part : {curve.backend.empty() ? "" : curve.backend + " backend", curve.communicator, curve.data_type})
    if (!part.empty()) measured_by += (measured_by.empty() ? "" : ", ") + part;
  if (!measured_by.empty()) text += " (" + measured_by + ")";
  text += ", " + format_byte_size(curve.points.front().bytes) + " to " + format_byte_size(curve.points.back().bytes);
  if (curve.points.front().compute_slowdown)
    text += ", compute beside it slowed " + slowdown_range(curve.points);
  if (!curve.link_recorded) text += " (link not recorded, from an older comm_bench: it ran in one process)";
  return text;
}

std::vector<std::string> costs_from_system_file(const std::vector<CollectiveCurve>& curves) {
  std::vector<std::string> costs;
  for (LinkKind link : kAllLinks)
    for (Collective op : benchmarked_collectives()) {
      const bool measured = std::any_of(curves.begin(), curves.end(),
                                        [&](const CollectiveCurve& c) { return c.op == op && c.link == link; });
      if (!measured) costs.push_back(std::string(collective_name(op)) + " " + link_kind_name(link));
    }
  costs.push_back("host copies");
  return costs;
}

}  // namespace dpbench
