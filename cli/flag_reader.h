// The one reader of every subcommand's command line. A command declares its flags in a FlagTable
// (name, kind, value hint, help, default); read_flags turns its arguments into texts by flag name
// with the same rules and the same one-line errors for every command, and flag_table_help lays
// the same table out for --help. What a text means is the command's to judge (flag_parsing.h).
// Internal to cli/.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dpbench {

enum class FlagKind {
  value,    // --name=V or --name V
  boolean,  // as a value, and --name alone means --name=true
  list,     // --name A B ... (every argument up to the next flag) or --name=A; given again, it adds
  alone,    // --name and nothing else (--version); --help is every command's without declaring it
};

struct FlagDeclaration {
  // Every member has an initialiser, so that a row may stop after its help (-Wextra asks for one).
  std::string name{};        // without the dashes
  std::string group{};       // --help's heading (run's groups); empty: none
  std::string value_hint{};  // after the flag in --help, and in a missing value's example
  std::string help{};        // --help's description
  std::optional<std::string> default_text = std::nullopt;  // the text where not given; --help shows it
  FlagKind kind = FlagKind::value;
  // The names an enumerated flag accepts, from the list its validation checks against, where the
  // value hint cannot show them ("NAME"); shell completion offers them (flag_value_choices).
  std::vector<std::string> choices{};
};

// The values shell completion offers for `flag`: its choices, else the alternatives of a hint
// such as "fp32|tf32" (a boolean's: true, false); empty for a free value (N, FILE).
std::vector<std::string> flag_value_choices(const FlagDeclaration& flag);

struct FlagTable {
  std::string command;  // "report"; empty for run, the default command (its help: dpbench --help)
  std::vector<FlagDeclaration> flags;
  bool takes_paths = false;  // positional arguments are paths; else each is refused
  // Whether "--name=" is refused here or left to the command: run's validation judges every text,
  // the empty one included (--result_file= writes none).
  bool empty_values_refused = true;
  // A note for a name the table lacks (run's: the tf_cnn_benchmarks flags dpbench does not have);
  // empty where it has none, and then the name is an unknown flag.
  std::string (*note_on_missing_flag)(const std::string& name) = nullptr;

  const FlagDeclaration* find(const std::string& name) const;
  std::string help_command() const;  // "dpbench report --help"
};

struct ReadFlags {
  std::map<std::string, std::string> values;              // value and boolean flags, as given
  std::map<std::string, std::vector<std::string>> lists;  // list flags: every value, in order
  std::set<std::string> alone;                            // flags without a value that were given
  std::vector<std::string> paths;                         // positional arguments, in order
  std::map<std::string, std::string> defaults;            // the table's default texts

  bool help() const { return alone.count("help") > 0; }
  bool given(const std::string& name) const {
    return values.count(name) > 0 || lists.count(name) > 0 || alone.count(name) > 0;
  }
  // The flag's text as given, else its default, else empty.
  std::string text(const std::string& name) const;
  // A list flag's values; empty where it was not given.
  std::vector<std::string> list(const std::string& name) const;
};

// Note [one command line]
// Every command reads its arguments in one pass, without regular expressions or recursion, so
// that no argument's length can exhaust the stack:
// - "-name" is read as "--name" (absl/gflags, which tf_cnn_benchmarks used, took both); "-h" is
//   --help.
// - A value follows "=" or is the next argument, as it is, unless that starts with "--"; a
//   boolean alone means true; a list takes every next argument up to one that starts with "-"
//   ("-" alone is a value).
// - A flag given twice must say the same both times: which of two values was meant is a guess.
//   A list flag given again adds its values.
// - After "--" every argument is positional: a path where the command takes paths (one that
//   looks like a flag, "--odd.json"), refused elsewhere.
// Each refusal is one ConfigError line naming the argument, escaped and cut (quoted_argument):
// an unknown flag (with "did you mean --x?" and the command's --help), a missing or empty value,
// a stray argument, a flag given twice with two values, a value after a flag that takes none.
ReadFlags read_flags(const FlagTable& table, const std::vector<std::string>& args);

// The flags, one or more lines each at `width` columns: "--name HINT", then the help with its
// default; under a heading per group, in the order of `groups`, where the table has groups.
// --help closes the list.
std::string flag_table_help(const FlagTable& table, const std::vector<std::string>& groups = {},
                            size_t width = 110);

}  // namespace dpbench
