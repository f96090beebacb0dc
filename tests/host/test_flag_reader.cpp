// The one command-line reader (cli/flag_reader.h) on a made-up table: each kind of flag, paths,
// "--", and every refusal in the one wording all commands share; and its --help layout.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli/flag_reader.h"
#include "engine/errors.h"

using namespace dpbench;
using Catch::Contains;

namespace {

FlagTable example_table(bool takes_paths) {
  FlagTable table;
  table.command = "example";
  table.takes_paths = takes_paths;
  table.flags = {{"output", "", "FILE", "write it to FILE"},
                 {"format", "", "FORMAT", "markdown, csv or json", std::string("markdown")},
                 {"verbose", "", "BOOL", "say more", std::string("false"), FlagKind::boolean},
                 {"curves", "", "FILE", "curve files", {}, FlagKind::list},
                 {"version", "", "", "print the version", {}, FlagKind::alone}};
  return table;
}

ReadFlags read(const std::vector<std::string>& args, bool takes_paths = true) {
  return read_flags(example_table(takes_paths), args);
}

std::string error_of(const std::vector<std::string>& args, bool takes_paths = true) {
  try {
    read(args, takes_paths);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("flag reader: values, booleans, lists and paths, in any order", "[flags][flag_reader]") {
  const ReadFlags flags =
      read({"a.json", "--output=out.md", "-format", "csv", "--verbose", "b.json", "--curves", "c1", "c2", "--version"});
  CHECK(flags.paths == std::vector<std::string>{"a.json", "b.json"});
  CHECK(flags.text("output") == "out.md");
  CHECK(flags.text("format") == "csv");
  CHECK(flags.text("verbose") == "true");
  CHECK(flags.list("curves") == std::vector<std::string>{"c1", "c2"});
  CHECK(flags.given("version"));
  CHECK_FALSE(flags.help());

  const ReadFlags defaults = read({"a.json"});
  CHECK(defaults.text("format") == "markdown");  // the table's default
  CHECK_FALSE(defaults.given("format"));
  CHECK(defaults.text("output").empty());
  CHECK(defaults.list("curves").empty());

  // A list ends at the next flag, takes "--curves=A" and may be given again; "-" is a value.
  const ReadFlags lists = read({"--curves=c1", "c2", "--output", "o", "--curves", "-", "c3", "-format=csv", "p"});
  CHECK(lists.list("curves") == std::vector<std::string>{"c1", "c2", "-", "c3"});
  CHECK(lists.paths == std::vector<std::string>{"p"});
  // A value as the next argument may start with one dash (a negative number); "--" ends flags.
  CHECK(read({"--output", "-3"}).text("output") == "-3");
  CHECK(read({"--format=json", "--", "--odd.json", "-h"}).paths == std::vector<std::string>{"--odd.json", "-h"});
  CHECK(read({"-h"}).help());
}

TEST_CASE("flag reader: a flag given twice must say the same both times", "[flags][flag_reader]") {
  CHECK(error_of({"--format=csv", "--format", "json"}) == "--format is given twice, as csv and as json; give it once");
  CHECK(error_of({"--verbose", "--verbose=false"}) == "--verbose is given twice, as true and as false; give it once");
  CHECK(read({"--format=csv", "-format=csv"}).text("format") == "csv");
  CHECK(read({"--verbose", "--verbose=true", "--help", "-h", "--version", "--version"}).help());
}

TEST_CASE("flag reader: every refusal is one line in the one wording", "[flags][flag_reader]") {
  CHECK(error_of({"--outptu=x"}) == "--outptu=x: unknown flag; did you mean --output? dpbench example --help lists the "
                                    "accepted flags");
  CHECK(error_of({"--zzzzzz"}) == "--zzzzzz: unknown flag; dpbench example --help lists the accepted flags");
  CHECK(error_of({"-x"}) == "-x: unknown flag; dpbench example --help lists the accepted flags");
  CHECK(error_of({"--hepl"}) == "--hepl: unknown flag; did you mean --help? dpbench example --help lists the "
                                "accepted flags");
  CHECK(error_of({"--output"}) == "--output: missing a value; e.g. --output=FILE");
  CHECK(error_of({"--output", "--format=csv"}) == "--output: missing a value; e.g. --output=FILE");
  CHECK(error_of({"--curves", "--output=o"}) == "--curves: missing a value; e.g. --curves=FILE");
  CHECK(error_of({"--output="}) == "--output: empty value; e.g. --output=FILE");
  CHECK(error_of({"--curves", "a", ""}) == "--curves: empty value; e.g. --curves=FILE");
  CHECK(error_of({"--version=2"}) == "--version=2: takes no value; write --version");
  CHECK(error_of({"--help=maybe"}) == "--help=maybe: takes no value; write --help");
  CHECK(error_of({"stray"}, false) ==
        "unexpected argument 'stray'; flags take the form --name=value (see dpbench example --help)");
  CHECK(error_of({"--verbose", "yes"}, false) == "unexpected argument 'yes' (write --verbose=yes)");
  CHECK(error_of({"--", "stray"}, false) == "unexpected argument 'stray'");
  CHECK(error_of({"-"}, false) ==
        "unexpected argument '-'; flags take the form --name=value (see dpbench example --help)");
  // Arguments are quoted escaped and cut: one line whatever their bytes and length.
  CHECK(error_of({"--bo\ngus"}) == "--bo\\x0Agus: unknown flag; dpbench example --help lists the accepted flags");
  CHECK(error_of({"--format=a\nb", "--format=c"}) == "--format is given twice, as a\\x0Ab and as c; give it once");
  const std::string long_flag = error_of({"--" + std::string(100000, 'z') + "=1"});
  CHECK_THAT(long_flag, Contains("unknown flag") && Contains("(100004 bytes)") && !Contains("did you mean"));
  CHECK(long_flag.size() < 1000);
}

TEST_CASE("flag reader: run's table names its help without a command and may take empty values",
          "[flags][flag_reader]") {
  FlagTable table = example_table(false);
  table.command.clear();
  table.empty_values_refused = false;
  table.note_on_missing_flag = [](const std::string& name) {
    return name == "xla" ? std::string("--xla is not here: use nothing") : std::string();
  };
  CHECK(read_flags(table, {"--output="}).text("output").empty());
  CHECK(read_flags(table, {"--output="}).given("output"));
  CHECK_THROWS_WITH(read_flags(table, {"--xla"}), "--xla is not here: use nothing");
  CHECK_THROWS_WITH(read_flags(table, {"--outputs=x"}),
                    "--outputs=x: unknown flag; did you mean --output? dpbench --help lists the accepted flags");
}

TEST_CASE("flag reader: --help lays the table out, with hints, defaults and --help itself", "[flags][flag_reader]") {
  const std::string help = flag_table_help(example_table(true));
  CHECK_THAT(help, Contains("      --output FILE") && Contains("      --format FORMAT") &&
                       Contains("      --verbose[=BOOL]") && Contains("      --curves FILE...") &&
                       Contains("  -h, --help") && Contains("(default: markdown)") && Contains("(default: false)"));
  CHECK(help.find("--help") > help.find("--version"));  // --help closes the list
  // Long descriptions wrap at the width, in the description's column.
  FlagTable wide = example_table(true);
  wide.flags[0].help = std::string(30, 'a') + " " + std::string(30, 'b') + " " + std::string(30, 'c');
  const std::string wrapped = flag_table_help(wide, {}, 80);
  for (size_t start = 0, end; start < wrapped.size(); start = end + 1) {
    end = wrapped.find('\n', start);
    CHECK(end - start <= 80);
  }
  // Groups under headings, in the order given; --help in the last.
  wide.flags[0].group = wide.flags[1].group = "Output";
  wide.flags[2].group = wide.flags[3].group = wide.flags[4].group = "General";
  const std::string grouped = flag_table_help(wide, {"Output", "General"});
  CHECK(grouped.find(" Output options:") < grouped.find("--output"));
  CHECK(grouped.find(" General options:") < grouped.find("--verbose"));
  CHECK(grouped.find("--verbose") < grouped.find("-h, --help"));
}
