// SPDX-License-Identifier: Apache-2.0
// pav._pav: the extension behind `import pav`. It registers Python callables
// as in-process kernels under test (adapters/in_process.hpp) and runs pav's
// own runs in this process through the session API (properties/session), so
// a Python kernel goes through the same properties, shrinking, saving, replay
// and reports as a lib: or exec: one.
// The call's tensors reach Python as NumPy arrays over pav's own memory (no
// copy, no file); python/pav/_inprocess.py turns them into the worker
// helper's Call and checks what the kernel gives back.
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <type_traits>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#ifdef PAV_HAVE_GPU
#include <dlpack/dlpack.h>

#include "adapters/device_copies.hpp"
#endif
#include "adapters/in_process.hpp"
#include "adapters/kernel.hpp"
#include "adapters/worker_protocol.hpp"
#include "python/call_threads.hpp"
#include "common/utf8_text.hpp"
#include "kernels/limits.hpp"
#include "input/json_input.hpp"
#include "properties/session/session.hpp"
#include "properties/session/stop.hpp"

namespace py = pybind11;
using nlohmann::json;

namespace {

using pav::adapters::CallResult;
using pav::adapters::DecodeRequest;
using pav::adapters::KernelDescription;
using pav::adapters::Outcome;
using pav::kernels::DType;
using pav::kernels::TensorView;

py::object to_py(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return py::none();
    case json::value_t::boolean: return py::bool_(j.get<bool>());
    case json::value_t::number_integer: return py::int_(j.get<int64_t>());
    case json::value_t::number_unsigned: return py::int_(j.get<uint64_t>());
    case json::value_t::number_float: return py::float_(j.get<double>());
    case json::value_t::string: return py::str(j.get_ref<const std::string&>());
    case json::value_t::array: {
      py::list l;
      for (const json& e : j) l.append(to_py(e));
      return l;
    }
    case json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = to_py(v);
      return d;
    }
    default: return py::none();
  }
}

// The NumPy element type a dtype crosses as (the worker protocol's: bf16 as
// its raw uint16 bits, fp8 as uint8 codes).
py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::f32: return py::dtype("<f4");
    case DType::f16: return py::dtype("<f2");
    case DType::bf16: return py::dtype("<u2");
    case DType::fp8_e4m3fn:
    case DType::fp8_e4m3fnuz:
    case DType::fp8_e5m2: return py::dtype("u1");
    case DType::i32: return py::dtype("<i4");
    case DType::i64: return py::dtype("<i8");
    case DType::none: break;
  }
  throw std::invalid_argument("a tensor of unknown dtype");
}

