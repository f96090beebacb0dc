// MpiContext (see the header) on the MPI C API.
#include "engine/mpi/mpi_context.h"

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "engine/errors.h"

namespace dpbench {
namespace {

int g_rank_for_messages = -1;  // set once MPI is up, so a failing call can say which rank it was

[[noreturn]] void throw_mpi_error(const char* call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) text[0] = '\0';
  std::ostringstream message;
  message << "MPI error " << code << " (" << text << ") in " << call << " at " << file << ":" << line;
  if (g_rank_for_messages >= 0) message << " on rank " << g_rank_for_messages;
  throw RuntimeError(message.str());
}

#define DPB_MPI_CHECK(call)                                                   \
  do {                                                                        \
    const int dpb_status_ = (call);                                           \
    if (dpb_status_ != MPI_SUCCESS) throw_mpi_error(#call, dpb_status_, __FILE__, __LINE__); \
  } while (0)

// FNV-1a: equal texts give equal digests; a rank compares digests before sending any text.
uint64_t digest(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

bool MpiContext::launched_by_mpi() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"})
    if (std::getenv(variable) != nullptr) return true;
  return false;
}

MpiContext::MpiContext() {
  int initialized = 0;
  DPB_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) throw RuntimeError("MpiContext: MPI is already initialised in this process");
  int provided = MPI_THREAD_SINGLE;
  DPB_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw RuntimeError("the MPI library gives threads level " + std::to_string(provided) +
                       ", and dpbench drives its devices from several threads (MPI_THREAD_MULTIPLE); "
                       "use an MPI built with thread support (Open MPI and MPICH from Debian are)");
  }
  DPB_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  DPB_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  DPB_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  g_rank_for_messages = rank_;

  MPI_Comm host = MPI_COMM_NULL;
  DPB_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host));
  DPB_MPI_CHECK(MPI_Comm_rank(host, &local_rank_));
  DPB_MPI_CHECK(MPI_Comm_size(host, &local_size_));
  DPB_MPI_CHECK(MPI_Comm_free(&host));

  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int length = 0;
  DPB_MPI_CHECK(MPI_Get_processor_name(name, &length));
  std::vector<char> names(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  DPB_MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME,
                              MPI_CHAR, MPI_COMM_WORLD));
  for (int r = 0; r < size_; ++r) hostnames_.emplace_back(names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME);
}

MpiContext::~MpiContext() {
  g_rank_for_messages = -1;
  MPI_Finalize();
}

void MpiContext::broadcast(void* data, size_t bytes, int root) const {
  if (bytes > static_cast<size_t>(INT32_MAX)) throw RuntimeError("MpiContext::broadcast: more than 2 GiB");
  DPB_MPI_CHECK(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
}

void MpiContext::all_gather_bytes(const void* send, size_t bytes, void* recv) const {
  if (bytes > static_cast<size_t>(INT32_MAX)) throw RuntimeError("MpiContext::all_gather_bytes: more than 2 GiB");
  DPB_MPI_CHECK(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                              MPI_COMM_WORLD));
}

std::vector<std::string> MpiContext::all_gather_text(const std::string& text) const {
  const int length = static_cast<int>(text.size());
  std::vector<int> lengths(size_), displacements(size_);
  DPB_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    displacements[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  DPB_MPI_CHECK(MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), displacements.data(),
                               MPI_CHAR, MPI_COMM_WORLD));
  std::vector<std::string> texts;
  for (int r = 0; r < size_; ++r) texts.push_back(all.substr(displacements[r], lengths[r]));
  return texts;
}

std::vector<double> MpiContext::all_gather(double value) const {
  std::vector<double> values(size_);
  DPB_MPI_CHECK(MPI_Allgather(&value, 1, MPI_DOUBLE, values.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD));
  return values;
}

void MpiContext::require_same_on_every_rank(const std::string& what, const std::string& text) const {
  const uint64_t mine[2] = {digest(text), text.size()};
  std::vector<uint64_t> all(2 * static_cast<size_t>(size_));
  DPB_MPI_CHECK(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD));
  int differing = -1;
  for (int r = 1; r < size_ && differing < 0; ++r)
    if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) differing = r;
  if (differing < 0) return;

  // Every rank learns both texts, so every rank can say the same thing before it stops.
  auto text_of = [&](int root) {
    std::string copy = rank_ == root ? text : std::string(all[2 * root + 1], '\0');
    if (!copy.empty()) broadcast(copy.data(), copy.size(), root);
    return copy;
  };
  const std::vector<std::string> first = lines_of(text_of(0)), other = lines_of(text_of(differing));
  size_t line = 0;
  while (line < first.size() && line < other.size() && first[line] == other[line]) ++line;
  auto quoted = [](const std::vector<std::string>& lines, size_t i) {
    return i < lines.size() ? "'" + lines[i] + "'" : std::string("nothing");
  };
  throw ConfigError("the ranks disagree on " + what + ": rank " + std::to_string(differing) + " has " +
                    quoted(other, line) + " where rank 0 has " + quoted(first, line) +
                    "; start every rank with the same flags (and the same dpbench)");
}

void MpiContext::abort(int exit_code) const {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for a library that does
}

}  // namespace dpbench
