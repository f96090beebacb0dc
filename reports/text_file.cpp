// Whole-file text I/O for the reporters (see text_file.h).
#include "reports/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dpbench {
namespace {

std::string system_error_text(int error_number) { return std::strerror(error_number); }

}  // namespace

std::string read_text_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error_number = errno;
    throw std::runtime_error("cannot read '" + path + "': " + system_error_text(error_number));
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
      throw std::runtime_error("cannot read '" + path + "': " + system_error_text(error_number));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string temporary_path = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& step, int error_number) {
    ::unlink(temporary_path.c_str());
    throw std::runtime_error("cannot write '" + path + "' (" + step + "): " + system_error_text(error_number));
  };
  const int fd = ::open(temporary_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error_number = errno;
    throw std::runtime_error("cannot write '" + path + "' (create " + temporary_path +
                             "): " + system_error_text(error_number));
  }
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error_number = errno;
      ::close(fd);
      fail("write", error_number);
    }
    written += static_cast<size_t>(n);
  }
  // close can report a deferred write error (NFS), so its result matters.
  if (::close(fd) != 0) fail("close", errno);
  if (::rename(temporary_path.c_str(), path.c_str()) != 0) fail("rename", errno);
}

}  // namespace dpbench
