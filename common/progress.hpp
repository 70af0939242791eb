// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one progress reporter of the command line. On a terminal it redraws one
// live line in place; anywhere else (a CI log, a file) it prints a plain line
// now and then, so logs stay readable and still show that a run is alive.
#include <chrono>
#include <cstdio>
#include <string_view>

namespace pav {

class ProgressReporter {
 public:
  // enabled = false: prints nothing. plain_every_s: the least time between two
  // plain lines when `f` is not a terminal.
  ProgressReporter(std::FILE* f, bool enabled, double plain_every_s = 10.0);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // Shows `text` (one line, no newline) if enough time has passed since the
  // last one (a quarter second on a terminal), or always when `force`.
  void show(std::string_view text, bool force = false);
  // Clears the live line on a terminal, so what follows starts on a clean line.
  void done();
  bool enabled() const { return enabled_; }
  bool terminal() const { return terminal_; }

 private:
  std::FILE* f_;
  bool enabled_, terminal_;
  double plain_every_s_;
  bool live_ = false;  // a live line is on screen
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace pav