// A NumPy array over a view's own memory, at its strides, valid during the
// call only: the inputs, read-only (outputs are OwnedOutput's).
py::array array_of(const TensorView& v) {
  const int64_t esize = pav::kernels::dtype_size(v.dtype);
  std::vector<py::ssize_t> shape(v.shape.begin(), v.shape.begin() + v.rank), strides;
  for (int i = 0; i < v.rank; ++i) strides.push_back(py::ssize_t(v.stride[i] * esize));
  // The capsule owns nothing: the array is valid during the call only.
  py::array a(numpy_dtype(v.dtype), shape, strides, v.data, py::capsule(v.data, [](void*) {}));
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

// An output handed to a Python kernel: a NumPy array over memory of its own
// (the view's span, copied from pav's buffer, NaN poison and padding included),
// copied back into pav's buffer when the call returns. The array keeps that
// memory alive: a kernel that keeps the call, or a thread that writes after
// the call returned, writes into memory pav no longer reads, never pav's heap.
struct OwnedOutput {
  py::array view;
  py::array_t<uint8_t> span;
  const TensorView* into = nullptr;

  explicit OwnedOutput(const TensorView& v) : into(&v) {
    const int64_t esize = pav::kernels::dtype_size(v.dtype);
    // The span: from the first element to the last, padding between included.
    int64_t elems = 1;
    for (int i = 0; i < v.rank; ++i) elems += (v.shape[i] - 1) * v.stride[i];
    for (int i = 0; i < v.rank; ++i)
      if (v.shape[i] == 0) elems = 0;
    span = py::array_t<uint8_t>(py::ssize_t(std::max<int64_t>(elems, 1) * esize));
    if (elems > 0) std::memcpy(span.mutable_data(), v.data, size_t(elems * esize));
    bytes = elems * esize;
    std::vector<py::ssize_t> shape(v.shape.begin(), v.shape.begin() + v.rank), strides;
    for (int i = 0; i < v.rank; ++i) strides.push_back(py::ssize_t(v.stride[i] * esize));
    view = py::array(numpy_dtype(v.dtype), shape, strides, span.mutable_data(), span);
  }
  // What the kernel wrote, into pav's buffer (the GIL is held).
  void copy_back() const {
    if (bytes > 0) std::memcpy(into->data, span.data(), size_t(bytes));
  }
  int64_t bytes = 0;
};

#ifdef PAV_HAVE_GPU
// A DLPack tensor over device memory pav owns for the call ("dltensor"
// capsule): the element type as the DLPack types name it (bf16 as bfloat16;
// fp8 as its uint8 codes, which pav.inprocess views as torch's fp8 dtype).
DLDataType dlpack_dtype(DType t) {
  switch (t) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::fp8_e4m3fn:
    case DType::fp8_e4m3fnuz:
    case DType::fp8_e5m2: return {kDLUInt, 8, 1};
    case DType::i32: return {kDLInt, 32, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::none: break;
  }
  throw std::invalid_argument("a tensor of unknown dtype");
}

// What a capsule's DLManagedTensor owns: its shape and strides. The memory is
// pav's and valid during the call only, as for host arrays.
struct DLPackHolder {
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
};

py::capsule dlpack_of(const TensorView& v, void* device_data) {
  auto* h = new DLPackHolder;
  h->shape.assign(v.shape.begin(), v.shape.begin() + v.rank);
  h->strides.assign(v.stride.begin(), v.stride.begin() + v.rank);
  DLTensor& t = h->managed.dl_tensor;
  t.data = device_data;
  t.device = {pav::adapters::DeviceCopies::rocm() ? kDLROCM : kDLCUDA, pav::adapters::DeviceCopies::device()};
  t.ndim = v.rank;
  t.dtype = dlpack_dtype(v.dtype);
  t.shape = h->shape.data();
  t.strides = h->strides.data();
  t.byte_offset = 0;
  h->managed.manager_ctx = h;
  h->managed.deleter = [](DLManagedTensor* m) { delete static_cast<DLPackHolder*>(m->manager_ctx); };
  // A capsule nobody consumed still frees its holder; a consumer renames it
  // "used_dltensor" and calls the deleter itself.
  PyObject* c = PyCapsule_New(&h->managed, "dltensor", [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      m->deleter(m);
    }
  });
  if (!c) {
    delete h;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(c);
}
#endif

// Every text a Python kernel hands pav (an exception, a refusal's reason, an
// error message) is bounded as a worker's or a library's is (docs/limits.md).
std::string kernel_text(const std::string& text) {
  return pav::utf8_clean(text, size_t(pav::kernels::kMaxKernelMessageBytes));
}
std::string python_error_text(const py::error_already_set& e) { return kernel_text(e.what()); }

// A Python callable as a kernel under test. `runner` is a
// pav._inprocess.Runner: check(request) -> None or a reason, decode(request,
// arrays) -> None or (status, message). Its calls run on threads of its own
// (python/call_threads.hpp), each within the timeout of the run that opened it.
class PythonKernel final : public pav::adapters::InProcessKernel {
 public:
  PythonKernel(py::object runner, KernelDescription d, std::string spec)
      : runner_(std::move(runner)), description_(std::move(d)), spec_(std::move(spec)),
        threads_(std::make_unique<CallThreads>(
            py::object(py::module_::import("pav.inprocess").attr("KernelInterrupted")).release().ptr())) {}
  ~PythonKernel() override {
    // A kernel still registered when the process exits is destroyed with the
    // registry, after the interpreter has finalized: the GIL can no longer be
    // taken, and waiting for it would hang the exit. The reference is dropped
    // unreleased; the interpreter's memory goes with the process.
    if (pav::python::interpreter_gone()) {
      runner_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    runner_ = py::object();
    threads_.reset();
  }

  const KernelDescription& description() const override { return description_; }
  std::string adapter() const override { return "python"; }
  std::string spec() const override { return spec_; }

  CallResult check_within(const DecodeRequest& r, const pav::adapters::InProcessCallLimits& limits) override {
    const json request = pav::adapters::protocol::check_request(0, r);
    std::unique_lock<std::mutex> lock = one_at_a_time();
    return threads_->run(
        [&, runner = runner_ptr()](const auto&) -> CallResult {
          try {
            const py::object reason = py::reinterpret_borrow<py::object>(runner).attr("check")(to_py(request));
            if (reason.is_none()) return CallResult::success();
            return {Outcome::rejected, kernel_text(py::str(reason))};
          } catch (const py::error_already_set& e) {
            return {Outcome::fault, "the check raised: " + python_error_text(e)};
          }
        },
        limits, "the check");
  }

  CallResult decode_within(const DecodeRequest& r, const pav::adapters::InProcessCallLimits& limits) override {
    calls_.fetch_add(1);
    std::unique_lock<std::mutex> lock = one_at_a_time();
    if (description_.memory == pav::adapters::Memory::device) return decode_on_device(r, limits);
    const json request = pav::adapters::protocol::decode_request(0, "", r, description_.scratch);
    // On the kernel's thread, with the GIL. The inputs are read-only arrays
    // over pav's memory; the outputs are memory of their own, copied into
    // pav's only while pav still waits for the call.
    return threads_->run(
        [&, runner = runner_ptr()](const CallThreads::Commit& commit) -> CallResult {
          py::dict arrays;
          for (const auto& t : pav::adapters::protocol::inputs_of(r)) arrays[t.name] = array_of(t.view);
          const OwnedOutput out(r.call.out);
          std::optional<OwnedOutput> lse;
          arrays["out"] = out.view;
          if (r.lse.present()) arrays["lse"] = lse.emplace(r.lse).view;
          // Where outputs the kernel returns are stored: copies it never sees,
          // so a thread of its that writes call.out after the call returned
          // cannot reach pav's output between the return and the copy back.
          const OwnedOutput returned_out(r.call.out);
          std::optional<OwnedOutput> returned_lse;
          py::dict returned;
          returned["out"] = returned_out.view;
          if (r.lse.present()) returned["lse"] = returned_lse.emplace(r.lse).view;
          std::string stored;
          const CallResult result = call_runner(runner, request, arrays, returned, &stored);
          commit([&] {
            (stored.empty() ? out : returned_out).copy_back();
            if (lse) (stored.find("lse") != std::string::npos ? *returned_lse : *lse).copy_back();
          });
          return result;
        },
        limits, "the call");
  }

  int64_t decode_calls() const override { return calls_.load(); }

 private:
  using CallThreads = pav::python::CallThreads;

  // A kernel not declared thread-safe gets one call (decode or check) at a
  // time, even where it lets the GIL go mid-call, and so always the same thread.
  std::unique_lock<std::mutex> one_at_a_time() {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!description_.thread_safe) lock.lock();
    return lock;
  }

  // The runner for a call's closure (borrowed: the kernel holds it while any
  // call runs, and one left running holds its own reference through the call).
  PyObject* runner_ptr() const { return runner_.ptr(); }

  // runner.decode(request, arrays, returned): None, ("returned", the names
  // stored into `returned`), or (status, message). The GIL is held.
  static CallResult call_runner(PyObject* runner, const json& request, const py::dict& arrays,
                                const py::object& returned = py::none(), std::string* stored = nullptr) {
    try {
      const py::object result =
          py::reinterpret_borrow<py::object>(runner).attr("decode")(to_py(request), arrays, returned);
      if (result.is_none()) return CallResult::success();
      const auto pair = result.cast<std::pair<std::string, std::string>>();
      if (pair.first == "returned" && stored) {
        *stored = pair.second;
        return CallResult::success();
      }
      Outcome o = Outcome::fault;
      if (pair.first != "fault" && !pav::adapters::protocol::outcome_of_status(pair.first, o)) o = Outcome::fault;
      return {o, kernel_text(pair.second)};
    } catch (const py::error_already_set& e) {
      return {Outcome::fault, "the in-process runner raised: " + python_error_text(e)};
    }
  }

  // memory = device: the call's tensors copied to the device as for a lib:
  // kernel of device memory (the NaN poison in out travels too), handed over
  // as DLPack tensors, and out and lse copied back once every stream of the
  // device is done.
  CallResult decode_on_device(const DecodeRequest& r, const pav::adapters::InProcessCallLimits& limits) {
#ifdef PAV_HAVE_GPU
    const json request = pav::adapters::protocol::decode_request(0, "", r, description_.scratch);
    try {
      pav::adapters::DeviceCopies copies;
      const auto inputs = pav::adapters::protocol::inputs_of(r);
      std::vector<void*> staged;
      for (const auto& t : inputs) staged.push_back(copies.stage(t.view));
      void* out = copies.stage(r.call.out);
      void* lse = r.lse.present() ? copies.stage(r.lse) : nullptr;
      copies.synchronize();
      const CallResult result = threads_->run(
          [&, runner = runner_ptr()](const auto&) -> CallResult {
            py::dict arrays;
            for (size_t i = 0; i < inputs.size(); ++i)
              arrays[py::str(inputs[i].name)] = dlpack_of(inputs[i].view, staged[i]);
            arrays["out"] = dlpack_of(r.call.out, out);
            if (lse) arrays["lse"] = dlpack_of(r.lse, lse);
            return call_runner(runner, request, arrays);
          },
          limits, "the call");
      pav::adapters::DeviceCopies::wait_for_device();
      copies.fetch(r.call.out, out);
      if (lse) copies.fetch(r.lse, lse);
      return result;
    } catch (const pav::kernels::gpu::Error& e) {
      return {Outcome::kernel_error, std::string("device error around the call: ") + e.what()};
    }
#else
    (void)r;
    (void)limits;
    return {Outcome::kernel_error, "device memory kernels need a GPU build of pav's Python module"};
#endif
  }

  py::object runner_;
  std::mutex mu_;
  KernelDescription description_;
  std::string spec_;
  std::unique_ptr<CallThreads> threads_;
  std::atomic<int64_t> calls_{0};
};

// The description as pav reads it, with the worker protocol's checks: parsed
// by the shared reader (input/json_input.hpp) with a JSON file's size and
// nesting limits. A description that is not such JSON, or breaks the
// contract, raises ValueError naming the field.
KernelDescription read_description(const std::string& description_json) {
  try {
    if (int64_t(description_json.size()) > pav::input::kMaxJsonFileBytes)
      pav::input::fail("description", "", std::to_string(description_json.size()) + " bytes, more than the limit of " +
                                              std::to_string(pav::input::kMaxJsonFileBytes) + " bytes");
    return pav::adapters::description_from_json(pav::input::parse_json(description_json, "description"));
  } catch (const pav::input::InputError& e) {
    throw py::value_error(e.what());
  } catch (const pav::adapters::KernelSpecError& e) {
    throw py::value_error(e.what());
  }
}

void register_kernel(const std::string& key, py::object runner, const std::string& description_json,
                     const std::string& spec) {
  KernelDescription d = read_description(description_json);
  pav::adapters::register_in_process_kernel(key, std::make_shared<PythonKernel>(std::move(runner), d, spec));
}

// A run's options from a Python dict, field by field: a field of the wrong
// type or one the run does not know is BadInput naming it, as a bad option is
// on the command line.
class Fields {
 public:
  Fields(const std::string& run, const py::dict& d) : run_(run), d_(d) {}

  const std::string& run() const { return run_; }
  // The dict holds `name` with a value (None is "not given").
  bool given(const char* name) const { return d_.contains(name) && !d_[name].is_none(); }

  template <class T>
  void read(const char* name, T& into) {
    if (!d_.contains(name)) return;
    seen_.push_back(name);
    py::handle v = d_[name];
    if (v.is_none()) return;
    if constexpr (std::is_same_v<T, bool>) {
      if (!py::isinstance<py::bool_>(v)) bad(name, "true or false", v);
    } else if constexpr (std::is_integral_v<T>) {
      if (py::isinstance<py::bool_>(v) || !py::isinstance<py::int_>(v)) bad(name, "an integer", v);
      try {
        into = v.cast<T>();
      } catch (const py::cast_error&) {
        bad(name, "an integer in range", v);
      }
      return;
    } else if constexpr (std::is_floating_point_v<T>) {
      if (py::isinstance<py::bool_>(v) || !(py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)))
        bad(name, "a number", v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!py::isinstance<py::str>(v)) bad(name, "a string", v);
    } else {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) bad(name, "a list of strings", v);
      for (py::handle e : v)
        if (!py::isinstance<py::str>(e)) bad(name, "a list of strings", v);
    }
    into = v.cast<T>();
  }
  template <class T>
  void read(const char* name, std::optional<T>& into) {
    if (!d_.contains(name) || d_[name].is_none()) {
      if (d_.contains(name)) seen_.push_back(name);
      return;
    }
    T value{};
    read(name, value);
    into = value;
  }
  // Every field was read: one the run does not know is refused.
  void finish() const {
    for (auto item : d_) {
      const std::string key = py::str(item.first);
      if (std::find(seen_.begin(), seen_.end(), key) == seen_.end())
        throw pav::session::BadInput(run_ + ": unknown option '" + key.substr(0, 60) + "'");
    }
  }

 private:
  [[noreturn]] void bad(const char* name, const char* want, py::handle v) const {
    throw pav::session::BadInput(run_ + ": " + name + ": expected " + want + ", got " +
                                 std::string(py::str(py::type::of(v).attr("__name__"))));
  }
  std::string run_;
  const py::dict& d_;
  std::vector<std::string> seen_;
};

