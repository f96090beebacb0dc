// The reference backend's Communicator across processes (mpirun on host stand-ins): this
// process's one device is rank group.rank() of group.size(). Every collective gathers the ranks'
// host buffers through the ProcessGroup and reduces them exactly as the in-process communicator
// does (ranks added in order 0..N-1 in fp32, average = sum x 1/N), so N processes train
// bit for bit what one process with N reference devices trains, and every rank gets the same bits.
#pragma once

#include <memory>

#include "engine/communication/communicator.h"
#include "engine/communication/process_group.h"

namespace dpbench {

std::unique_ptr<Communicator> create_reference_process_communicator(const ProcessGroup& group);

}  // namespace dpbench
