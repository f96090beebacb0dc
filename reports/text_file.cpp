// Whole-file text I/O for results and reports (see text_file.h).
#include "reports/text_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "engine/errors.h"
#include "engine/machine/file_checks.h"
#include "engine/machine/path_identity.h"

namespace dpbench {
namespace {

std::string system_error_text(int error_number) { return std::strerror(error_number); }

std::string named(const std::string& what, const std::string& path) {
  return (what.empty() ? std::string() : what + " ") + "'" + path + "'";
}

// Writes all of `text`, retrying short writes and EINTR. Returns 0 or the errno of the failure.
// SIGPIPE is held back meanwhile: a reader that goes away is an EPIPE error, not a killed process.
int write_fully(int fd, const std::string& text) {
  sigset_t pipe_signal, previous;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
  int result = 0;
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      result = errno;
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (result == EPIPE) {
    // Consume the pending SIGPIPE this thread raised before unblocking it.
    const timespec no_wait = {0, 0};
    sigtimedwait(&pipe_signal, nullptr, &no_wait);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return result;
}

// Makes the rename itself durable across a power loss; best effort, as some file systems refuse
// to open or fsync a directory and the file is already complete either way.
void sync_parent_directory(const std::string& path) {
  const int fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// "<name>.tmp.<pid>", with the name shortened where the whole would pass the folder's NAME_MAX.
std::string temporary_name_for(const std::string& path) {
  const std::string folder = folder_of(path);
  const std::string suffix = ".tmp." + std::to_string(::getpid());
  long name_max = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = NAME_MAX;
  std::string base = base_name_of(path);
  if (base.size() + suffix.size() > static_cast<size_t>(name_max))
    base.resize(static_cast<size_t>(name_max) - suffix.size());
  return (path.find('/') == std::string::npos ? std::string() : folder + "/") + base + suffix;
}

bool process_is_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

// Temporary files of this output ("<name>.tmp.<pid>") whose writer was killed before its rename.
void remove_stale_temporaries(const std::string& temporary_path) {
  const std::string folder = folder_of(temporary_path);
  const std::string own = base_name_of(temporary_path);
  const std::string prefix = own.substr(0, own.rfind('.') + 1);  // "<name>.tmp."
  DIR* listing = ::opendir(folder.c_str());
  if (listing == nullptr) return;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    if (process_is_gone(std::stol(digits))) ::unlink((folder + "/" + name).c_str());
  }
  ::closedir(listing);
}

// "--result_file=PATH: problem" for a flag, "output 'PATH' problem" otherwise.
[[noreturn]] void refuse(const std::string& what, const std::string& path, const std::string& problem) {
  if (what.rfind("--", 0) == 0) throw ConfigError(what + "=" + path + ": it " + problem);
  throw ConfigError(named(what.empty() ? "output" : what, path) + " " + problem);
}

const char* const kOutputKinds =
    "give a regular file or a new name in an existing folder, a character device such as /dev/null, a FIFO, or - for "
    "standard output";

// Opens a FIFO for writing without hanging forever when nobody reads it.
int open_fifo_for_writing(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kFifoReaderWaitSeconds);
  for (;;) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0) {
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      return fd;
    }
    if (errno != ENXIO || std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void write_through(const OutputTarget& target, const std::string& text, const std::string& what,
                   const std::string& given_path) {
  auto fail = [&](const std::string& step, int error_number) {
    throw RuntimeError("cannot write " + named(what, given_path) + " (" + step + "): " + system_error_text(error_number));
  };
  if (target.mode == OutputMode::file_descriptor) {
    const int error_number = write_fully(target.descriptor, text);
    if (error_number == 0) return;
    const std::string stream = target.descriptor == 1   ? "standard output"
                               : target.descriptor == 2 ? "standard error"
                                                        : "descriptor " + std::to_string(target.descriptor);
    throw RuntimeError("cannot write " + (what.empty() ? std::string("output") : what) + " to " + stream + ": " +
                       system_error_text(error_number) + (error_number == EPIPE ? " (its reader closed it)" : ""));
  }
  const PathInfo info = inspect_path(target.path);
  const int fd = info.kind == PathKind::fifo
                     ? open_fifo_for_writing(target.path)
                     : ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENXIO)
      throw RuntimeError("cannot write " + named(what, given_path) + ": no process read the FIFO within " +
                         std::to_string(kFifoReaderWaitSeconds) + " s; start its reader first");
    fail("open", errno);
  }
  const int error_number = write_fully(fd, text);
  ::close(fd);
  if (error_number != 0) fail("write", error_number);
}

}  // namespace