void read_kernel(Fields& f, pav::session::KernelOptions& k) {
  f.read("kernel", k.specs);
  f.read("isolate", k.isolate);
  f.read("timeout", k.timeout);
  if (!pav::session::timeout_in_range(k.timeout)) {  // --timeout's bounds
    char got[96];
    std::snprintf(got, sizeof got, "expected seconds in [%g, %g], got %g", pav::session::kMinTimeoutSeconds,
                  pav::session::kMaxTimeoutSeconds, k.timeout);
    throw pav::session::BadInput(f.run() + ": timeout: " + got);
  }
  f.read("exchange_dir", k.exchange_dir);
}

// pav's output in this process goes through streams whose writes never fail:
// fmt, a shared library with the system's C++ runtime, throws when a write to
// a FILE fails (a full disk, a closed pipe), and that exception cannot unwind
// through this module's own runtime (libstdc++ inside): the interpreter
// aborted. A write the system refuses is recorded and the rest of the
// stream's output dropped; the run then raises CannotRun naming it.
class Sink {
 public:
  Sink(int fd, const char* name) : fd_(fd), name_(name) {
    cookie_io_functions_t io{};
    io.write = &Sink::write;
    file_ = fopencookie(this, "w", io);
    if (file_) setvbuf(file_, nullptr, _IOLBF, 0);
  }
  ~Sink() {
    if (file_) std::fclose(file_);
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  std::FILE* file() const { return file_; }
  // "" or why the stream's output was cut: "stdout: No space left on device".
  std::string failure() {
    if (file_) std::fflush(file_);
    return error_ ? name_ + std::string(": ") + std::strerror(error_) : std::string();
  }

 private:
  static ssize_t write(void* cookie, const char* buf, size_t n) {
    Sink& s = *static_cast<Sink*>(cookie);
    for (size_t done = 0; done < n && !s.error_;) {
      const ssize_t w = ::write(s.fd_, buf + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) s.error_ = w < 0 ? errno : EIO;
      else done += size_t(w);
    }
    return ssize_t(n);  // all taken: a failed write is recorded, never thrown
  }
  int fd_;
  const char* name_;
  int error_ = 0;
  std::FILE* file_ = nullptr;
};

// Runs one of the session's runs in this process with the GIL released (the
// kernel's calls take it back). SIGINT and SIGTERM stop the run cleanly, as
// on the command line; Python's handlers are back in place when it returns.
// Returns (exit code, the report as JSON text, the signal that stopped it or
// ""); an error raises BadInput or CannotRun with its reason.
py::tuple run_session(const std::string& run, const py::dict& options, bool quiet) {
  namespace s = pav::session;
  Fields f(run, options);
  std::function<s::Report(const s::Io&)> call;
  if (run == "verify") {
    s::VerifyOptions o;
    read_kernel(f, o.kernel);
    f.read("backend", o.backend);
    f.read("seed", o.seed);
    f.read("checks", o.checks);
    f.read("plan_cases", o.plan_cases);
    f.read("decode_cases", o.decode_cases);
    f.read("reject_cases", o.reject_cases);
    f.read("stale_cases", o.stale_cases);
    f.read("decode_seconds", o.decode_seconds);
    f.read("shapes", o.shapes);
    bool quick = false;
    f.read("quick", quick);
    if (quick)
      s::apply_quick(o, f.given("plan_cases"), f.given("decode_cases"), f.given("reject_cases"),
                     f.given("stale_cases"));
    f.read("save_dir", o.save_dir);
    f.read("out_dir", o.out_dir);
    call = [o](const s::Io& io) { return s::verify(o, io); };
  } else if (run == "fuzz") {
    s::FuzzOptions o;
    read_kernel(f, o.kernel);
    f.read("backend", o.backend);
    f.read("seed", o.seed);
    f.read("cases", o.cases);
    f.read("minutes", o.minutes);
    f.read("properties", o.properties);
    f.read("save_dir", o.save_dir);
    f.read("jobs", o.jobs);
    f.read("keep_going", o.keep_going);
    f.read("regions", o.regions);
    f.read("shapes", o.shapes);
    f.read("shape_seed", o.shape_seed);
    f.read("verbose", o.verbose);
    call = [o](const s::Io& io) { return s::fuzz(o, io); };
  } else if (run == "replay") {
    s::ReplayOptions o;
    read_kernel(f, o.kernel);
    f.read("files", o.files);
    f.read("backend", o.backend);
    f.read("path", o.path_override);
    f.read("trust_case_kernel", o.trust_case_kernel);
    o.timeout_given = options.contains("timeout");
    call = [o](const s::Io& io) { return s::replay(o, io); };
  } else if (run == "compare") {
    s::CompareOptions o;
    read_kernel(f, o.kernel);
    f.read("cases", o.cases);
    f.read("seed", o.seed);
    f.read("out_dir", o.out_dir);
    f.read("alpha", o.alpha);
    f.read("gate", o.gate);
    call = [o](const s::Io& io) { return s::compare(o, io); };
  } else if (run == "drift") {
    s::DriftOptions o;
    read_kernel(f, o.kernel);
    f.read("sweep", o.sweep_path);
    f.read("backend", o.backend);
    f.read("cells", o.cells);
    o.cells_given = options.contains("cells");
    f.read("max_context", o.max_context);
    f.read("seeds", o.seeds);
    f.read("markdown", o.markdown_path);
    f.read("plot", o.plot_path);
    call = [o](const s::Io& io) { return s::drift(o, io); };
  } else {
    throw s::BadInput("no run named '" + run.substr(0, 40) + "' (verify, fuzz, replay, compare, drift)");
  }
  f.finish();
  s::Report report;
  std::string stopped, cut;
  std::optional<s::ErrorText> error;
  {
    py::gil_scoped_release release;
    s::StopScope scope;
    s::install_stop_handlers();
    std::fflush(stdout);  // what was printed before, ahead of the run's output
    std::fflush(stderr);
    Sink out(STDOUT_FILENO, "stdout"), err(STDERR_FILENO, "stderr");
    if (!out.file() || !err.file()) throw s::CannotRun("could not open pav's output streams in this process");
    s::Io io;
    io.out = io.log = out.file();
    io.err = err.file();
    // The progress line redraws in place on a terminal (found by the stream's
    // descriptor): on one, stderr itself, whose writes do not fail.
    io.progress = isatty(STDERR_FILENO) ? stderr : err.file();
    io.show_progress = !quiet;
    try {
      report = call(io);
    } catch (...) {
      error = s::error_text(std::current_exception());
    }
    stopped = s::stop_signal_name();
    std::fflush(stderr);
    for (Sink* s : {&out, &err})
      if (const std::string why = s->failure(); !why.empty() && cut.empty()) cut = why;
  }
  if (error && error->exit_code == s::kExitBadInput) throw s::BadInput(error->message);
  if (error) throw s::CannotRun(error->message);
  if (!cut.empty())
    throw s::CannotRun("could not write pav's output (" + cut + "); the run's verdict: " +
                       (report.verdict.empty() ? std::string(report.passed() ? "PASS" : "FAIL") : report.verdict));
  return py::make_tuple(report.exit_code, report.json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                        stopped);
}

}  // namespace

