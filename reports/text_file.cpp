// Whole-file text I/O for results and reports (see text_file.h).
#include "reports/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/errors.h"

namespace dpbench {
namespace {

std::string system_error_text(int error_number) { return std::strerror(error_number); }

std::string named(const std::string& what, const std::string& path) {
  return (what.empty() ? std::string() : what + " ") + "'" + path + "'";
}

// Writes all of `text`, retrying short writes and EINTR. Returns 0 or the errno of the failure.
int write_fully(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    written += static_cast<size_t>(n);
  }
  return 0;
}

// Makes the rename itself durable across a power loss; best effort, as some file systems refuse
// to open or fsync a directory and the file is already complete either way.
void sync_parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string read_text_file(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error_number = errno;
    throw RuntimeError("cannot read " + named(what, path) + ": " + system_error_text(error_number));
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error_number = errno;
      ::close(fd);
      throw RuntimeError("cannot read " + named(what, path) + ": " + system_error_text(error_number));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

void write_text_atomically(const std::string& path, const std::string& text, const std::string& what) {
  const std::string temporary_path = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& step, int error_number) {
    ::unlink(temporary_path.c_str());
    throw RuntimeError("cannot write " + named(what, path) + " (" + step + "): " + system_error_text(error_number));
  };
  const int fd = ::open(temporary_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    // Nothing was created, but a stale file of this name is not ours to remove either.
    const int error_number = errno;
    throw RuntimeError("cannot write " + named(what, path) + " (create " + temporary_path +
                       "): " + system_error_text(error_number));
  }
  if (const int error_number = write_fully(fd, text); error_number != 0) {
    ::close(fd);
    fail("write", error_number);
  }
  if (::fsync(fd) != 0) {
    const int error_number = errno;
    ::close(fd);
    fail("fsync", error_number);
  }
  // close can report a deferred write error (NFS), so its result matters.
  if (::close(fd) != 0) fail("close", errno);
  if (::rename(temporary_path.c_str(), path.c_str()) != 0) fail("rename", errno);
  sync_parent_directory(path);
}

}  // namespace dpbench
