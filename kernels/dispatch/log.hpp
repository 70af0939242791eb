// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where routing and plan-lifecycle events go: one line per event, no trailing
// newline. The default writes "pav: <line>" to stderr; tests capture lines.
#include <functional>
#include <string_view>

namespace pav::kernels::dispatch {

using LogSink = std::function<void(std::string_view line)>;

LogSink stderr_log_sink();

}  // namespace pav::kernels::dispatch
