// The rules of a linear layer's epilogue (Backend::add_row_bias) that both backends enforce:
// one check, so the oracle refuses exactly what the CUDA kernel refuses.
#include <string>

#include "engine/backend/backend.h"
#include "engine/errors.h"

namespace dpbench {

void check_row_bias_epilogue(const RowBiasEpilogue& then, const void* y, const char* op) {
  const std::string where = std::string(op) + ": ";
  const float rate = then.dropout.rate;
  if (!(rate >= 0.0f && rate < 1.0f))
    throw RuntimeError(where + "dropout rate " + std::to_string(rate) + " outside [0, 1)");
  if (rate > 0.0f && then.dropout.step == nullptr) throw RuntimeError(where + "dropout needs the step counter");
  if ((then.residual == nullptr) != (then.out == nullptr))
    throw RuntimeError(where + "a residual needs an output and an output a residual");
  if ((then.activated == nullptr) == then.gelu)
    throw RuntimeError(where + (then.gelu ? "gelu needs `activated` for its output"
                                          : "`activated` is written only with gelu"));
  if (!then.gelu) return;
  // The backward of GELU reads the pre-activation that y keeps, so nothing may change it further.
  if (then.relu || rate > 0.0f || then.residual != nullptr)
    throw RuntimeError(where + "gelu takes no ReLU, dropout or residual (y must keep the pre-activation "
                               "the backward reads); apply them to `activated` with their own ops");
  if (then.activated == y)
    throw RuntimeError(where + "gelu's `activated` must not be y, which keeps the pre-activation");
}

}  // namespace dpbench
