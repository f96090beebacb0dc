// Result <-> JSON (DESIGN section 6, schema_version 1) and crash-safe result files.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "reports/result.h"

namespace dpbench {

// Non-finite doubles (a diverged loss) are written as null.
nlohmann::json result_to_json(const Result& result);

// The "environment" object of a result; also what comm_bench records of the machine.
nlohmann::json environment_to_json(const EnvironmentRecord& environment);

// Inverse of result_to_json; null doubles read back as NaN. Throws RuntimeError naming the first
// problem: not an object, a missing key, a value of the wrong type, or a schema_version other than
// kResultSchemaVersion. Unknown keys are ignored, so later additions do not break old readers.
Result result_from_json(const nlohmann::json& document);

// Writes pretty JSON to "<path>.tmp.<pid>", fsyncs it and renames it over `path`, so `path` only
// ever holds a complete result. Throws RuntimeError naming the path and the system error; the
// temporary file is removed on failure.
void write_result_atomically(const Result& result, const std::string& path);

// Parses `text` into `*document`; "" when it is JSON nlohmann can hold, else why not in a few
// words: "not JSON" for a syntax error (with `*detail`, where given, saying where: "line 1,
// column 2: ..."), or "holds the number 1e400, beyond the range of a double" for a number no
// double holds (JSON sets no limit, so such a file is JSON but no file dpbench wrote).
std::string parse_json_text(const std::string& text, nlohmann::json* document, std::string* detail = nullptr);

// Throws RuntimeError naming the path for a missing or unreadable file, invalid JSON, or a
// document result_from_json rejects.
Result read_result_file(const std::string& path);

}  // namespace dpbench
