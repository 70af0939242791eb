// SPDX-License-Identifier: Apache-2.0
#pragma once
// Clean stops of long runs: the first SIGINT or SIGTERM asks the run to stop
// (it finishes or abandons the case at hand, saves what it found, prints the
// summary of what ran and exits 3, or 1 if it found a defect); a second one
// ends the process at once, as the signal normally would.
namespace pav::cli {

// Installs the handlers (once; later calls do nothing).
void install_stop_handlers();
// True once SIGINT or SIGTERM has arrived.
bool stop_requested();
// "SIGINT", "SIGTERM", or "" when no stop was asked.
const char* stop_signal_name();

}  // namespace pav::cli
