// `dpbench completion` (see the header): the shell script, its data written out from the flag
// tables and its logic fixed, for bash and for zsh through zsh's bash emulation (bashcompinit).
#include "cli/completion_command.h"

#include "cli/comm_bench_command.h"
#include "cli/compare_command.h"
#include "cli/flag_parsing.h"
#include "cli/flags.h"
#include "cli/predict_command.h"
#include "cli/report_command.h"
#include "cli/strategies_command.h"
#include "engine/errors.h"
#include "reports/text_file.h"

namespace dpbench {
namespace {

// The one table `completion`'s argument is parsed through, and the words completion offers for it.
const std::vector<Choice<CompletionShell>>& shell_choices() {
  static const std::vector<Choice<CompletionShell>> choices = {{"bash", CompletionShell::bash},
                                                               {"zsh", CompletionShell::zsh}};
  return choices;
}

std::vector<std::string> shell_names() {
  std::vector<std::string> names;
  for (const Choice<CompletionShell>& choice : shell_choices()) names.push_back(choice.name);
  return names;
}

// Every word the script holds is a flag name or a value from a table: letters, digits and a few
// marks. Anything else (a quote, a space) would need quoting in three shell contexts; a table
// that grows one fails here, in the test that generates the script, rather than in a user's shell.
const std::string& checked_word(const std::string& word) {
  for (const char c : word) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string("_.,:#+=-").find(c) != std::string::npos;
    if (!plain) throw RuntimeError("completion: '" + quoted_argument(word) + "' holds a character the script cannot hold");
  }
  return word;
}

std::string joined_words(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "" : " ") + checked_word(word);
  return text;
}

// "@file" or "@dir" for a flag whose value is a path (its hint says so), else the words it takes.
std::string value_words(const FlagDeclaration& flag) {
  if (flag.value_hint == "FILE" || flag.value_hint == "PATH") return "@file";
  if (flag.value_hint == "DIR") return "@dir";
  return joined_words(flag_value_choices(flag));
}

// The flags as offered: a flag that takes a value with its '=' (its value typed right after).
std::string offered_flags(const FlagTable& table) {
  std::vector<std::string> words;
  for (const FlagDeclaration& flag : table.flags)
    words.push_back("--" + checked_word(flag.name) + (flag.kind == FlagKind::value ? "=" : ""));
  words.push_back("--help");
  return joined_words(words);
}

// `case` arms "    PATTERNS) printf '%s' 'TEXT' ;;" for each text, its patterns joined by " | ".
void append_case_arm(const std::vector<std::string>& patterns, const std::string& text, std::string* script) {
  if (patterns.empty()) return;
  *script += "    ";
  for (size_t i = 0; i < patterns.size(); ++i) *script += (i ? " | " : "") + patterns[i];
  *script += ") printf '%s' '" + text + "' ;;\n";
}

