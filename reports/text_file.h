// Whole-file text I/O for results and reports: read a file into a string, and write one atomically
// (temporary file, fsync, rename, directory fsync), so a result, report or plot is never left
// half written, even by a crash or a power loss.
#pragma once

#include <string>

namespace dpbench {

// Throws RuntimeError "cannot read <what> '<path>': <system error>" (`what` may be empty).
std::string read_text_file(const std::string& path, const std::string& what = "");

// Writes `text` to "<path>.tmp.<pid>" and renames it over `path`. Throws RuntimeError "cannot
// write <what> '<path>' (<step>): <system error>"; the temporary file is removed on failure.
void write_text_atomically(const std::string& path, const std::string& text, const std::string& what = "");

}  // namespace dpbench
