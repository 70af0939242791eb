// SPDX-License-Identifier: Apache-2.0
#include "common/progress.hpp"

#include <unistd.h>

namespace pav {

ProgressReporter::ProgressReporter(std::FILE* f, bool enabled, double plain_every_s)
    : f_(f), enabled_(enabled && f), terminal_(f && isatty(fileno(f))), plain_every_s_(plain_every_s) {}

ProgressReporter::~ProgressReporter() { done(); }

void ProgressReporter::show(std::string_view text, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (!force && shown_ && since < (terminal_ ? 0.25 : plain_every_s_)) return;
  if (terminal_) {
    std::fprintf(f_, "\r\033[K%.*s", int(text.size()), text.data());
    live_ = true;
  } else {
    std::fprintf(f_, "%.*s\n", int(text.size()), text.data());
  }
  std::fflush(f_);
  last_ = now;
  shown_ = true;
}

void ProgressReporter::done() {
  if (enabled_ && terminal_ && live_) {
    std::fprintf(f_, "\r\033[K");
    std::fflush(f_);
  }
  live_ = false;
}

}  // namespace pav