std::string read_text_file(const std::string& path, const std::string& what) {
  std::string why;
  const int fd = open_regular_file_for_reading(path, &why);
  if (fd < 0) throw RuntimeError("cannot read " + named(what, path) + ": it " + why);
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

OutputTarget resolve_output_target(const std::string& path, const std::string& what) {
  OutputTarget target;
  if (path.empty()) refuse(what, path, "is empty; " + std::string(kOutputKinds));
  if (!follow_links(path, &target.path)) refuse(what, path, "is a loop of symbolic links; " + std::string(kOutputKinds));
  if (const int descriptor = standard_descriptor_named(target.path); descriptor >= 0) {
    const int flags = ::fcntl(descriptor, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY)
      refuse(what, path, "names descriptor " + std::to_string(descriptor) + ", which is not open for writing");
    target.mode = OutputMode::file_descriptor;
    target.descriptor = descriptor;
    return target;
  }
  const std::string via = target.path == path ? "" : " (a symbolic link to '" + target.path + "')";
  const PathInfo info = inspect_path(target.path);
  switch (info.kind) {
    case PathKind::character_device:
    case PathKind::fifo:
      if (::access(target.path.c_str(), W_OK) != 0)
        refuse(what, path, "is " + describe_path_kind(info) + via + ", which this process may not write");
      target.mode = OutputMode::write_through;
      return target;
    case PathKind::regular_file:
    case PathKind::missing:
      break;
    case PathKind::directory:
      refuse(what, path, "is a directory" + via + "; give a file path in it");
    default:
      refuse(what, path, "is " + describe_path_kind(info) + via + "; " + kOutputKinds);
  }
  const std::string folder = folder_of(target.path);
  const std::string why_folder = why_not_folder(folder);
  if (!why_folder.empty())
    refuse(what, path, "cannot be created" + via + ": its folder '" + folder + "' " + why_folder +
                           "; give a path in an existing writable folder");
  target.mode = OutputMode::replace_atomically;
  target.temporary_path = temporary_name_for(target.path);
  return target;
}

OutputTarget check_output_path(const std::string& path, const std::string& what) {
  const OutputTarget target = resolve_output_target(path, what);
  if (target.mode != OutputMode::replace_atomically) return target;
  remove_stale_temporaries(target.temporary_path);
  const int fd = ::open(target.temporary_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error_number = errno;
    if (error_number == EEXIST) return target;  // our own name from an earlier check: writable
    refuse(what, path, "cannot be written: creating its temporary file '" + target.temporary_path +
                           "' fails (" + system_error_text(error_number) +
                           "); give a path in an existing writable folder, with a shorter name if it is long");
  }
  ::close(fd);
  ::unlink(target.temporary_path.c_str());
  return target;
}

namespace {

std::string described(const NamedPath& named_path) {
  if (named_path.flag.empty()) return "'" + named_path.path + "'";
  if (named_path.flag.rfind("--", 0) != 0) return named_path.flag;  // a phrase for a default
  return named_path.flag + "=" + named_path.path;
}

}  // namespace

void check_outputs_apart(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  std::vector<PathIdentity> input_identities;
  for (const NamedPath& input : inputs) input_identities.push_back(identify_path(input.path));
  std::vector<std::pair<const NamedPath*, PathIdentity>> seen;
  for (const NamedPath& output : outputs) {
    if (output.path.empty()) continue;
    const PathIdentity identity = identify_path(output.path);
    for (const auto& [earlier, earlier_identity] : seen) {
      if (!same_destination(identity, earlier_identity)) continue;
      const std::string stream = standard_stream_name(identity);
      if (!stream.empty() && identity.descriptor == earlier_identity.descriptor)
        throw ConfigError(described(output) + ": it is " + stream + ", and so is " + described(*earlier) +
                          ": the two would interleave there; send one of them to a file");
      throw ConfigError(described(output) + ": it names the same file as " + described(*earlier) +
                        "; give each output a name of its own");
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      if (replaces_input(identity, input_identities[i]))
        throw ConfigError(described(output) + ": it names the input " + described(inputs[i]) +
                          ", which writing it would replace; give the output a name of its own");
    seen.emplace_back(&output, identity);
  }
}

void write_text_atomically(const std::string& path, const std::string& text, const std::string& what) {
  OutputTarget target;
  try {
    target = resolve_output_target(path, what);
  } catch (const ConfigError& error) {
    throw RuntimeError(error.what());  // found only now: the path changed during the run
  }
  if (target.mode != OutputMode::replace_atomically) return write_through(target, text, what, path);

  const std::string& temporary_path = target.temporary_path;
  auto fail = [&](const std::string& step, int error_number) {
    ::unlink(temporary_path.c_str());
    throw RuntimeError("cannot write " + named(what, path) + " (" + step + "): " + system_error_text(error_number));
  };
  const int fd = ::open(temporary_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
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
  if (::rename(temporary_path.c_str(), target.path.c_str()) != 0) fail("rename", errno);
  sync_parent_directory(target.path);
}

}  // namespace dpbench
