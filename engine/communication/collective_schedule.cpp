// traffic_of (see collective_schedule.h).
#include "engine/communication/collective_schedule.h"

#include <tuple>

namespace dpbench {

ScheduleTraffic traffic_of(const std::vector<RangeSchedule>& ranges) {
  // Bytes by (collective, ranks, width), in the order they first appear; and the flat collectives
  // a method's busbw is counted as, likewise.
  struct Group {
    Collective collective;
    int ranks;
    double width;
    double bytes;
  };
  std::vector<Group> groups, counted_as;
  auto add = [](std::vector<Group>& to, Collective collective, int ranks, double width, double bytes) {
    for (Group& group : to)
      if (std::tie(group.collective, group.ranks, group.width) == std::tie(collective, ranks, width)) {
        group.bytes += bytes;
        return;
      }
    to.push_back({collective, ranks, width, bytes});
  };
  ScheduleTraffic traffic;
  for (const RangeSchedule& range : ranges) {
    traffic.bytes += range.message_bytes;
    if (range.busbw_as) add(counted_as, *range.busbw_as, range.busbw_ranks, 1.0, range.message_bytes);
    for (const ScheduledCollective& step : range.steps) {
      add(groups, step.collective, step.ranks, step.width, step.bytes);
      ++traffic.collectives;
    }
  }
  for (const Group& group : groups) traffic.bytes_sent += collective_send_factor(group.collective, group.ranks) * group.bytes;
  // A range counted as a flat collective adds that one's bus bytes instead of its steps'.
  bool any_counted_as = !counted_as.empty();
  if (any_counted_as) {
    for (const Group& group : counted_as) traffic.bus_bytes += collective_bus_factor(group.collective, group.ranks) * group.bytes;
    std::vector<RangeSchedule> own;
    for (const RangeSchedule& range : ranges)
      if (!range.busbw_as) own.push_back(range);
    if (!own.empty()) traffic.bus_bytes += traffic_of(own).bus_bytes;
    return traffic;
  }
  for (const Group& group : groups)
    traffic.bus_bytes += collective_bus_factor(group.collective, group.ranks) * (group.bytes / group.width);
  return traffic;
}

}  // namespace dpbench
