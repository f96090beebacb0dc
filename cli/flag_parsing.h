// Parsing of flag texts shared by the validation files of cli/: every malformed value becomes one
// ConfigError line "--flag=value: what is wrong; what is accepted", the value quoted so that no
// length or byte of it can break the line. Internal to cli/.
#pragma once

#include <charconv>
#include <climits>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace dpbench {

// How much of an argument a message shows: enough for any real path, never a screenful.
inline constexpr size_t kShownArgumentBytes = 300;
// `text` fit for a one-line message on a terminal: control bytes (a newline, an escape) as \xNN,
// and past `max_bytes` cut, with its length said.
std::string printable_text(const std::string& text, size_t max_bytes);
// An argument as a message quotes it: printable_text(text, kShownArgumentBytes).
std::string quoted_argument(const std::string& text);
// Throws ConfigError "--flag=value: why", the value quoted as above.
[[noreturn]] void reject(const std::string& flag, const std::string& value, const std::string& why);
std::string join(const std::vector<std::string>& items, const char* separator = ", ");
// An integer in [minimum, maximum]; below: `requirement`; above: "too large; accepted: up to N".
int parse_int_at_least(const std::string& flag, const std::string& text, int minimum,
                       const std::string& requirement, int maximum = INT_MAX);
int parse_positive_int(const std::string& flag, const std::string& text);
double parse_finite_number(const std::string& flag, const std::string& text, const std::string& accepted);
bool parse_bool(const std::string& flag, const std::string& text);
// A memory size: a number with a unit, "141GiB", "1.5GiB", "512MiB", "64KiB" (also GB, MB, KB and
// G, M, K, all powers of 2, as nvidia-smi's MiB), or a whole number of bytes; at least 1 KiB, at
// most 1 PiB. -> bytes.
uint64_t parse_memory_size(const std::string& flag, const std::string& text);
void require_one_of(const std::string& flag, const std::string& value,
                    const std::vector<std::string>& accepted, const std::string& what);

// One value of an enumerated flag (--format, ...): its name on the command line and its enum
// value. An unlisted row is another spelling, accepted but left out of the lists ("md").
template <typename Enum>
struct Choice {
  const char* name;
  Enum value;
  bool listed = true;
};

// The listed names, "markdown, csv, json" (or with `separator` "|", for --help's value hint).
template <typename Enum>
std::string choice_names(const std::vector<Choice<Enum>>& choices, const char* separator = ", ") {
  std::vector<std::string> names;
  for (const Choice<Enum>& choice : choices)
    if (choice.listed) names.push_back(choice.name);
  return join(names, separator);
}

// The value `text` names: an enumerated flag is parsed here, once, at the command line, and passed
// on as its enum. Else ConfigError "--flag=text: unknown <what>; accepted: <the listed names>".
template <typename Enum>
Enum parse_choice(const std::string& flag, const std::string& text, const std::vector<Choice<Enum>>& choices,
                  const std::string& what) {
  for (const Choice<Enum>& choice : choices)
    if (text == choice.name) return choice.value;
  reject(flag, text, "unknown " + what + "; accepted: " + choice_names(choices));
}

// "trivial (planned: resnet50, ...)" or, with only_implemented, "trivial": both registries list
// planned entries so that the user learns a name is coming rather than misspelt.
template <typename Entry>
std::string describe_choices(const std::vector<Entry>& registry, bool only_implemented) {
  std::vector<std::string> implemented, planned;
  for (const auto& entry : registry) (entry.implemented ? implemented : planned).push_back(entry.name);
  std::string text = implemented.empty() ? std::string("none yet") : join(implemented);
  if (!only_implemented && !planned.empty()) text += " (planned: " + join(planned) + ")";
  return text;
}

// from_chars rather than stoi: no leading blanks, no trailing junk, no silent wrap-around.
template <typename Integer>
bool parse_integer_text(const std::string& text, Integer* value) {
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, *value);
  return error == std::errc() && stop == end && !text.empty();
}

}  // namespace dpbench
