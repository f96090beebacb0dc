// Console lines on their way to standard output that never hold up a run. A run's product is its
// result file: a stream that is closed (a reader like `head` that has left) or full (a reader that
// stopped reading) must neither kill the run (SIGPIPE is ignored: see main.cpp) nor block its step
// loop. Lines go out as the stream takes them, without ever blocking; what it does not take waits
// in a bounded queue, and what does not fit there, or comes after the stream closed, is dropped
// and counted, so the run can say afterwards what was not printed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace dpbench {

class ConsoleWriter {
 public:
  // Lines not yet taken by the stream are kept up to this many bytes (a reader may only be slow).
  static constexpr size_t kDefaultQueueBytes = size_t{1} << 20;

  explicit ConsoleWriter(int descriptor, size_t queue_bytes = kDefaultQueueBytes);
  ~ConsoleWriter();
  ConsoleWriter(const ConsoleWriter&) = delete;
  ConsoleWriter& operator=(const ConsoleWriter&) = delete;

  // Queues `text` (whole lines) and writes what the stream takes now. Never blocks.
  void write(const std::string& text);

  // Waits while the stream takes the queued lines; gives up (dropping and counting them) once it
  // took nothing for `patience`. Returns true when everything queued was written.
  bool drain(std::chrono::milliseconds patience);

  // Later lines go to `descriptor` (standard error where a result or trace takes standard output).
  void redirect(int descriptor);
  int descriptor() const;

  int64_t dropped_lines() const;
  // Where lines were dropped and not yet told: the line that says how many and why ("standard
  // output was closed (Broken pipe): 12 console lines not printed"); "" otherwise. Each dropped
  // line is told once.
  std::string untold_losses();

 private:
  void pump();              // writes what the stream takes now
  void ensure_stream();     // (re)opens the private descriptor when the target changed
  void close_private();
  void give_up(int error_number);
  void drop_queue();

  mutable std::mutex mutex_;
  int target_ = 1;             // the descriptor the lines are for
  int private_fd_ = -1;        // a non-blocking description of the same pipe or terminal, or -1
  bool poll_first_ = false;    // writing to target_ itself: ask poll() before each write
  dev_t target_device_ = 0;    // what target_ was open on when private_fd_ was made
  ino_t target_inode_ = 0;
  bool known_target_ = false;
  std::deque<std::string> queue_;  // lines not yet (wholly) written; the first from front_offset_
  size_t front_offset_ = 0;
  size_t queued_bytes_ = 0;
  size_t queue_limit_;
  int error_number_ = 0;       // why the stream was given up (EPIPE, ENOSPC, ...); 0: open
  int64_t dropped_ = 0, told_ = 0;
};

}  // namespace dpbench
