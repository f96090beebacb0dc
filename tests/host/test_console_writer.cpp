// Console lines never hold up a run: a reader that reads gets every line in order, a closed pipe
// or a full device costs lines (counted and told once) but never the process, and a reader that
// stopped reading never blocks a write.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <string>

#include "cli/console_writer.h"

using Catch::Contains;
using dpbench::ConsoleWriter;

namespace {

// SIGPIPE ignored while a test writes into a closed pipe, as dpbench's main() ignores it.
struct PipeSignalIgnored {
  struct sigaction before {};
  PipeSignalIgnored() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, &before);
  }
  ~PipeSignalIgnored() { ::sigaction(SIGPIPE, &before, nullptr); }
};

struct Pipe {
  int read_end = -1, write_end = -1;
  Pipe() {
    int ends[2];
    REQUIRE(::pipe(ends) == 0);
    read_end = ends[0];
    write_end = ends[1];
  }
  ~Pipe() {
    close_read_end();
    if (write_end >= 0) ::close(write_end);
  }
  void close_read_end() {
    if (read_end >= 0) ::close(read_end);
    read_end = -1;
  }
};

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  return text;
}

// What one read() finds: the lines written so far, with the writer still open.
std::string read_available(int fd) {
  char buffer[4096];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
}

std::string line(int i) { return "  step " + std::to_string(i) + "  images/sec: 123.4\n"; }

}  // namespace

TEST_CASE("a reader that reads gets every line, in order, and nothing is told lost", "[console_writer]") {
  Pipe pipe;
  auto reader = std::async(std::launch::async, [&] { return read_all(pipe.read_end); });
  std::string expected;
  {
    ConsoleWriter writer(pipe.write_end);
    for (int i = 0; i < 20000; ++i) {  // over a megabyte: more than the pipe and the queue hold at once
      writer.write(line(i));
      expected += line(i);
    }
    CHECK(writer.drain(std::chrono::seconds(30)));
    CHECK(writer.dropped_lines() == 0);
    CHECK(writer.untold_losses().empty());
  }
  ::close(pipe.write_end);
  pipe.write_end = -1;
  CHECK(reader.get() == expected);
}

TEST_CASE("a closed pipe costs the lines, not the process, and is told once", "[console_writer]") {
  PipeSignalIgnored ignored;
  Pipe pipe;
  ConsoleWriter writer(pipe.write_end);
  writer.write(line(1));
  CHECK(read_available(pipe.read_end) == line(1));
  pipe.close_read_end();
  for (int i = 2; i <= 4; ++i) writer.write(line(i));
  CHECK(writer.dropped_lines() == 3);
  CHECK(writer.untold_losses() == "3 console lines not printed: descriptor " + std::to_string(pipe.write_end) +
                                      "'s reader closed it");
  CHECK(writer.untold_losses().empty());
  writer.write(line(5));
  CHECK_THAT(writer.untold_losses(), Contains("1 console line not printed"));
}

TEST_CASE("a reader that stopped reading never blocks a write, and the lines it missed are counted", "[console_writer]") {
  Pipe pipe;
  ConsoleWriter writer(pipe.write_end, 4096);
  // A blocking write would never return here: nobody reads until the end.
  for (int i = 0; i < 100000; ++i) writer.write(line(i));
  CHECK(writer.dropped_lines() > 90000);
  CHECK_FALSE(writer.drain(std::chrono::milliseconds(50)));
  CHECK_THAT(writer.untold_losses(), Contains("did not take them (its reader stopped reading)"));
  // The pipe's own description stays blocking: the reader and the shell share it.
  CHECK((::fcntl(pipe.write_end, F_GETFL) & O_NONBLOCK) == 0);
  // What was written is whole lines.
  ::fcntl(pipe.read_end, F_SETFL, ::fcntl(pipe.read_end, F_GETFL) | O_NONBLOCK);
  const std::string got = read_all(pipe.read_end);
  REQUIRE_FALSE(got.empty());
  CHECK(got.back() == '\n');
  CHECK(got.rfind(line(0), 0) == 0);
}

TEST_CASE("a full device and a closed descriptor are told as what they are", "[console_writer]") {
  const int full = ::open("/dev/full", O_WRONLY);
  if (full >= 0) {
    ConsoleWriter writer(full);
    writer.write(line(1));
    CHECK_THAT(writer.untold_losses(), Contains("failed (No space left on device)"));
    ::close(full);
  }
  const int read_only = ::open("/dev/null", O_RDONLY);
  ConsoleWriter writer(read_only);
  writer.write(line(1));
  CHECK_THAT(writer.untold_losses(), Contains("is not open for writing"));
  ::close(read_only);
}

TEST_CASE("lines follow a redirect to another descriptor", "[console_writer]") {
  Pipe first, second;
  {
    ConsoleWriter writer(first.write_end);
    writer.write("one\n");
    writer.redirect(second.write_end);
    CHECK(writer.descriptor() == second.write_end);
    writer.write("two\n");
    CHECK(writer.drain(std::chrono::seconds(5)));
  }
  CHECK(read_available(first.read_end) == "one\n");
  CHECK(read_available(second.read_end) == "two\n");
}