// The script's data: one function per question, a `case` over the commands (and flags) in each.
std::string data_functions(const std::vector<SubcommandCompletion>& commands) {
  std::vector<std::string> command_names;
  for (const SubcommandCompletion& command : commands) command_names.push_back(command.name);

  std::string script = "# The subcommands (run is the default).\n_dpbench_commands() { printf '%s' '" +
                       joined_words(command_names) + "'; }\n\n";

  script += "# _dpbench_flags COMMAND: its flags as offered (one that takes a value with its '=').\n"
            "_dpbench_flags() {\n  case $1 in\n";
  for (const SubcommandCompletion& command : commands) append_case_arm({command.name}, offered_flags(command.table), &script);
  script += "  esac\n}\n\n";

  script += "# _dpbench_value_kind COMMAND FLAG: \"value\" for a flag whose value may be the next word, \"list\"\n"
            "# for one whose values are every next word up to a flag; nothing for the others.\n"
            "_dpbench_value_kind() {\n  case $1:$2 in\n";
  for (const FlagKind kind : {FlagKind::value, FlagKind::list}) {
    std::vector<std::string> patterns;
    for (const SubcommandCompletion& command : commands)
      for (const FlagDeclaration& flag : command.table.flags)
        if (flag.kind == kind) patterns.push_back(command.name + ":" + flag.name);
    append_case_arm(patterns, kind == FlagKind::value ? "value" : "list", &script);
  }
  script += "  esac\n}\n\n";

  // Flags with the same values share an arm, in the order their first flag comes.
  script += "# _dpbench_values COMMAND FLAG: the values FLAG takes: words, @file or @dir (a path), or nothing.\n"
            "_dpbench_values() {\n  case $1:$2 in\n";
  std::vector<std::pair<std::string, std::vector<std::string>>> arms;  // values, patterns
  for (const SubcommandCompletion& command : commands) {
    for (const FlagDeclaration& flag : command.table.flags) {
      const std::string values = value_words(flag);
      if (values.empty()) continue;
      auto arm = arms.begin();
      while (arm != arms.end() && arm->first != values) ++arm;
      if (arm == arms.end()) arm = arms.insert(arms.end(), {values, {}});
      arm->second.push_back(command.name + ":" + flag.name);
    }
  }
  for (const auto& [values, patterns] : arms) append_case_arm(patterns, values, &script);
  script += "  esac\n}\n\n";

  script += "# _dpbench_arguments COMMAND: what its other arguments take, as _dpbench_values says.\n"
            "_dpbench_arguments() {\n  case $1 in\n";
  for (const SubcommandCompletion& command : commands) {
    if (!command.argument_words.empty()) append_case_arm({command.name}, joined_words(command.argument_words), &script);
    else if (command.table.takes_paths) append_case_arm({command.name}, "@file", &script);
  }
  script += "  esac\n}\n\n";
  return script;
}

// What the script does with the data: the same for every table, so it is written out once here.
// COMP_WORDS and COMP_CWORD index alike in bash and under bashcompinit (which runs this function
// with sh's zero-based arrays); where '=' breaks words (bash's default COMP_WORDBREAKS), --flag=V
// arrives as three words.
const char* const kCompletionLogic = R"BASH(# _dpbench_reply WORDS CURRENT PREFIX: COMPREPLY from WORDS (or paths for @file and @dir) that
# start with CURRENT, each after PREFIX.
_dpbench_reply() {
  local words=$1 current=$2 prefix=$3 candidate
  local -a generate=(-W "$words")
  case $words in
    @file) generate=(-f) ;;
    @dir) generate=(-d) ;;
  esac
  if [[ $words == @* ]] && type compopt >/dev/null 2>&1; then compopt -o filenames; fi
  while IFS= read -r candidate; do
    if [ -n "$candidate" ]; then COMPREPLY+=("$prefix$candidate"); fi
  done < <(compgen "${generate[@]}" -- "$current")
}

