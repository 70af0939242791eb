// SPDX-License-Identifier: Apache-2.0
#include "properties/session/stop.hpp"

#include <signal.h>

#include <atomic>

namespace pav::session {

namespace {

std::atomic<int> g_signal{0};  // lock-free: safe to store from a handler
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) { g_signal.store(sig); }

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: the second signal gets the default action (ends the process).
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

StopScope::StopScope() {
  sigaction(SIGINT, nullptr, &saved_int_);
  sigaction(SIGTERM, nullptr, &saved_term_);
  g_signal.store(0);
}

StopScope::~StopScope() {
  sigaction(SIGINT, &saved_int_, nullptr);
  sigaction(SIGTERM, &saved_term_, nullptr);
}

bool stop_requested() { return g_signal.load() != 0; }

const char* stop_signal_name() {
  switch (g_signal.load()) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "";
  }
}

}  // namespace pav::session
