// SPDX-License-Identifier: Apache-2.0
#pragma once
// Drift runs' progress through the one reporter, and their clean stop: the
// callback run_drift calls before each step shows the line and, once the run
// should stop, throws DriftStopped to end it between steps.
#include <functional>
#include <memory>

#include "common/progress.hpp"
#include "properties/drift/run.hpp"
#include "properties/session/support.hpp"

namespace pav::session {

struct DriftStopped {};

// A progress callback for DriftRunOptions::progress; `reporter` may be disabled
// (the stop check still runs).
inline std::function<void(const props::DriftProgress&)> drift_progress(std::shared_ptr<ProgressReporter> reporter,
                                                                       std::function<bool()> should_stop) {
  return [reporter, should_stop](const props::DriftProgress& p) {
    if (should_stop() && p.done < p.total) throw DriftStopped{};  // a finished run keeps its report
    reporter->show(props::progress_line(p));
  };
}

}  // namespace pav::session