_dpbench() {
  COMPREPLY=()
  local cword=$COMP_CWORD command=run first=1 flag="" prefix="" word name i
  local current=${COMP_WORDS[cword]}
  # The subcommand is the first argument, where it names one.
  if ((cword > 1)); then
    for word in $(_dpbench_commands); do
      if [ "${COMP_WORDS[1]}" = "$word" ]; then command=$word first=2; fi
    done
  fi
  # After "--" every argument is positional.
  for ((i = first; i < cword; i++)); do
    if [ "${COMP_WORDS[i]}" = -- ]; then
      _dpbench_reply "$(_dpbench_arguments "$command")" "$current" ""
      return 0
    fi
  done
  # --flag=VALUE, split at '=' into --flag, = and VALUE, or one word where '=' breaks none.
  if [ "$current" = = ] && ((cword > first)); then
    flag=${COMP_WORDS[cword - 1]} current=""
  elif ((cword > first + 1)) && [ "${COMP_WORDS[cword - 1]}" = = ]; then
    flag=${COMP_WORDS[cword - 2]}
  elif [[ $current == --*=* ]]; then
    flag=${current%%=*} prefix=${current%%=*}= current=${current#*=}
  fi
  if [ -n "$flag" ]; then
    name=${flag#-} name=${name#-}
    _dpbench_reply "$(_dpbench_values "$command" "$name")" "$current" "$prefix"
    return 0
  fi
  if [[ $current == -* ]]; then
    _dpbench_reply "$(_dpbench_flags "$command")" "$current" ""
    if type compopt >/dev/null 2>&1; then
      # The one flag left takes a value: no space, the value follows its '='.
      if ((${#COMPREPLY[@]} == 1)) && [[ ${COMPREPLY[0]} == *= ]]; then compopt -o nospace; fi
    else
      # zsh: its emulation cannot leave the space out, so the value goes in the next word.
      COMPREPLY=("${COMPREPLY[@]%=}")
    fi
    return 0
  fi
  # --flag VALUE: the value of the flag before (a list flag's: up to the next flag).
  for ((i = cword - 1; i >= first; i--)); do
    word=${COMP_WORDS[i]}
    [[ $word == -* && $word != -- ]] || continue
    name=${word#-} name=${name#-} name=${name%%=*}
    case $(_dpbench_value_kind "$command" "$name") in
      value) if ((i == cword - 1)) && [[ $word != *=* ]]; then
               _dpbench_reply "$(_dpbench_values "$command" "$name")" "$current" ""
               return 0
             fi ;;
      list) _dpbench_reply "$(_dpbench_values "$command" "$name")" "$current" ""
            return 0 ;;
    esac
    break
  done
  if ((cword == 1)); then
    _dpbench_reply "$(_dpbench_commands)" "$current" ""
  else
    _dpbench_reply "$(_dpbench_arguments "$command")" "$current" ""
  fi
  return 0
}

complete -F _dpbench dpbench
)BASH";

std::string completion_help_text() {
  return "usage: dpbench completion bash|zsh\n"
         "Prints the shell completion script of dpbench's subcommands, flags and enumerated values.\n"
         "bash: installed as share/bash-completion/completions/dpbench, or `source <(dpbench completion bash)`;\n"
         "zsh: `source <(dpbench completion zsh)` after compinit (zsh's bash emulation, bashcompinit).\n\n" +
         flag_table_help(completion_flag_table());
}

}  // namespace

std::vector<SubcommandCompletion> completed_subcommands() {
  return {{"run", run_flag_table(), {}},
          {"report", report_flag_table(), {}},
          {"compare", compare_flag_table(), {}},
          {"predict", predict_flag_table(), {}},
          {"comm_bench", comm_bench_flag_table(), {}},
          {"strategies", strategies_flag_table(), {}},
          {"completion", completion_flag_table(), shell_names()}};
}

std::string completion_script(CompletionShell shell) {
  std::string script = shell == CompletionShell::bash
                           ? "# Bash completion for dpbench: its subcommands, their flags and the values of enumerated flags.\n"
                           : "# Zsh completion for dpbench: its subcommands, their flags and the values of enumerated flags,\n"
                             "# through zsh's emulation of bash completion. Load it after compinit:\n"
                             "#   source <(dpbench completion zsh)\n";
  script += "# Generated by `dpbench completion " + std::string(shell == CompletionShell::bash ? "bash" : "zsh") +
            "` from dpbench's flag tables: regenerate it, do not edit it.\n\n";
  if (shell == CompletionShell::zsh) script += "autoload -U +X bashcompinit && bashcompinit\n\n";
  return script + data_functions(completed_subcommands()) + kCompletionLogic;
}

FlagTable completion_flag_table() {
  FlagTable table;
  table.command = "completion";
  table.takes_paths = true;  // the shell's name, checked below
  return table;
}

void run_completion_command(const std::vector<std::string>& args) {
  const ReadFlags flags = read_flags(completion_flag_table(), args);
  if (flags.help()) {
    write_text_atomically("-", completion_help_text(), "the help");
    return;
  }
  const std::string usage = "dpbench completion " + choice_names(shell_choices(), "|");
  if (flags.paths.size() != 1) throw ConfigError("completion: give one shell: " + usage);
  for (const Choice<CompletionShell>& choice : shell_choices()) {
    if (flags.paths.front() != choice.name) continue;
    write_text_atomically("-", completion_script(choice.value), "the completion script");
    return;
  }
  throw ConfigError("completion: unknown shell '" + quoted_argument(flags.paths.front()) + "'; accepted: " +
                    choice_names(shell_choices()));
}

}  // namespace dpbench
