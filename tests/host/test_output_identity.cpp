// No output of a command replaces one of its inputs or another of its outputs, however the paths
// are spelt: the same path, ./ and absolute spellings, a symbolic link, a hard link, a name that
// does not exist yet named two ways; devices may be shared, standard output may not.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/compare_command.h"
#include "cli/predict_command.h"
#include "cli/report_command.h"
#include "engine/errors.h"
#include "engine/machine/path_identity.h"
#include "reports/text_file.h"
#include "test_support.h"

using Catch::Contains;
using dpbench::check_outputs_apart;
using dpbench::ConfigError;
using dpbench::identify_path;
using dpbench::NamedPath;
using dpbench::PathIdentity;
using dpbench::same_destination;
using dpbench::testing::error_message_of;
using dpbench::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// The one line check_outputs_apart refuses the pair with, or "(no refusal)".
std::string refusal(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs = {}) {
  return error_message_of<ConfigError>([&] { check_outputs_apart(outputs, inputs); }, "refusal");
}

bool apart(const std::string& first, const std::string& second) {
  return refusal({{"--result_file", first}, {"--trace_file", second}}) == "(no refusal)";
}

// Runs `body` with the working folder at `folder`, then returns to where it was.
template <typename Body>
void in_folder(const fs::path& folder, Body body) {
  const fs::path before = fs::current_path();
  fs::current_path(folder);
  try {
    body();
  } catch (...) {
    fs::current_path(before);
    throw;
  }
  fs::current_path(before);
}

// Runs `body` with standard output sent to `path`, then puts it back.
template <typename Body>
void with_stdout_at(const std::string& path, Body body) {
  std::fflush(stdout);
  const int saved = ::dup(1);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 1);
  ::close(fd);
  body();
  ::dup2(saved, 1);
  ::close(saved);
}

}  // namespace

TEST_CASE("one file named twice, by any spelling, is refused as two outputs", "[output_identity]") {
  TempDir dir;
  const std::string file = dir.file("r.json");
  std::ofstream(file) << "{}";
  CHECK(refusal({{"--result_file", file}, {"--trace_file", file}}) ==
        "--trace_file=" + file + ": it names the same file as --result_file=" + file +
            "; give each output a name of its own");
  CHECK_FALSE(apart(file, (dir.path() / "." / "r.json").string()));
  in_folder(dir.path(), [&] {
    CHECK_FALSE(apart("r.json", "./r.json"));
    CHECK_FALSE(apart("r.json", file));  // relative and absolute
  });
  fs::create_symlink(file, dir.file("link.json"));
  CHECK_FALSE(apart(file, dir.file("link.json")));
  fs::create_hard_link(file, dir.file("hard.json"));
  CHECK_FALSE(apart(dir.file("hard.json"), file));
  std::ofstream(dir.file("other.json")) << "{}";
  CHECK(apart(file, dir.file("other.json")));
}

TEST_CASE("a name that does not exist yet is one output however it is spelt", "[output_identity]") {
  TempDir dir;
  fs::create_directory(dir.path() / "sub");
  const std::string fresh = dir.file("new.json");
  REQUIRE_FALSE(fs::exists(fresh));
  CHECK(identify_path(fresh).kind == PathIdentity::Kind::new_name);
  CHECK_FALSE(apart(fresh, dir.file("sub/../new.json")));
  fs::create_directory_symlink(dir.path(), dir.file("sub/again"));
  CHECK_FALSE(apart(fresh, dir.file("sub/again/new.json")));  // through a linked folder
  fs::create_symlink("new.json", dir.file("later.json"));      // a link to a name not there yet
  CHECK_FALSE(apart(dir.file("later.json"), fresh));
  in_folder(dir.path(), [&] { CHECK_FALSE(apart("new.json", fresh)); });
  CHECK(apart(fresh, dir.file("sub/new.json")));  // the same name in another folder
  CHECK(apart(fresh, dir.file("new2.json")));
  CHECK(apart(fresh, ""));  // no second output
}

TEST_CASE("devices may take two outputs, standard output may not", "[output_identity]") {
  CHECK(apart("/dev/null", "/dev/null"));
  CHECK(apart("/dev/zero", "/dev/zero"));  // any character device
  for (const std::string& other : {std::string("-"), std::string("/dev/stdout"), std::string("/dev/fd/1"),
                                   std::string("/proc/self/fd/1")}) {
    INFO(other);
    CHECK(refusal({{"--result_file", "-"}, {"--trace_file", other}}) ==
          "--trace_file=" + other + ": it is standard output, and so is --result_file=-: the two would "
          "interleave there; send one of them to a file");
  }
  TempDir dir;
  fs::create_symlink("/dev/stdout", dir.file("to_stdout"));
  CHECK_FALSE(apart(dir.file("to_stdout"), "/dev/fd/1"));
}