#ifdef PAV_ADAPTER_BENCH
int adapter_bench_main(int argc, char** argv);
#endif

PYBIND11_MODULE(_pav, m) {
  m.doc() = "pav's engine in this process (use the pav package, not this module)";
  m.def("register_kernel", &register_kernel, py::arg("key"), py::arg("runner"), py::arg("description_json"),
        py::arg("spec"));
  m.def("check_description", [](const std::string& j) { return pav::adapters::to_json(read_description(j)).dump(); },
        py::arg("description_json"));
  m.def("unregister_kernel", &pav::adapters::unregister_in_process_kernel, py::arg("key"));
  // The session's errors as Python exceptions carrying their reason (pav.api
  // raises them as UsageError and CannotRun).
  py::register_exception<pav::session::BadInput>(m, "BadInput", PyExc_ValueError);
  py::register_exception<pav::session::CannotRun>(m, "CannotRun", PyExc_RuntimeError);
  m.def("session", &run_session, py::arg("run"), py::arg("options"), py::arg("quiet") = true);
  m.def("version", [] { return pav::session::version_line(); });
  // Why a kernel of device memory cannot run here ("" when it can).
  m.def("device_memory_unavailable", []() -> std::string {
#ifdef PAV_HAVE_GPU
    if (!pav::adapters::DeviceCopies::usable()) return "no GPU device is usable here";
    return "";
#else
    return "this build of pav's Python module has no GPU backend (build it with the nvidia or amd preset)";
#endif
  });
#ifdef PAV_ADAPTER_BENCH
  // bench/adapter_bench in this process (bench/adapter/inprocess_bench.py).
  m.def("adapter_bench", [](std::vector<std::string> args) {
    args.insert(args.begin(), "adapter_bench");
    std::vector<char*> argv;  // words[0] is the program's name; the pointers point into args
    for (std::string& w : args) argv.push_back(w.data());
    py::gil_scoped_release release;
    const int rc = adapter_bench_main(int(argv.size()), argv.data());
    std::fflush(stdout);
    return rc;
  });
#endif
}
