// Included inside the class body of a Backend implementation (CudaBackend, ReferenceBackend):
// declares every op of engine/backend/backend_ops.h as an override, and un-hides Backend's fp32 forms,
// which those overrides would otherwise hide. The implementation defines each op in its own
// files. No include guard: each implementation's class includes it once.
#define DPBENCH_OP(ret, name, params, args) ret name params override;
#define DPBENCH_FP32_FORM(ret, name, params, call) using Backend::name;
#include "engine/backend/backend_ops.h"
