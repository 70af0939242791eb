// SPDX-License-Identifier: Apache-2.0
#pragma once
// Clean stops of long runs: the first SIGINT or SIGTERM asks the run to stop
// (it abandons the case at hand: a call in progress is cut short, a worker
// killed or a Python kernel interrupted, and the verdict over it dropped; it
// saves what it found, prints the summary of what ran and exits 3,
// or 1 if it found a defect); a second one ends the process at once, as the
// signal normally would.
#include <signal.h>

namespace pav::session {

// Installs the handlers (again after a first signal reset one to the default).
void install_stop_handlers();

// A run inside a longer-lived process (the Python module): the handlers in
// place before are put back at the end of the scope, and a stop asked during an
// earlier run does not stop this one.
class StopScope {
 public:
  StopScope();
  ~StopScope();
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;

 private:
  struct sigaction saved_int_ {}, saved_term_ {};
};
// True once SIGINT or SIGTERM has arrived.
bool stop_requested();
// "SIGINT", "SIGTERM", or "" when no stop was asked.
const char* stop_signal_name();

}  // namespace pav::session
