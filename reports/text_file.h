// Whole-file text I/O for the reporters: read a file into a string, and write one atomically
// (temporary file + rename), so a report or plot is never left half written.
#pragma once

#include <string>

namespace dpbench {

// Throws std::runtime_error naming the path and the system error.
std::string read_text_file(const std::string& path);

// Writes `text` to "<path>.tmp.<pid>" and renames it over `path`. Throws std::runtime_error naming
// the path and the system error; the temporary file is removed on failure.
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace dpbench
