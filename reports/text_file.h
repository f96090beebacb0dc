// Whole-file text I/O for results, reports and plots: read a file into a string without ever
// blocking on a FIFO, and write an output safely. A regular file (or a new name in an existing
// folder) is replaced atomically (temporary file in the same folder, fsync, rename, directory
// fsync), so it is never left half written, even by a crash or a power loss; a symbolic link is
// followed and its target replaced the same way; a character device, a FIFO and standard output
// ("-", /dev/stdout, /dev/fd/N) are written through, never renamed over.
#pragma once

#include <string>
#include <vector>

namespace dpbench {

// Throws RuntimeError "cannot read <what> '<path>': it <why>" (`what` may be empty); a FIFO, a
// folder or a device is refused without opening it for I/O.
std::string read_text_file(const std::string& path, const std::string& what = "");

enum class OutputMode {
  replace_atomically,  // a regular file or a new name: temporary file + rename
  write_through,       // a character device or a FIFO: opened and written in place
  file_descriptor,     // "-", /dev/stdout, /dev/stderr, /dev/fd/N: written to the open descriptor
};

struct OutputTarget {
  OutputMode mode = OutputMode::replace_atomically;
  std::string path;            // where the bytes go: the final target of any symbolic links
  std::string temporary_path;  // replace_atomically: the name written first (within NAME_MAX)
  int descriptor = -1;         // file_descriptor
};

// Where `path` leads and how it will be written. Throws ConfigError naming `what`, the path, the
// problem and the fix for anything that cannot be written: a folder, a block device or socket, a
// link loop, a missing or read-only folder, a name too long for its temporary file.
OutputTarget resolve_output_target(const std::string& path, const std::string& what);

// Checked before a run so that a long measurement never ends in an unwritable path: resolves the
// target as above, creates and removes its temporary file (which proves the folder accepts it),
// and removes temporary files of the same output left by processes that no longer run (a crash
// or SIGKILL mid-write). Throws ConfigError as resolve_output_target does.
OutputTarget check_output_path(const std::string& path, const std::string& what);

// An output or input of a command as its error lines name it: a flag with its value
// ("--output=r.md"), a path given without a flag (`flag` empty: "'r.json'"), or a default no flag
// named (`flag` a phrase, said as it is: "the report (no --output)").
struct NamedPath {
  std::string flag;
  std::string path;
};

// Checked before a command reads or runs anything, so that no output destroys another or what
// the command reads: throws ConfigError, one line naming both, where two `outputs` are one
// destination (same_destination in engine/machine/path_identity.h: one file under two names, one new
// name spelt two ways, standard output twice) or an output would replace one of `inputs`. Empty
// paths are skipped.
void check_outputs_apart(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs = {});

// Writes `text` to `path` as resolve_output_target says. Throws RuntimeError "cannot write
// <what> '<path>' (<step>): <system error>"; a temporary file is removed on failure. A FIFO with
// no reader is waited for up to kFifoReaderWaitSeconds, then refused.
void write_text_atomically(const std::string& path, const std::string& text, const std::string& what = "");

inline constexpr int kFifoReaderWaitSeconds = 30;

}  // namespace dpbench
