// Which backend runs a device's ops: CUDA on a GPU, or the reference C++ on the host.
#pragma once

namespace dpbench {

enum class BackendKind { cuda, reference };

inline const char* backend_name(BackendKind kind) {
  return kind == BackendKind::cuda ? "cuda" : "reference";
}

}  // namespace dpbench
