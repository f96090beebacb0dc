// Non-blocking console lines (see console_writer.h).
#include "cli/console_writer.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dpbench {
namespace {

int64_t lines_in(const std::string& text) {
  return std::max<int64_t>(1, std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

ConsoleWriter::ConsoleWriter(int descriptor, size_t queue_bytes) : target_(descriptor), queue_limit_(queue_bytes) {}

ConsoleWriter::~ConsoleWriter() { close_private(); }

void ConsoleWriter::close_private() {
  if (private_fd_ >= 0) ::close(private_fd_);
  private_fd_ = -1;
}

// O_NONBLOCK on the target's own description would reach every process that shares it (the
// shell, the reader's other writers): a pipe, FIFO or terminal is reopened through /proc into a
// description of our own instead. A regular file never blocks and keeps its offset and O_APPEND
// only on the shared description, so it is written as it is. Checked before every write: a test
// or a caller may point the descriptor elsewhere (dup2) at any time.
void ConsoleWriter::ensure_stream() {
  struct stat info {};
  const int flags = ::fcntl(target_, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY || ::fstat(target_, &info) != 0) {
    give_up(EBADF);  // closed, or held read-only in its place (main.cpp)
    return;
  }
  if (known_target_ && info.st_dev == target_device_ && info.st_ino == target_inode_) return;
  close_private();
  known_target_ = true;
  target_device_ = info.st_dev;
  target_inode_ = info.st_ino;
  poll_first_ = false;
  if (S_ISREG(info.st_mode) || S_ISBLK(info.st_mode)) return;
  const std::string own = "/proc/self/fd/" + std::to_string(target_);
  private_fd_ = ::open(own.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  // A socket (or no /proc): the target itself, written only when poll() says it has room.
  if (private_fd_ < 0) poll_first_ = true;
}

void ConsoleWriter::drop_queue() {
  for (const std::string& text : queue_) dropped_ += lines_in(text);
  queue_.clear();
  front_offset_ = 0;
  queued_bytes_ = 0;
}

void ConsoleWriter::give_up(int error_number) {
  error_number_ = error_number;
  close_private();
  drop_queue();
}

void ConsoleWriter::pump() {
  if (error_number_ == 0 && !queue_.empty()) ensure_stream();
  if (error_number_ != 0) return drop_queue();
  const int fd = private_fd_ >= 0 ? private_fd_ : target_;
  while (!queue_.empty()) {
    const std::string& front = queue_.front();
    size_t length = front.size() - front_offset_;
    if (poll_first_) {
      pollfd room = {fd, POLLOUT, 0};
      if (::poll(&room, 1, 0) <= 0 || (room.revents & (POLLOUT | POLLERR | POLLHUP)) == 0) return;
      length = std::min<size_t>(length, PIPE_BUF);  // what POLLOUT promises to take at once
    }
    const ssize_t written = ::write(fd, front.data() + front_offset_, length);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // full: the lines wait in the queue
      return give_up(errno);
    }
    front_offset_ += static_cast<size_t>(written);
    queued_bytes_ -= static_cast<size_t>(written);
    if (front_offset_ == front.size()) {
      queue_.pop_front();
      front_offset_ = 0;
    }
  }
}

void ConsoleWriter::write(const std::string& text) {
  if (text.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  pump();  // room first, for a queue the reader has meanwhile emptied
  if (error_number_ != 0 || queued_bytes_ + text.size() > queue_limit_) {
    dropped_ += lines_in(text);
    return;
  }
  queue_.push_back(text);
  queued_bytes_ += text.size();
  pump();
}

bool ConsoleWriter::drain(std::chrono::milliseconds patience) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto last_taken = std::chrono::steady_clock::now();
  for (;;) {
    const size_t before = queued_bytes_;
    pump();
    if (queue_.empty()) return error_number_ == 0;
    const auto now = std::chrono::steady_clock::now();
    if (queued_bytes_ < before) last_taken = now;
    if (now - last_taken >= patience) {
      drop_queue();
      return false;
    }
    // Until the stream has room, or a little while: writing resumes either way.
    pollfd room = {private_fd_ >= 0 ? private_fd_ : target_, POLLOUT, 0};
    ::poll(&room, 1, 20);
  }
}

void ConsoleWriter::redirect(int descriptor) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (descriptor == target_) return;
  target_ = descriptor;
  known_target_ = false;
  error_number_ = 0;
  close_private();
}

int ConsoleWriter::descriptor() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return target_;
}

int64_t ConsoleWriter::dropped_lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

std::string ConsoleWriter::untold_losses() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (dropped_ == told_) return "";
  const int64_t count = dropped_ - told_;
  told_ = dropped_;
  const std::string stream = target_ == 1   ? "standard output"
                             : target_ == 2 ? "standard error"
                                            : "descriptor " + std::to_string(target_);
  std::string why;
  if (error_number_ == EPIPE)
    why = stream + "'s reader closed it";
  else if (error_number_ == EBADF)
    why = stream + " is not open for writing";
  else if (error_number_ != 0)
    why = "writing to " + stream + " failed (" + std::strerror(error_number_) + ")";
  else
    why = stream + " did not take them (its reader stopped reading)";
  return std::to_string(count) + (count == 1 ? " console line" : " console lines") + " not printed: " + why;
}

}  // namespace dpbench
