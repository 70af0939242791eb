// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where an in-process Python kernel's calls run, and how long pav waits for one.
//
// Every call runs on a thread of the kernel's own, kept with its Python thread
// state for the kernel's life. A kernel not declared thread-safe has one such
// thread, so all its calls (the search's jobs, the shrink, the saving) run on
// the same thread and a failure that depends on the thread it runs on is seen
// again where pav shrinks and saves it; a thread-safe one has one per call in
// flight.
//
// pav's thread waits for the call without the GIL. A call that has not
// returned within the timeout, or during which the run's stop was asked, is
// interrupted: the exception type `interrupt` (pav.inprocess.KernelInterrupted)
// is raised in it, again every 0.2 s in case the kernel catches it, for up to
// the grace period. A call that then returns is a verdict, and its thread serves
// the next call. One that does not (blocked in native code, or in a wait
// Python cannot interrupt on a thread other than the main one: time.sleep, a
// lock) is a verdict too, and is left running on its thread, which pav never
// uses again: what it returns is dropped and nothing it writes reaches pav's
// outputs, as a killed worker's does not. Its inputs are pav's memory of the
// call, freed after it: a call left running that wakes later and reads them
// may crash the process (docs/python.md says so).
#include <Python.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "adapters/in_process.hpp"
#include "adapters/kernel.hpp"

namespace pav::python {

// The interpreter is not running (never started, or finalizing): its GIL can
// no longer be taken, and what holds Python state lets it go with the process.
bool interpreter_gone();

class CallThreads {
 public:
  // How long an interrupted call may take to return before it is left running:
  // the timeout, within [1, 5] s.
  static double grace_seconds(double timeout);
  // Calls left running, per kernel, after which its calls fail at once (a
  // thread each). Each costs the timeout and the grace period, so a run's
  // limits (the shrink's 600 s) end long before this in practice.
  static constexpr int kMaxAbandoned = 256;

  // interrupt: a new reference to the exception type raised in a call that is
  // interrupted (taken with the GIL held).
  explicit CallThreads(PyObject* interrupt) : interrupt_(interrupt) {}
  ~CallThreads();  // the GIL is held or the interpreter is gone
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

  // Runs f(commit) with the GIL held on one of the kernel's threads, waiting
  // within `limits` (without the GIL). commit(g) runs g under a lock only while
  // pav still waits for the call: what touches pav's memory after the kernel
  // returned (copying its outputs back) goes through it. `what` names the call
  // in messages ("the call", "the check").
  using Commit = std::function<void(const std::function<void()>&)>;
  adapters::CallResult run(const std::function<adapters::CallResult(const Commit&)>& f,
                           const adapters::InProcessCallLimits& limits, const char* what);

  struct Slot;  // one thread's state, shared with the thread

 private:
  std::shared_ptr<Slot> take();
  void give_back(std::shared_ptr<Slot> s);

  PyObject* interrupt_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Slot>> idle_;
  int abandoned_ = 0;
};

}  // namespace pav::python
