// What the run ran on: host name, date, and the versions of the CUDA libraries actually loaded
// (which can differ from the ones dpbench was built against).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace dpbench {

struct LibraryVersions {
  std::string cuda_runtime;  // "13.0"
  std::string cuda_driver;   // CUDA version the driver supports, "13.0"; "" without a driver
  std::string driver;        // NVIDIA kernel driver, "580.159.04"; "" when unknown
  std::string cudnn;         // "9.19.0"
  std::string nccl;          // "2.28.9"
  std::string cublas;        // "13.0.0"
};

LibraryVersions loaded_library_versions();
// The host this process counts as: DPBENCH_HOST_NAME when set (two simulated hosts on one
// machine: the ranks' grouping by host, hierarchical all-reduce, the result), else the machine's.
std::string host_name();
inline constexpr const char* kHostNameVariable = "DPBENCH_HOST_NAME";
// The machine's own name (gethostname), whatever DPBENCH_HOST_NAME says.
std::string machine_host_name();
std::string utc_timestamp_iso8601();
// /proc/cpuinfo's first "model name" ("" where there is none).
std::string cpu_model_name();
// The environment variables whose names start with one of `prefixes`, name -> value.
std::map<std::string, std::string> variables_with_prefixes(const std::vector<std::string>& prefixes);

}  // namespace dpbench
