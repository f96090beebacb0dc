// Path kinds and non-blocking opens for every file dpbench reads (see file_checks.h).
#include "engine/machine/file_checks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dpbench {
namespace {

PathKind kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return PathKind::regular_file;
  if (S_ISDIR(mode)) return PathKind::directory;
  if (S_ISFIFO(mode)) return PathKind::fifo;
  if (S_ISCHR(mode)) return PathKind::character_device;
  if (S_ISBLK(mode)) return PathKind::block_device;
  return PathKind::socket;
}

std::string phrase_for(const PathInfo& info) {
  switch (info.kind) {
    case PathKind::missing: return "does not exist";
    case PathKind::regular_file: return "";
    case PathKind::dangling_link: return "is a symbolic link whose target does not exist";
    case PathKind::link_loop: return "is a loop of symbolic links";
    case PathKind::not_accessible: return std::string("cannot be examined: ") + std::strerror(info.error_number);
    default: return "is " + describe_path_kind(info) + ", not a regular file";
  }
}

}  // namespace

PathInfo inspect_path(const std::string& path) {
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0) return {kind_of_mode(target.st_mode), 0};
  const int error_number = errno;
  if (error_number == ELOOP) return {PathKind::link_loop, error_number};
  if (error_number == ENOENT) {
    struct stat link {};
    // The name exists but leads nowhere: a link to a missing target.
    if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) return {PathKind::dangling_link, error_number};
    return {PathKind::missing, error_number};
  }
  if (error_number == ENOTDIR) return {PathKind::missing, error_number};
  return {PathKind::not_accessible, error_number};
}

std::string describe_path_kind(const PathInfo& info) {
  switch (info.kind) {
    case PathKind::missing: return "nothing (no such file or folder)";
    case PathKind::regular_file: return "a regular file";
    case PathKind::directory: return "a directory";
    case PathKind::fifo: return "a FIFO (named pipe)";
    case PathKind::character_device: return "a character device";
    case PathKind::block_device: return "a block device";
    case PathKind::socket: return "a socket";
    case PathKind::dangling_link: return "a symbolic link whose target does not exist";
    case PathKind::link_loop: return "a loop of symbolic links";
    case PathKind::not_accessible: return std::string("not accessible (") + std::strerror(info.error_number) + ")";
  }
  return "unknown";
}

std::string why_not_readable_file(const std::string& path) {
  std::string why;
  const int fd = open_regular_file_for_reading(path, &why);
  if (fd >= 0) ::close(fd);
  return why;
}

std::string why_not_folder(const std::string& path) {
  const PathInfo info = inspect_path(path);
  if (info.kind == PathKind::directory) return "";
  if (info.kind == PathKind::regular_file) return "is a regular file, not a folder";
  const std::string phrase = phrase_for(info);
  if (phrase.size() > 20 && phrase.compare(phrase.size() - 20, 20, ", not a regular file") == 0)
    return phrase.substr(0, phrase.size() - 20) + ", not a folder";
  return phrase;
}

int open_regular_file_for_reading(const std::string& path, std::string* why) {
  const PathInfo info = inspect_path(path);
  if (info.kind != PathKind::regular_file) {
    *why = phrase_for(info);
    return -1;
  }
  // O_NONBLOCK: a FIFO swapped in after the stat above must not block the open either.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *why = std::string("cannot be opened: ") + std::strerror(errno);
    return -1;
  }
  struct stat opened {};
  if (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode)) {
    const PathInfo now = {::fstat(fd, &opened) == 0 ? kind_of_mode(opened.st_mode) : PathKind::not_accessible, errno};
    ::close(fd);
    *why = phrase_for(now);
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  why->clear();
  return fd;
}

}  // namespace dpbench
