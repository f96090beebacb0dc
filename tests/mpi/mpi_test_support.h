// What the MPI tests share: the job's MpiContext, made once in main().
#pragma once

#include "engine/communication/mpi/mpi_context.h"

namespace dpbench::testing {
extern MpiContext* g_mpi;
}  // namespace dpbench::testing
