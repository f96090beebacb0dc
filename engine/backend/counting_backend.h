// CountingBackend: what a Device hands out as its ops. It forwards every op to the backend that
// runs it and counts each op that enqueues work on the device's stream (Device::enqueued), so
// that the work a step enqueues is counted where it is issued (Note [counted launches] in
// engine/backend/device.h). Queries (workspace sizes) are forwarded without counting.
#pragma once

#include "engine/backend/backend.h"
#include "engine/backend/device.h"

namespace dpbench {

class CountingBackend final : public Backend {
 public:
  CountingBackend(Backend& inner, Device& device, StreamKind stream)
      : inner_(inner), device_(device), stream_(stream) {}

  BackendKind kind() const override { return inner_.kind(); }
  Backend& implementation() override { return inner_.implementation(); }

  // Every op of engine/backend/backend_ops.h, forwarded. An op that enqueues work counts its launches
  // here, before it runs, the one place launches are counted; a query is only forwarded.
#define DPBENCH_ENQUEUES_N(ret, name, params, args, launches) \
  ret name params override {                                  \
    Backend& backend = inner_;                                \
    counted(launches);                                        \
    return backend.name args;                                 \
  }
#define DPBENCH_ENQUEUES(ret, name, params, args) DPBENCH_ENQUEUES_N(ret, name, params, args, 1)
#define DPBENCH_QUERY(ret, name, params, args) \
  ret name params override { return inner_.name args; }
#define DPBENCH_FP32_FORM(ret, name, params, call) using Backend::name;
#include "engine/backend/backend_ops.h"

 private:
  void counted(int64_t launches) { device_.count_enqueued(stream_, launches); }

  Backend& inner_;
  Device& device_;
  StreamKind stream_;
};

}  // namespace dpbench
