// SPDX-License-Identifier: Apache-2.0
#pragma once
// pav's side of a worker: serves any kernel under test over the worker protocol
// on a pair of file descriptors. `pav kernel-worker --kernel SPEC` runs it, and
// --isolate starts that in a child process for a shared library.
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"

namespace pav::adapters {

struct ServeHooks {
  // Called after a describe, check or decode request was served (a decode's
  // outputs written), before the reply is sent: returning a line sends that
  // instead (test fixtures use it to play a worker that misbehaves).
  std::function<std::optional<std::string>(const nlohmann::json& request, const nlohmann::json& reply)> replace_reply;
};

// Answers requests from in_fd on out_fd until quit or end of input; returns
// the process exit status (0). A malformed request gets an ok: false reply.
int serve_worker(KernelUnderTest& kernel, int in_fd, int out_fd, const ServeHooks& hooks = {});

}  // namespace pav::adapters
