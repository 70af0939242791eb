// SPDX-License-Identifier: Apache-2.0
#pragma once
// The process-worker adapter (exec:'CMD ARGS'): pav starts the command once
// through /bin/sh, in its own process group, and speaks the line-delimited
// JSON protocol over its stdin and stdout; tensors cross as .npy files in a
// per-call folder. Every misbehaviour of the worker (exit, crash, silence past
// the timeout, a reply that is not the protocol, a missing or malformed output
// file) is the call's result with Outcome::fault; the worker is killed and
// started again on the next call. pav ignores SIGPIPE once a worker runs, so a
// worker that dies mid-request is a fault, not the end of pav.
#include <memory>
#include <string>

#include "adapters/kernel.hpp"

namespace pav::adapters {

// Starts the worker and reads its description. Throws KernelSpecError when the
// worker does not start, does not describe itself within the timeout, or its
// description breaks the contract's rules (the message quotes its stderr);
// KernelUnavailable when no exchange folder can be made.
std::unique_ptr<KernelUnderTest> open_worker_kernel(const std::string& command, const std::string& spec,
                                                    const OpenOptions& options,
                                                    const std::string& adapter = "exec");

}  // namespace pav::adapters
