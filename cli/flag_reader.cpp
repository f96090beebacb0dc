// The one command-line reader and its --help layout (see flag_reader.h and Note [one command line]).
#include "cli/flag_reader.h"

#include <algorithm>
#include <cctype>

#include "cli/flag_parsing.h"
#include "engine/errors.h"

namespace dpbench {

const FlagDeclaration* FlagTable::find(const std::string& name) const {
  for (const FlagDeclaration& flag : flags)
    if (flag.name == name) return &flag;
  return nullptr;
}

std::string FlagTable::help_command() const {
  return command.empty() ? "dpbench --help" : "dpbench " + command + " --help";
}

std::vector<std::string> flag_value_choices(const FlagDeclaration& flag) {
  if (!flag.choices.empty()) return flag.choices;
  if (flag.kind == FlagKind::boolean) return {"true", "false"};
  if (flag.value_hint.find('|') == std::string::npos) return {};
  std::vector<std::string> alternatives;
  for (size_t start = 0;;) {
    const size_t bar = flag.value_hint.find('|', start);
    alternatives.push_back(flag.value_hint.substr(start, bar - start));
    if (bar == std::string::npos) return alternatives;
    start = bar + 1;
  }
}

std::string ReadFlags::text(const std::string& name) const {
  if (const auto given = values.find(name); given != values.end()) return given->second;
  const auto fallback = defaults.find(name);
  return fallback == defaults.end() ? std::string() : fallback->second;
}

std::vector<std::string> ReadFlags::list(const std::string& name) const {
  const auto found = lists.find(name);
  return found == lists.end() ? std::vector<std::string>() : found->second;
}

namespace {

// Every command's, so that no table has to remember it.
const FlagDeclaration kHelpFlag{"help", "", "", "Print this help and exit", {}, FlagKind::alone};

// For "did you mean": the cost of turning one flag name into another, edit by edit.
size_t edit_distance(const std::string& from, const std::string& to) {
  std::vector<size_t> previous(to.size() + 1), current(to.size() + 1);
  for (size_t j = 0; j <= to.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= from.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= to.size(); ++j) {
      size_t substitution = previous[j - 1] + (from[i - 1] == to[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[to.size()];
}

[[noreturn]] void reject_unknown_flag(const FlagTable& table, const std::string& argument, const std::string& name) {
  std::string closest;
  size_t best = 3;                     // further than this is a different word, not a typo
  constexpr size_t kLongestTypo = 64;  // a longer name is no misspelt flag (and costs name x flag steps)
  auto consider = [&](const std::string& candidate) {
    const size_t distance = edit_distance(name, candidate);
    if (distance <= best) best = distance, closest = candidate;
  };
  if (name.size() <= kLongestTypo) {
    for (const FlagDeclaration& flag : table.flags) consider(flag.name);
    consider(kHelpFlag.name);
  }
  const std::string hint = closest.empty() ? "" : "did you mean --" + closest + "? ";
  throw ConfigError(quoted_argument(argument) + ": unknown flag; " + hint + table.help_command() +
                    " lists the accepted flags");
}

// absl/gflags, which tf_cnn_benchmarks used, also accept a single dash: -num_gpus=4.
bool is_single_dash_flag(const std::string& arg) {
  return arg.size() > 2 && arg[0] == '-' && std::isalpha(static_cast<unsigned char>(arg[1])) && arg[2] != '=';
}

// Where a list's values end: "-" alone is a value (a path meaning standard input, say).
bool looks_like_flag(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

class ArgumentReader {
 public:
  ArgumentReader(const FlagTable& table, const std::vector<std::string>& args) : table_(table), args_(args) {
    for (const FlagDeclaration& flag : table.flags)
      if (flag.default_text) read_.defaults[flag.name] = *flag.default_text;
  }

  ReadFlags read() {
    bool only_positional = false;
    for (i_ = 0; i_ < args_.size(); ++i_) {
      std::string arg = args_[i_];
      if (only_positional) {
        read_positional(arg, true);
      } else if (arg == "--") {
        only_positional = true;
      } else if (arg == "-h") {
        read_.alone.insert(kHelpFlag.name);
      } else {
        if (is_single_dash_flag(arg)) arg.insert(0, "-");
        if (arg.rfind("--", 0) == 0) read_flag(arg);
        else if (looks_like_flag(arg)) reject_unknown_flag(table_, arg, arg.substr(1));
        else read_positional(arg, false);
      }
    }
    return std::move(read_);
  }

 private:
  void read_positional(const std::string& arg, bool after_dashes) {
    if (table_.takes_paths) {
      read_.paths.push_back(arg);
      previous_boolean_ = nullptr;
      return;
    }
    std::string hint;
    if (previous_boolean_ != nullptr) hint = " (write --" + previous_boolean_->name + "=" + quoted_argument(arg) + ")";
    else if (!after_dashes) hint = "; flags take the form --name=value (see " + table_.help_command() + ")";
    throw ConfigError("unexpected argument '" + quoted_argument(arg) + "'" + hint);
  }

  // `arg` starts with "--".
  void read_flag(const std::string& arg) {
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const bool has_value = equals != std::string::npos;
    previous_boolean_ = nullptr;
    const FlagDeclaration* flag = name == kHelpFlag.name ? &kHelpFlag : table_.find(name);
    if (flag == nullptr) {
      if (table_.note_on_missing_flag != nullptr) {
        const std::string note = table_.note_on_missing_flag(name);
        if (!note.empty()) throw ConfigError(note);
      }
      reject_unknown_flag(table_, arg, name);
    }
    switch (flag->kind) {
      case FlagKind::alone:
        if (has_value) throw ConfigError(quoted_argument(arg) + ": takes no value; write --" + name);
        read_.alone.insert(name);
        return;
      case FlagKind::list:
        read_list(*flag, has_value ? std::optional<std::string>(arg.substr(equals + 1)) : std::nullopt);
        return;
      case FlagKind::boolean:
        if (has_value) break;
        previous_boolean_ = flag;
        remember(*flag, "true");
        return;
      case FlagKind::value:
        break;
    }
    if (has_value) {
      remember(*flag, arg.substr(equals + 1));
      return;
    }
    if (i_ + 1 == args_.size() || args_[i_ + 1].rfind("--", 0) == 0) reject_missing_value(*flag);
    ++i_;  // the value travels as the next argument, as it is
    remember(*flag, args_[i_]);
  }

  void read_list(const FlagDeclaration& flag, const std::optional<std::string>& attached) {
    std::vector<std::string>& values = read_.lists[flag.name];
    const size_t before = values.size();
    if (attached) values.push_back(*attached);
    while (i_ + 1 < args_.size() && !looks_like_flag(args_[i_ + 1])) values.push_back(args_[++i_]);
    if (values.size() == before) reject_missing_value(flag);
    for (size_t v = before; v < values.size(); ++v)
      if (values[v].empty() && table_.empty_values_refused) reject_empty_value(flag);
  }

  // A flag given twice must say the same both times: which of two values was meant is a guess.
  void remember(const FlagDeclaration& flag, const std::string& value) {
    if (value.empty() && table_.empty_values_refused) reject_empty_value(flag);
    const auto [found, inserted] = read_.values.emplace(flag.name, value);
    if (!inserted && found->second != value)
      throw ConfigError("--" + flag.name + " is given twice, as " + quoted_argument(found->second) + " and as " +
                        quoted_argument(value) + "; give it once");
  }

  [[noreturn]] static void reject_missing_value(const FlagDeclaration& flag) {
    throw ConfigError("--" + flag.name + ": missing a value; e.g. --" + flag.name + "=" + flag.value_hint);
  }
  [[noreturn]] static void reject_empty_value(const FlagDeclaration& flag) {
    throw ConfigError("--" + flag.name + ": empty value; e.g. --" + flag.name + "=" + flag.value_hint);
  }

  const FlagTable& table_;
  const std::vector<std::string>& args_;
  size_t i_ = 0;
  ReadFlags read_;
  const FlagDeclaration* previous_boolean_ = nullptr;  // the flag before, when a boolean given alone
};

// "  --name HINT": what --help shows of a flag before its description.
std::string flag_usage(const FlagDeclaration& flag) {
  if (flag.name == kHelpFlag.name) return "  -h, --help";
  std::string usage = "      --" + flag.name;
  switch (flag.kind) {
    case FlagKind::value: return usage + " " + flag.value_hint;
    case FlagKind::boolean: return usage + "[=" + flag.value_hint + "]";
    case FlagKind::list: return usage + " " + flag.value_hint + "...";
    case FlagKind::alone: return usage;
  }
  return usage;
}

// `text` from column `column` on, in lines of at most `width` columns where its words allow.
void append_wrapped(const std::string& text, size_t column, size_t width, std::string* out) {
  const size_t room = width > column + 20 ? width - column : 20;
  size_t used = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find(' ', start), text.size());
    const std::string word = text.substr(start, end - start);
    start = end + 1;
    if (word.empty()) continue;
    if (used > 0 && used + 1 + word.size() > room) {
      *out += "\n" + std::string(column, ' ');
      used = 0;
    }
    if (used > 0) *out += ' ', ++used;
    *out += word;
    used += word.size();
  }
  *out += "\n";
}

// One section: the descriptions start in one column, past the longest usage (up to a limit; a
// longer usage has its description on the next line).
std::string lay_out_flags(const std::vector<const FlagDeclaration*>& flags, size_t width) {
  constexpr size_t kWidestUsage = 34;
  size_t widest = 0;
  for (const FlagDeclaration* flag : flags) widest = std::max(widest, std::min(flag_usage(*flag).size(), kWidestUsage));
  const size_t column = widest + 2;
  std::string text;
  for (const FlagDeclaration* flag : flags) {
    const std::string usage = flag_usage(*flag);
    text += usage;
    if (usage.size() + 2 > column) text += "\n" + std::string(column, ' ');
    else text += std::string(column - usage.size(), ' ');
    const bool shows_default = flag->default_text && !flag->default_text->empty();
    append_wrapped(flag->help + (shows_default ? " (default: " + *flag->default_text + ")" : ""), column, width,
                   &text);
  }
  return text;
}

}  // namespace

ReadFlags read_flags(const FlagTable& table, const std::vector<std::string>& args) {
  return ArgumentReader(table, args).read();
}

std::string flag_table_help(const FlagTable& table, const std::vector<std::string>& groups, size_t width) {
  if (groups.empty()) {
    std::vector<const FlagDeclaration*> flags;
    for (const FlagDeclaration& flag : table.flags) flags.push_back(&flag);
    flags.push_back(&kHelpFlag);
    return lay_out_flags(flags, width);
  }
  std::string text;
  for (const std::string& group : groups) {
    std::vector<const FlagDeclaration*> flags;
    for (const FlagDeclaration& flag : table.flags)
      if (flag.group == group) flags.push_back(&flag);
    if (&group == &groups.back()) flags.push_back(&kHelpFlag);
    if (flags.empty()) continue;
    text += "\n " + group + " options:\n" + lay_out_flags(flags, width);
  }
  return text;
}

}  // namespace dpbench
