// Cells of the tables dpbench's reports write: markdown rows (pipes escaped), CSV fields (quoted
// where needed) and numbers for CSV and JSON that read back as the same double. Shared by the
// writers of dpbench's reports, so all escape and round the same way.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dpbench {

// Every cell's control bytes and line breaks escaped (escaped_value), then its pipes.
std::string markdown_row(const std::vector<std::string>& cells);
// "|---:|---:|...|": every column right-aligned (numbers).
std::string right_aligned_rule(size_t columns);
// The rule under a header, a column per letter of `alignments`: 'l' left (text), 'r' right (numbers).
std::string alignment_rule(const std::string& alignments);

// "1 file", "3 files"; `plural_noun` for nouns that do not just take an s.
std::string count_of(size_t count, const std::string& noun, const std::string& plural_noun = "");

// `parts` with `separator` between them.
std::string join_parts(const std::vector<std::string>& parts, const std::string& separator);

// "2%", "0.5%", "95%": a percentage as a flag gives it, not "2.00%".
std::string percent_text(double pct);

// `text` with its control bytes and line breaks escaped (escaped_value), quoted where needed.
std::string csv_field(const std::string& text);
// Shortest text that reads back as the same double; empty for none or non-finite.
std::string csv_number(std::optional<double> value);
// The number, or null for none or non-finite (JSON has no NaN).
nlohmann::json json_number(std::optional<double> value);

}  // namespace dpbench
