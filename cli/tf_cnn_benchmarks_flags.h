// The flags of tf_cnn_benchmarks that dpbench does not have, each with why or what to use instead,
// so that a pasted tf_cnn_benchmarks command line gets an answer rather than "unknown flag".
#pragma once

#include <string>

namespace dpbench {

// Why dpbench has no --`name` and what to use instead; empty when tf_cnn_benchmarks has no such
// flag either (or dpbench has it).
std::string tf_cnn_benchmarks_flag_note(const std::string& name);

}  // namespace dpbench
