// SPDX-License-Identifier: Apache-2.0
#pragma once
// Drift runs' progress through the one reporter, and their clean stop: the
// callback run_drift calls before each step shows the line and, once a stop
// signal has arrived, throws DriftStopped to end the run between steps.
#include <functional>
#include <memory>

#include "common/progress.hpp"
#include "properties/drift_run.hpp"
#include "tools/stop.hpp"

namespace pav::cli {

struct DriftStopped {};

// A progress callback for DriftRunOptions::progress; `reporter` may be disabled
// (the stop check still runs).
inline std::function<void(const props::DriftProgress&)> drift_progress(std::shared_ptr<ProgressReporter> reporter) {
  return [reporter](const props::DriftProgress& p) {
    if (stop_requested() && p.done < p.total) throw DriftStopped{};  // a finished run keeps its report
    reporter->show(props::progress_line(p));
  };
}

}  // namespace pav::cli
