// Where a run's replicas sit: this process's devices and, under mpirun, the processes of the job.
// Replica r of this process is replica process_rank * devices + r of the whole run; the global
// batch and the synthetic samples are numbered over all of them.
#pragma once

#include <vector>

namespace dpbench {

struct DevicePlacement {
  std::vector<int> gpu_indices;  // resolved: one index per device of this process
  // mpirun runs (engine/communication/process_group.h): processes of the job and this one's rank; each process
  // drives its own devices (one GPU per rank). 1 and 0 for a single-process run.
  int num_processes = 1;
  int process_rank = 0;

  int num_devices() const { return static_cast<int>(gpu_indices.size()); }
  int world_devices() const { return num_devices() * num_processes; }  // every process's
};

}  // namespace dpbench
