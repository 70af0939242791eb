// SPDX-License-Identifier: Apache-2.0
#include "python/call_threads.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/core.h>

namespace pav::python {

bool interpreter_gone() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

namespace {

using adapters::CallResult;
using adapters::Outcome;
using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(s, 0.0)));
}

}  // namespace

struct CallThreads::Slot {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> job;  // a call handed over, not yet taken by the thread
  bool busy = false;          // a call handed over and not finished
  bool quit = false;
  bool abandoned = false;     // pav stopped waiting: the thread ends after its call
  bool started = false;
  bool ended = false;         // its Python state released: the thread touches Python no more
  unsigned long ident = 0;    // the thread's id as Python knows it

  static void main(const std::shared_ptr<Slot>& s) {
    const PyGILState_STATE g = PyGILState_Ensure();  // the thread's state, kept for its life
    {
      std::lock_guard<std::mutex> lock(s->mu);
      s->ident = PyThread_get_thread_ident();
      s->started = true;
    }
    s->cv.notify_all();
    PyThreadState* ts = PyEval_SaveThread();
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(s->mu);
        s->cv.wait(lock, [&] { return bool(s->job) || s->quit; });
        if (!s->job) break;
        job = std::move(s->job);
        s->job = nullptr;
      }
      PyEval_RestoreThread(ts);
      job();
      job = nullptr;  // its captures go while the GIL is held
      ts = PyEval_SaveThread();
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->abandoned) break;
    }
    if (interpreter_gone()) return;  // the state goes with the process
    PyEval_RestoreThread(ts);
    PyGILState_Release(g);
    std::lock_guard<std::mutex> lock(s->mu);
    s->ended = true;
    s->cv.notify_all();
  }
};

double CallThreads::grace_seconds(double timeout) { return std::clamp(timeout, 1.0, 5.0); }

CallThreads::~CallThreads() {
  if (interpreter_gone()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : idle_) {
    std::lock_guard<std::mutex> l(s->mu);
    s->quit = true;
    s->cv.notify_all();
  }
  // Each idle thread releases its Python state before the interpreter can
  // finalize: a thread that wants the GIL after that is ended by Python
  // mid-stack, which aborts the process. So the destructor (GIL held) lets the
  // GIL go and waits for them, a few seconds at most.
  PyThreadState* ts = PyEval_SaveThread();
  for (const auto& s : idle_) {
    std::unique_lock<std::mutex> l(s->mu);
    s->cv.wait_for(l, std::chrono::seconds(5), [&] { return s->ended; });
  }
  PyEval_RestoreThread(ts);
  Py_XDECREF(interrupt_);
}

std::shared_ptr<CallThreads::Slot> CallThreads::take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abandoned_ >= kMaxAbandoned) return nullptr;
    if (!idle_.empty()) {
      std::shared_ptr<Slot> s = std::move(idle_.back());
      idle_.pop_back();
      return s;
    }
  }
  auto s = std::make_shared<Slot>();
  std::thread([s] { Slot::main(s); }).detach();
  std::unique_lock<std::mutex> lock(s->mu);
  s->cv.wait(lock, [&] { return s->started; });
  return s;
}

void CallThreads::give_back(std::shared_ptr<Slot> s) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(s));
}

CallResult CallThreads::run(const std::function<CallResult(const Commit&)>& f,
                            const adapters::InProcessCallLimits& limits, const char* what) {
  std::shared_ptr<Slot> s = take();
  if (!s)
    return {Outcome::fault,
            fmt::format("{} calls of this kernel did not return and are still running on threads pav left them on; "
                        "pav calls it no more in this process (run it as a worker, exec:, where a call that hangs "
                        "is killed)",
                        kMaxAbandoned)};
  auto result = std::make_shared<CallResult>();
  const Commit commit = [s](const std::function<void()>& g) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->abandoned) g();
  };
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->busy = true;
    s->job = [s, result, f, commit] {
      CallResult r;
      try {
        r = f(commit);
      } catch (const std::exception& e) {
        r = {Outcome::fault, std::string("the call could not be handed to Python: ") + e.what()};
      }
      // An interruption that came after the kernel returned is not carried
      // into the thread's next call.
      PyThreadState_SetAsyncExc(s->ident, nullptr);
      std::lock_guard<std::mutex> lock(s->mu);
      if (!s->abandoned) *result = std::move(r);
      s->busy = false;
      s->cv.notify_all();
    };
  }
  s->cv.notify_all();

  const double timeout = std::max(limits.timeout_seconds, 0.001);
  const auto deadline = Clock::now() + seconds(timeout);
  bool stopped = false;
  {
    std::unique_lock<std::mutex> lock(s->mu);
    while (s->busy) {
      if (limits.should_stop && limits.should_stop()) {
        stopped = true;
        break;
      }
      const auto now = Clock::now();
      if (now >= deadline) break;
      s->cv.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
    }
    if (!s->busy) {
      CallResult out = std::move(*result);
      lock.unlock();
      give_back(s);
      return out;
    }
  }

  // Not returned: interrupted, again every 0.2 s, for up to the grace period.
  if (stopped) adapters::note_call_cut_short();
  const double grace = grace_seconds(timeout);
  const auto grace_end = Clock::now() + seconds(grace);
  bool returned = false;
  for (;;) {
    {
      const PyGILState_STATE g = PyGILState_Ensure();
      {
        std::lock_guard<std::mutex> lock(s->mu);
        if (!s->busy) returned = true;
        else PyThreadState_SetAsyncExc(s->ident, interrupt_);
      }
      PyGILState_Release(g);
    }
    if (returned) break;
    std::unique_lock<std::mutex> lock(s->mu);
    if (s->cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return !s->busy; })) {
      returned = true;
      break;
    }
    if (Clock::now() >= grace_end) {
      s->abandoned = true;
      break;
    }
  }
  const std::string why = stopped ? fmt::format("pav was asked to stop (a signal) during {}", what)
                                  : fmt::format("{} did not return within {:g} s (the timeout)", what, timeout);
  if (returned) {
    give_back(s);
    return {Outcome::fault, why + "; pav interrupted it (pav.inprocess.KernelInterrupted raised in the kernel)"};
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++abandoned_;
  }
  return {Outcome::fault,
          fmt::format("{}; interrupted, it did not return within {:g} s either (blocked where Python cannot raise in it: "
                      "native code, a sleep, a wait), so pav left it running on a thread of its own and calls the "
                      "kernel on another",
                      why, grace)};
}

}  // namespace pav::python
