// What a path names, found without blocking: readers and writers check the kind of a path before
// they open it, so a FIFO, a folder, a device or a link loop gets a line naming the real cause
// instead of a hang in open() or a misleading "no such file".
#pragma once

#include <string>

namespace dpbench {

enum class PathKind {
  missing,           // nothing at the path (and no link that points nowhere)
  regular_file,
  directory,
  fifo,
  character_device,  // /dev/null, /dev/stdout on a terminal, ...
  block_device,
  socket,
  dangling_link,     // a symbolic link whose target does not exist
  link_loop,         // symbolic links that lead back to themselves (ELOOP)
  not_accessible,    // stat failed for another reason (a folder on the way without search permission, ...)
};

struct PathInfo {
  PathKind kind = PathKind::missing;
  int error_number = 0;  // the errno behind not_accessible
};

// stat() that follows links, told apart from lstat() where the link itself is the problem.
PathInfo inspect_path(const std::string& path);

// "a FIFO (named pipe)", "a directory", "a symbolic link whose target does not exist", ...
std::string describe_path_kind(const PathInfo& info);

// Empty when `path` is a regular file this process can open for reading; otherwise why not, as a
// phrase that follows the path: "is a FIFO (named pipe), not a regular file", "does not exist",
// "is a loop of symbolic links", "cannot be opened: Permission denied". Opens and closes the file
// without blocking (O_NONBLOCK), so it is safe on FIFOs and devices.
std::string why_not_readable_file(const std::string& path);

// Empty when `path` is a directory; otherwise why not, e.g. "is a regular file, not a folder".
std::string why_not_folder(const std::string& path);

// Opens a regular file for reading without ever blocking in open(): O_NONBLOCK, fstat on the
// descriptor, then back to blocking reads. Returns the descriptor, or -1 with `*why` set as
// why_not_readable_file() words it.
int open_regular_file_for_reading(const std::string& path, std::string* why);

}  // namespace dpbench
