// Reads versions from the loaded libraries themselves (cudnnGetVersion, ncclGetVersion, ...),
// not from the headers dpbench was compiled with.
#include "engine/machine/environment.h"

#include <cstdlib>

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <regex>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

namespace dpbench {
namespace {

std::string cuda_version_text(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string kernel_driver_version() {
  std::ifstream file("/proc/driver/nvidia/version");
  std::string line;
  if (!file || !std::getline(file, line)) return "";
  std::smatch match;
  if (std::regex_search(line, match, std::regex(R"((\d+\.\d+(\.\d+)?))"))) return match[1];
  return "";
}

}  // namespace

LibraryVersions loaded_library_versions() {
  LibraryVersions versions;
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) versions.cuda_runtime = cuda_version_text(runtime);
  if (cudaDriverGetVersion(&driver) == cudaSuccess) versions.cuda_driver = cuda_version_text(driver);
  versions.driver = kernel_driver_version();
  const size_t cudnn = cudnnGetVersion();  // 91900 = 9.19.0 (cuDNN 9 encoding: major*10000 + minor*100 + patch)
  versions.cudnn = std::to_string(cudnn / 10000) + "." + std::to_string((cudnn % 10000) / 100) + "." +
                   std::to_string(cudnn % 100);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    versions.nccl = std::to_string(nccl / 10000) + "." + std::to_string((nccl % 10000) / 100) + "." +
                    std::to_string(nccl % 100);
  }
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    versions.cublas = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  return versions;
}

std::string machine_host_name() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown";
  return buffer;
}

std::string host_name() {
  const char* simulated = std::getenv(kHostNameVariable);
  return simulated != nullptr && *simulated != '\0' ? std::string(simulated) : machine_host_name();
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return "";
}

std::map<std::string, std::string> variables_with_prefixes(const std::vector<std::string>& prefixes) {
  std::map<std::string, std::string> found;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    const std::string name = text.substr(0, equals);
    for (const std::string& prefix : prefixes)
      if (name.rfind(prefix, 0) == 0) found[name] = text.substr(equals + 1);
  }
  return found;
}

std::string utc_timestamp_iso8601() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

}  // namespace dpbench
