// Path identity: device and inode after following links (see path_identity.h).
#include "engine/machine/path_identity.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dpbench {

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int standard_descriptor_named(const std::string& path) {
  if (path == "-" || path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string p(prefix);
    if (path.size() > p.size() && path.compare(0, p.size(), p) == 0) {
      const std::string digits = path.substr(p.size());
      if (digits.size() <= 6 && digits.find_first_not_of("0123456789") == std::string::npos)
        return std::stoi(digits);
    }
  }
  return -1;
}

bool follow_links(const std::string& path, std::string* final_path) {
  std::string current = path;
  for (int hop = 0; hop < 40; ++hop) {
    struct stat link {};
    if (standard_descriptor_named(current) >= 0 || ::lstat(current.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) {
      *final_path = current;
      return true;
    }
    char target[PATH_MAX];
    const ssize_t n = ::readlink(current.c_str(), target, sizeof target - 1);
    if (n < 0) {
      *final_path = current;
      return true;
    }
    const std::string next(target, static_cast<size_t>(n));
    current = !next.empty() && next[0] == '/' ? next : folder_of(current) + "/" + next;
  }
  return false;
}

namespace {

void take_file(const struct stat& info, PathIdentity* identity) {
  identity->has_file = true;
  identity->device = info.st_dev;
  identity->inode = info.st_ino;
  identity->character_device = S_ISCHR(info.st_mode);
}

bool same_file(const PathIdentity& first, const PathIdentity& second) {
  return first.has_file && second.has_file && first.device == second.device && first.inode == second.inode;
}

}  // namespace

PathIdentity identify_path(const std::string& path) {
  PathIdentity identity;
  std::string final_path;
  if (path.empty() || !follow_links(path, &final_path)) return identity;
  struct stat info {};
  if (const int descriptor = standard_descriptor_named(final_path); descriptor >= 0) {
    identity.kind = PathIdentity::Kind::descriptor;
    identity.descriptor = descriptor;
    if (::fstat(descriptor, &info) == 0) take_file(info, &identity);
    return identity;
  }
  if (::stat(final_path.c_str(), &info) == 0) {
    identity.kind = PathIdentity::Kind::existing;
    take_file(info, &identity);
    return identity;
  }
  // Not there yet: two spellings of one new name share the folder and the name in it.
  if (::stat(folder_of(final_path).c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return identity;
  identity.kind = PathIdentity::Kind::new_name;
  take_file(info, &identity);
  identity.character_device = false;
  identity.name = base_name_of(final_path);
  return identity;
}

bool same_destination(const PathIdentity& first, const PathIdentity& second) {
  using Kind = PathIdentity::Kind;
  if (first.kind == Kind::unknown || second.kind == Kind::unknown) return false;
  if (first.kind == Kind::descriptor && second.kind == Kind::descriptor && first.descriptor == second.descriptor)
    return true;
  if ((first.kind == Kind::new_name) != (second.kind == Kind::new_name)) return false;
  if (first.kind == Kind::new_name) return same_file(first, second) && first.name == second.name;
  return same_file(first, second) && !first.character_device;
}

bool replaces_input(const PathIdentity& output, const PathIdentity& input) {
  return output.kind == PathIdentity::Kind::existing && input.kind == PathIdentity::Kind::existing &&
         same_file(output, input) && !output.character_device;
}

std::string standard_stream_name(const PathIdentity& identity) {
  if (identity.kind != PathIdentity::Kind::descriptor) return "";
  if (identity.descriptor == 1) return "standard output";
  if (identity.descriptor == 2) return "standard error";
  return "";
}

}  // namespace dpbench
