// Which file a path names, however it is spelt (./r.json, /abs/r.json, a symbolic link, a hard
// link), so that no output of a command replaces one of its inputs or another of its outputs.
// Files are told apart by device and inode after following links; a name that does not exist yet
// by the folder it would be created in (device and inode) and its name there; the descriptors a
// process already holds ("-", /dev/stdout, /dev/fd/N) by their number, and by what they are open on.
#pragma once

#include <sys/types.h>

#include <string>

namespace dpbench {

// The folder part of a path ("." for a bare name, "/" for "/x") and the name after the last '/'.
std::string folder_of(const std::string& path);
std::string base_name_of(const std::string& path);

// 1 for "-" and /dev/stdout, 2 for /dev/stderr, N for /dev/fd/N and /proc/self/fd/N; else -1.
// Such names stand for a descriptor this process already holds: reopening them by path would
// replace or truncate whatever the shell connected there.
int standard_descriptor_named(const std::string& path);

// Follows a chain of symbolic links to the name it ends at (which may not exist yet), stopping
// early at a name of a standard descriptor (a link to /dev/stdout). False after too many links (a loop).
bool follow_links(const std::string& path, std::string* final_path);

struct PathIdentity {
  enum class Kind {
    unknown,     // a loop of links, or a name in a folder that cannot be examined
    descriptor,  // a descriptor this process holds
    existing,    // a file, folder, device or FIFO that is there
    new_name,    // nothing there yet: `name` in the folder of device/inode
  };
  Kind kind = Kind::unknown;
  int descriptor = -1;          // descriptor: its number
  bool has_file = false;        // device and inode are known (descriptor: it is open)
  dev_t device = 0;             // existing: the file's; new_name: its folder's; descriptor: what it is open on
  ino_t inode = 0;
  bool character_device = false;  // a terminal, /dev/null, /dev/full: written through, shared harmlessly
  std::string name;             // new_name: the name in that folder
};

PathIdentity identify_path(const std::string& path);

// True when two outputs would destroy or interleave each other: one descriptor twice (stdout
// named as "-" and /dev/fd/1), one file, FIFO or pipe twice (two names, a hard link, stdout
// redirected to it), one new name in one folder twice. Two writes to one character device
// (/dev/null, a terminal) are fine.
bool same_destination(const PathIdentity& first, const PathIdentity& second);

// True when writing the output `output` would replace the existing file `input` (a file the
// command reads). A descriptor is never compared: the shell opened it, and truncated what it
// truncates, before the command began.
bool replaces_input(const PathIdentity& output, const PathIdentity& input);

// "standard output" for descriptor 1, "standard error" for 2, else "" (for messages).
std::string standard_stream_name(const PathIdentity& identity);

}  // namespace dpbench