TEST_CASE("standard output sent to a file is that file", "[output_identity]") {
  TempDir dir;
  const std::string file = dir.file("out.json");
  with_stdout_at(file, [&] {
    CHECK(same_destination(identify_path("-"), identify_path(file)));
    CHECK_FALSE(apart("-", file));
    CHECK(apart("-", dir.file("elsewhere.json")));
  });
  CHECK(same_destination(identify_path("/dev/null"), identify_path("/dev/null")) == false);
}

TEST_CASE("an output that names an input is refused, the input is left as it was", "[output_identity]") {
  TempDir dir;
  const std::string input = dir.file("base.json");
  std::ofstream(input) << "{\"kept\": true}";
  fs::create_symlink(input, dir.file("link.json"));
  fs::create_hard_link(input, dir.file("hard.json"));
  for (const std::string& output : {input, dir.file("link.json"), dir.file("hard.json"),
                                    (dir.path() / "." / "base.json").string()}) {
    INFO(output);
    CHECK(refusal({{"--output", output}}, {{"", input}}) ==
          "--output=" + output + ": it names the input '" + input +
              "', which writing it would replace; give the output a name of its own");
  }
  CHECK_THAT(refusal({{"--output", input}}, {{"--system", input}}), Contains("the input --system=" + input));
  CHECK(refusal({{"--output", dir.file("new.md")}}, {{"", input}}) == "(no refusal)");
  CHECK(refusal({{"--output", "/dev/null"}}, {{"", "/dev/null"}}) == "(no refusal)");
  with_stdout_at(input, [&] {  // the shell truncated it already: stdout is never compared with inputs
    CHECK(refusal({{"--output", "-"}}, {{"", input}}) == "(no refusal)");
  });
}

TEST_CASE("report, compare and predict refuse an output that is an input or another output", "[output_identity]") {
  TempDir dir;
  fs::create_directory(dir.path() / "results");
  const std::string found = dir.file("results/run.json");  // an input found in a folder
  const std::string base = dir.file("base.json");
  const std::string system = dir.file("system.json");
  for (const std::string& file : {found, base, system}) std::ofstream(file) << "{}";
  const std::string folder = dir.file("results");

  CHECK_THAT(error_message_of<ConfigError>([&] { dpbench::parse_report_flags({folder, "--output", found}); }, "refusal"),
             Contains("--output=" + found + ": it names the input '" + found + "'"));
  CHECK_THAT(error_message_of<ConfigError>(
                 [&] { dpbench::parse_report_flags({base, "--output", dir.file("r.md"), "--plots", dir.file("r.md")}); },
                 "refusal"),
             Contains("--plots=" + dir.file("r.md") + ": it names the same file as --output=" + dir.file("r.md")));
  CHECK_FALSE(fs::exists(dir.file("r.md")));  // refused before the folder was made

  CHECK_THAT(error_message_of<ConfigError>(
                 [&] { dpbench::parse_compare_flags({base, folder, "--output=" + dir.file("results/./run.json")}); },
                 "refusal"),
             Contains("it names the input '" + found + "'"));

  const std::vector<std::string> predict = {base, "--system", system};
  auto predict_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = predict;
    args.insert(args.end(), extra.begin(), extra.end());
    return error_message_of<ConfigError>([&] { dpbench::parse_predict_flags(args); }, "refusal");
  };
  CHECK_THAT(predict_with({"--output", base}), Contains("it names the input '" + base + "'"));
  CHECK_THAT(predict_with({"--plot", system}), Contains("--plot=" + system + ": it names the input --system=" + system));
  CHECK_THAT(predict_with({"--output", dir.file("p.md"), "--plot", dir.file("./p.md")}),
             Contains("--plot=" + dir.file("./p.md") + ": it names the same file as --output=" + dir.file("p.md")));
  CHECK(predict_with({"--output", dir.file("p.md"), "--plot", dir.file("p.svg")}) == "(no refusal)");
  std::ifstream kept(base);
  CHECK(std::string(std::istreambuf_iterator<char>(kept), {}) == "{}");
}

TEST_CASE("a run refuses --trace_file and --result_file naming one file, before it runs", "[output_identity]") {
  TempDir dir;
  const std::string result = dir.file("r.json");
  std::ofstream(result) << "earlier";
  fs::create_symlink(result, dir.file("trace_link.json"));
  const std::vector<std::string> run = {"--device=cpu", "--model=trivial", "--num_batches=2", "--num_warmup_batches=1"};
  for (const std::string& trace : {result, dir.file("./r.json"), dir.file("trace_link.json")}) {
    INFO(trace);
    std::vector<std::string> args = run;
    args.insert(args.end(), {"--result_file=" + result, "--trace_file=" + trace});
    CHECK(dpbench::testing::run_cli(args) == 2);
    std::ifstream kept(result);
    CHECK(std::string(std::istreambuf_iterator<char>(kept), {}) == "earlier");
  }
  std::vector<std::string> both_on_stdout = run;
  both_on_stdout.insert(both_on_stdout.end(), {"--result_file=-", "--trace_file=/dev/stdout"});
  CHECK(dpbench::testing::run_cli(both_on_stdout) == 2);
}
