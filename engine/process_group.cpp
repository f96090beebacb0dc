// The run's process group (see process_group.h): set once by the executable before flags are read.
#include "engine/process_group.h"

namespace dpbench {
namespace {
ProcessGroup* g_process_group = nullptr;
}  // namespace

ProcessGroup* process_group() { return g_process_group; }
void set_process_group(ProcessGroup* group) { g_process_group = group; }

}  // namespace dpbench
