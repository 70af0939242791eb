// SPDX-License-Identifier: Apache-2.0
// The worker protocol and the C ABI as one table: every message, status and
// fault, each sent by a test fixture (fault_worker, the fault plugins) through
// the real adapter, with the verdict pav must reach. Each row is a test of its
// own (ProtocolTable/Row.NAME) and prints what it sent and what came back. The
// completeness tests hold the table to the sets the code and the fixtures
// know: the protocol's ops and statuses, the header's pav_status values, the
// adapter's outcomes, and the faults each fixture offers.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "adapters/kernel.hpp"
#include "adapters/testdata/fault_modes.hpp"
#include "adapters/testdata/test_support.hpp"
#include "adapters/worker_protocol.hpp"
#include "common/test_paths.hpp"
#include "properties/case/host_case.hpp"
#include "properties/checks/runner_kernel.hpp"

namespace {

using namespace pav;
using adapters::CallResult;
using adapters::Outcome;
namespace fs = std::filesystem;

// How the fixture is reached.
enum class Via { exec, lib, isolate };
// When the fixture sends what the row is about.
enum class Stage {
  open,     // while pav opens the kernel (loading, init, describe)
  call,     // on the one call the row makes (armed: a context of 300 tokens)
  restart,  // when the worker is started again after a fault on the first call
  close,    // when pav lets the kernel go (quit)
};
// What pav makes of it.
enum class Verdict {
  pass,            // the call is ok and its output meets the standard
  fails_standard,  // the call is ok, its output fails the comparison standard
  rejected,        // Outcome::rejected: "kernel refused the call: ..."
  stale_plan,      // Outcome::stale_plan: "stale plan: ..."
  kernel_error,    // Outcome::kernel_error: "kernel error: ..."
  fault,           // Outcome::fault: the adapter's own finding
  bad_input,       // KernelSpecError at open: exit 2
  cannot_run,      // KernelUnavailable at open: exit 3
  run_ends,        // KernelChanged from a call: no verdict, exit 3
  exits_3,         // the process ends with status 3 (a library's exit() caught)
};

const char* name_of(Via v) { return v == Via::exec ? "exec" : v == Via::lib ? "lib" : "lib --isolate"; }
const char* name_of(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::fails_standard: return "fails the standard";
    case Verdict::rejected: return "rejected";
    case Verdict::stale_plan: return "stale plan";
    case Verdict::kernel_error: return "kernel error";
    case Verdict::fault: return "fault";
    case Verdict::bad_input: return "bad input (exit 2)";
    case Verdict::cannot_run: return "cannot run (exit 3)";
    case Verdict::run_ends: return "run ends (exit 3)";
    case Verdict::exits_3: return "process exits 3";
  }
  return "?";
}

// The call's outcome a verdict stands for (none for the verdicts of no call).
std::optional<Outcome> outcome_of(Verdict v) {
  switch (v) {
    case Verdict::pass:
    case Verdict::fails_standard: return Outcome::ok;
    case Verdict::rejected: return Outcome::rejected;
    case Verdict::stale_plan: return Outcome::stale_plan;
    case Verdict::kernel_error: return Outcome::kernel_error;
    case Verdict::fault: return Outcome::fault;
    default: return std::nullopt;
  }
}

struct Row {
  const char* name;     // the test's name
  Via via;
  const char* fixture;  // exec: a fault_worker mode; lib: a library below, or modes:MODE for pav_fault_modes
  const char* op;       // the request or entry that carries it: describe, check, decode, quit; load, init
  Stage stage;
  const char* sends;    // what the fixture sends: a protocol status, a pav_status, a fault
  Verdict verdict;
  const char* text;     // a fragment the verdict's text must hold
};

// A failure names the row.
void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

// The worker's faults come with --min-len 300: the row's call arms them, a
// call of shorter contexts does not.
const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      // ---- worker protocol: decode --------------------------------------------------------
      {"exec_ok", Via::exec, "none", "decode", Stage::call, "ok true, out.npy", Verdict::pass, ""},
      // exec rows run the fixture with `exec`, so a signal ends the process pav started.
      {"exec_crash", Via::exec, "crash", "decode", Stage::call, "SIGSEGV", Verdict::fault,
       "worker killed by signal 11 (Segmentation fault)"},
      {"exec_exit", Via::exec, "exit", "decode", Stage::call, "exit status 7", Verdict::fault,
       "worker exited with status 7"},
      {"exec_exit_139", Via::exec, "exit-139", "decode", Stage::call, "exit status 139", Verdict::fault,
       "worker exited with status 139 (how a shell reports signal 11"},
      {"exec_hang", Via::exec, "hang", "decode", Stage::call, "no reply", Verdict::fault,
       "worker timed out: no reply to request 1 within 1 s (--timeout); killed"},
      {"exec_close_stdout", Via::exec, "close-stdout", "decode", Stage::call, "stdout closed, no exit", Verdict::fault,
       "worker closed its stdout and did not exit"},
      {"exec_non_utf8_stderr", Via::exec, "non-utf8", "decode", Stage::call, "stderr not UTF-8, exit 9",
       Verdict::fault, "worker exited with status 9; worker stderr: | xxx"},
      {"exec_garbage", Via::exec, "garbage", "decode", Stage::call, "a line that is not JSON", Verdict::fault,
       "worker protocol error: a reply line that is not JSON: 'fault_worker says hello'"},
      // 4096 bytes past the limit: the newline comes in the read that crosses it.
      {"exec_long_line", Via::exec, "long-line", "decode", Stage::call, "a line past 64 MiB", Verdict::fault,
       "worker protocol error: a reply line longer than 67108864 bytes"},
      {"exec_no_ok", Via::exec, "no-ok", "decode", Stage::call, "{id}", Verdict::fault,
       "worker protocol error: a reply without a boolean 'ok'"},
      {"exec_bad_id", Via::exec, "bad-id", "decode", Stage::call, "id 2 for request 1", Verdict::fault,
       "worker protocol error: a reply to request 1 carries id 2"},
      {"exec_no_id", Via::exec, "no-id", "decode", Stage::call, "{ok: true}", Verdict::fault,
       "worker protocol error: a reply to request 1 carries id (none)"},
      {"exec_reject", Via::exec, "reject", "decode", Stage::call, "reject", Verdict::rejected,
       "kernel refused the call: fault_worker refuses: reject"},
      {"exec_stale_plan", Via::exec, "stale-plan", "decode", Stage::call, "stale_plan", Verdict::stale_plan,
       "stale plan: fault_worker's plan is stale: stale-plan"},
      {"exec_error", Via::exec, "error", "decode", Stage::call, "error", Verdict::kernel_error,
       "kernel error: fault_worker fails: error"},
      {"exec_status_missing", Via::exec, "status-missing", "decode", Stage::call, "ok false, no status",
       Verdict::kernel_error, "kernel error: fault_worker fails without a status"},
      {"exec_status_unknown", Via::exec, "status-unknown", "decode", Stage::call, "status busy",
       Verdict::kernel_error, "kernel error: fault_worker is busy (status 'busy', not one of the protocol's)"},
      {"exec_status_not_string", Via::exec, "status-not-string", "decode", Stage::call, "status 3", Verdict::fault,
       "worker protocol error: 'status' is not a string: 3"},
      {"exec_no_message", Via::exec, "no-message", "decode", Stage::call, "status error, no error text",
       Verdict::kernel_error, "kernel error: (no message)"},
      {"exec_out_missing", Via::exec, "missing", "decode", Stage::call, "ok true, no out.npy", Verdict::fault,
       "worker output: out.npy missing after an ok reply"},
      {"exec_out_wrong_shape", Via::exec, "wrong-shape", "decode", Stage::call, "out.npy of half the head dim",
       Verdict::fault, "out.npy: shape (6, 6, 32), expected (6, 6, 64)"},
      {"exec_out_wrong_dtype", Via::exec, "wrong-dtype", "decode", Stage::call, "out.npy as f32", Verdict::fault,
       "out.npy: dtype '<f4', expected '<u2'"},
      {"exec_out_fortran", Via::exec, "fortran", "decode", Stage::call, "out.npy in Fortran order", Verdict::fault,
       "out.npy: Fortran order, expected C order"},
      // 4608 data bytes, 1 MiB of header at most and 16: the most an out.npy of its shape takes.
      {"exec_out_too_large", Via::exec, "too-large", "decode", Stage::call, "out.npy 2 MiB past its shape",
       Verdict::fault, "bytes, more than the 1053200 its shape allows"},
      {"exec_out_fifo", Via::exec, "fifo", "decode", Stage::call, "out.npy a FIFO", Verdict::fault,
       "out.npy: a FIFO (outputs must be regular files)"},
      {"exec_out_symlink", Via::exec, "devzero", "decode", Stage::call, "out.npy a link to /dev/zero",
       Verdict::fault, "out.npy: a symbolic link (outputs must be regular files)"},
      {"exec_out_directory", Via::exec, "directory", "decode", Stage::call, "out.npy a folder", Verdict::fault,
       "out.npy: a directory (outputs must be regular files)"},
      {"exec_lse_missing", Via::exec, "lse-missing", "decode", Stage::call, "writes_lse, no lse.npy",
       Verdict::fault, "worker output: lse.npy missing after an ok reply"},
      {"exec_nan", Via::exec, "nan", "decode", Stage::call, "a NaN in out.npy", Verdict::fails_standard,
       "(1 NaN, 0 inf"},
      // ---- worker protocol: check ---------------------------------------------------------
      {"exec_check_accept", Via::exec, "none", "check", Stage::call, "accept true", Verdict::pass, ""},
      {"exec_check_reject", Via::exec, "check-reject", "check", Stage::call, "accept false, reason",
       Verdict::rejected, "kernel refused the call: fault_worker refuses: check-reject"},
      {"exec_check_reject_silent", Via::exec, "check-reject-silent", "check", Stage::call,
       "accept false, empty reason", Verdict::rejected, "kernel refused the call: (no reason given)"},
      {"exec_check_error", Via::exec, "check-error", "check", Stage::call, "ok false", Verdict::kernel_error,
       "kernel error: fault_worker fails: check-error"},
      {"exec_check_no_accept", Via::exec, "check-no-accept", "check", Stage::call, "ok true, no accept",
       Verdict::fault, "worker protocol error: a check reply without a boolean 'accept'"},
      {"exec_check_reason_not_string", Via::exec, "check-reason-not-string", "check", Stage::call, "reason 7",
       Verdict::fault, "worker protocol error: 'reason' is not a string: 7"},
      // ---- worker protocol: describe and quit ---------------------------------------------
      {"exec_no_describe", Via::exec, "no-describe", "describe", Stage::open, "exit 5 first", Verdict::bad_input,
       "worker exited with status 5; worker stderr: | fault_worker: exiting before describing myself"},
      {"exec_describe_hang", Via::exec, "describe-hang", "describe", Stage::open, "no reply", Verdict::bad_input,
       "worker timed out: no reply to describe within 1 s"},
      {"exec_describe_garbage", Via::exec, "describe-garbage", "describe", Stage::open, "a line that is not JSON",
       Verdict::bad_input, "the describe reply is not JSON: 'fault_worker describes nothing'"},
      {"exec_describe_not_ok", Via::exec, "describe-not-ok", "describe", Stage::open, "ok false",
       Verdict::bad_input, "the describe reply lacks ok: true and kernel"},
      {"exec_describe_protocol_2", Via::exec, "describe-protocol-2", "describe", Stage::open, "protocol 2",
       Verdict::bad_input, "worker speaks protocol 2, pav speaks 1"},
      {"exec_describe_device", Via::exec, "describe-device", "describe", Stage::open, "memory device",
       Verdict::bad_input, "description: a worker's memory must be host"},
      {"exec_describe_invalid", Via::exec, "describe-invalid", "describe", Stage::open, "head_dims []",
       Verdict::bad_input, "head_dims: empty"},
      {"exec_describe_unknown_field", Via::exec, "describe-unknown-field", "describe", Stage::open, "head_dimz",
       Verdict::bad_input, "description: unknown field 'head_dimz'"},
      {"exec_describe_changes", Via::exec, "describe-changes", "describe", Stage::restart,
       "other head_dims and max_num_seqs", Verdict::run_ends,
       "worker restarted with another description: head_dims [16, 32, 48, 64, ..., 1024] (64 values) -> [64, 128]; "
       "max_num_seqs 4096 -> 8"},
      {"exec_restart_fails", Via::exec, "restart-fails", "describe", Stage::restart, "exit 5 first",
       Verdict::fault, "worker restart failed: worker exited with status 5"},
      {"exec_ignore_quit", Via::exec, "ignore-quit", "quit", Stage::close, "nothing; SIGTERM ignored",
       Verdict::pass, ""},
      // ---- the C ABI, in process: status codes ---------------------------------------------
      {"lib_ok", Via::lib, "modes:none", "decode", Stage::call, "PAV_OK", Verdict::pass, ""},
      {"lib_check_accept", Via::lib, "modes:none", "check", Stage::call, "PAV_OK", Verdict::pass, ""},
      {"lib_no_fini", Via::lib, "no_fini:none", "decode", Stage::call, "PAV_OK, no pav_kernel_fini (optional)",
       Verdict::pass, ""},
      {"lib_no_fini_describe_error", Via::lib, "no_fini:describe-error", "describe", Stage::open,
       "PAV_ERROR, no pav_kernel_fini (optional)", Verdict::bad_input,
       "pav_kernel_describe failed (3): fault plugin cannot describe itself: describe-error"},
      {"lib_check_reject", Via::lib, "modes:check-reject", "check", Stage::call, "PAV_REJECT", Verdict::rejected,
       "kernel refused the call: fault plugin refuses: check-reject"},
      {"lib_check_reject_silent", Via::lib, "modes:check-reject-silent", "check", Stage::call,
       "PAV_REJECT, no reason", Verdict::rejected, "kernel refused the call: (no reason given)"},
      {"lib_check_error", Via::lib, "modes:check-error", "check", Stage::call, "PAV_ERROR", Verdict::kernel_error,
       "kernel error: pav_kernel_check returned 3 (expected PAV_OK or PAV_REJECT): fault plugin fails: check-error"},
      {"lib_check_stale_plan", Via::lib, "modes:check-stale-plan", "check", Stage::call, "PAV_STALE_PLAN",
       Verdict::kernel_error, "kernel error: pav_kernel_check returned 2 (expected PAV_OK or PAV_REJECT)"},
      {"lib_check_bad_status", Via::lib, "modes:check-bad-status", "check", Stage::call, "7", Verdict::kernel_error,
       "kernel error: pav_kernel_check returned 7 (expected PAV_OK or PAV_REJECT)"},
      {"lib_decode_reject", Via::lib, "modes:decode-reject", "decode", Stage::call, "PAV_REJECT", Verdict::rejected,
       "kernel refused the call: fault plugin refuses: decode-reject"},
      {"lib_decode_stale_plan", Via::lib, "modes:decode-stale-plan", "decode", Stage::call, "PAV_STALE_PLAN",
       Verdict::stale_plan, "stale plan: fault plugin's plan is stale: decode-stale-plan"},
      {"lib_decode_error", Via::lib, "modes:decode-error", "decode", Stage::call, "PAV_ERROR", Verdict::kernel_error,
       "kernel error: fault plugin fails: decode-error"},
      // A fresh plan: the call is pav's own (the stale one is PavCli.AFailingStaleCaseReplaysToExitOne).
      {"lib_decode_stale_silent", Via::lib, "modes:decode-stale-silent", "decode", Stage::call,
       "PAV_OK (a fresh plan)", Verdict::pass, ""},
      {"lib_decode_unavailable", Via::lib, "modes:decode-unavailable", "decode", Stage::call, "PAV_UNAVAILABLE",
       Verdict::kernel_error,
       "kernel error: pav_kernel_decode returned PAV_UNAVAILABLE, which only pav_kernel_init may: fault plugin "
       "returns 4"},
      {"lib_decode_bad_status", Via::lib, "modes:decode-bad-status", "decode", Stage::call, "42",
       Verdict::kernel_error, "kernel error: pav_kernel_decode returned 42, not a pav_status: fault plugin returns 42"},
      {"lib_decode_message_not_utf8", Via::lib, "bad_text", "decode", Stage::call,
       "PAV_ERROR, a message of 0xff without a NUL", Verdict::kernel_error,
       "kernel error: fault plugin says \xef\xbf\xbd"},
      // ---- the C ABI, in process: loading, init, describe ----------------------------------
      {"lib_init_error", Via::lib, "modes:init-error", "init", Stage::open, "PAV_ERROR", Verdict::bad_input,
       "pav_kernel_init failed (3): fault plugin refuses to start: init-error"},
      {"lib_init_unavailable", Via::lib, "modes:init-unavailable", "init", Stage::open, "PAV_UNAVAILABLE",
       Verdict::cannot_run, "the kernel cannot run on this machine: fault plugin: init-unavailable"},
      {"lib_init_bad_status", Via::lib, "modes:init-bad-status", "init", Stage::open, "9", Verdict::bad_input,
       "pav_kernel_init failed (9): fault plugin returns 9: init-bad-status"},
      {"lib_describe_error", Via::lib, "modes:describe-error", "describe", Stage::open, "PAV_ERROR",
       Verdict::bad_input, "pav_kernel_describe failed (3): fault plugin cannot describe itself: describe-error"},
      {"lib_describe_device", Via::lib, "modes:describe-device", "describe", Stage::open, "memory = device",
       Verdict::cannot_run, "the kernel works on device memory; this pav build has no GPU support"},
      {"lib_describe_invalid", Via::lib, "describe", "describe", Stage::open, "num_head_dims = 0",
       Verdict::bad_input, "head_dims: empty"},
      {"lib_no_init_with_words", Via::lib, "no_init", "init", Stage::open, "no pav_kernel_init, words given",
       Verdict::bad_input, "configuration words given (--path) but the library has no pav_kernel_init"},
      {"lib_no_init_describe", Via::lib, "no_init_bare", "describe", Stage::open, "no pav_kernel_init, no words",
       Verdict::bad_input, "pav_kernel_describe failed (3): no instance: call pav_kernel_init first"},
      {"lib_missing_decode", Via::lib, "missing_decode", "load", Stage::open, "no pav_kernel_decode",
       Verdict::bad_input, "missing required symbol pav_kernel_decode"},
      {"lib_missing_describe", Via::lib, "missing_describe", "load", Stage::open, "no pav_kernel_describe",
       Verdict::bad_input, "missing required symbol pav_kernel_describe"},
      {"lib_missing_abi_version", Via::lib, "missing_abi_version", "load", Stage::open,
       "no pav_kernel_abi_version", Verdict::bad_input, "missing required symbol pav_kernel_abi_version"},
      {"lib_abi_version_newer", Via::lib, "abi_version", "load", Stage::open, "ABI version 5", Verdict::bad_input,
       "kernel ABI version 5, this pav speaks versions 1 to 4"},
      {"lib_abi_version_older", Via::lib, "abi_too_old", "load", Stage::open, "ABI version 0", Verdict::bad_input,
       "kernel ABI version 0, this pav speaks versions 1 to 4"},
      {"lib_abi_v1", Via::lib, "abi_v1", "decode", Stage::call, "ABI version 1, args prefix", Verdict::pass, ""},
      {"lib_abi_v2", Via::lib, "abi_v2", "decode", Stage::call, "ABI version 2, args prefix", Verdict::pass, ""},
      {"lib_abi_v3", Via::lib, "abi_v3", "decode", Stage::call, "ABI version 3, args prefix", Verdict::pass, ""},
      {"lib_abi_v1_check", Via::lib, "abi_v1", "check", Stage::call, "ABI version 1, args prefix", Verdict::pass,
       ""},
      {"lib_no_such_file", Via::lib, "no_such_file", "load", Stage::open, "a path with no file", Verdict::bad_input,
       "no such file"},
      {"lib_truncated", Via::lib, "truncated", "load", Stage::open, "the first 20000 bytes", Verdict::bad_input,
       "not a loadable shared library: truncated"},
      {"lib_other_machine", Via::lib, "other_machine", "load", Stage::open, "an aarch64 ELF", Verdict::bad_input,
       "cannot load:"},
      {"lib_exit_while_loading", Via::lib, "exit_load", "load", Stage::open, "exit(0) in a constructor",
       Verdict::exits_3, "called exit(0) inside its constructors"},
      {"lib_exit_in_decode", Via::lib, "exit_decode", "decode", Stage::call, "exit(0)", Verdict::exits_3,
       "called exit(0) inside pav_kernel_decode"},
      // ---- the C ABI behind the worker protocol (--isolate) --------------------------------
      {"isolate_ok", Via::isolate, "modes:none", "decode", Stage::call, "PAV_OK", Verdict::pass, ""},
      {"isolate_check_reject", Via::isolate, "modes:check-reject", "check", Stage::call, "PAV_REJECT",
       Verdict::rejected, "kernel refused the call: fault plugin refuses: check-reject"},
      {"isolate_check_error", Via::isolate, "modes:check-error", "check", Stage::call, "PAV_ERROR",
       Verdict::kernel_error,
       "kernel error: pav_kernel_check returned 3 (expected PAV_OK or PAV_REJECT): fault plugin fails: check-error"},
      {"isolate_decode_reject", Via::isolate, "modes:decode-reject", "decode", Stage::call, "PAV_REJECT",
       Verdict::rejected, "kernel refused the call: fault plugin refuses: decode-reject"},
      {"isolate_decode_stale_plan", Via::isolate, "modes:decode-stale-plan", "decode", Stage::call,
       "PAV_STALE_PLAN", Verdict::stale_plan, "stale plan: fault plugin's plan is stale: decode-stale-plan"},
      {"isolate_decode_error", Via::isolate, "modes:decode-error", "decode", Stage::call, "PAV_ERROR",
       Verdict::kernel_error, "kernel error: fault plugin fails: decode-error"},
      {"isolate_decode_bad_status", Via::isolate, "modes:decode-bad-status", "decode", Stage::call, "42",
       Verdict::kernel_error, "kernel error: pav_kernel_decode returned 42, not a pav_status"},
      {"isolate_describe_error", Via::isolate, "modes:describe-error", "describe", Stage::open, "PAV_ERROR",
       Verdict::bad_input, "pav_kernel_describe failed (3): fault plugin cannot describe itself: describe-error"},
      // The child runs under /bin/sh, which may report the signal as status 139.
      {"isolate_segfault", Via::isolate, "segv", "decode", Stage::call, "SIGSEGV", Verdict::fault, "signal 11"},
      {"isolate_prints_on_stdout", Via::isolate, "chatty", "decode", Stage::call, "a line on stdout",
       Verdict::pass, ""},
  };
  return rows;
}

// ---- running a row ---------------------------------------------------------------------

fs::path scratch(const std::string& name) { return adapters::fixture::scratch_dir("pav-protocol-table", name); }
using adapters::fixture::slurp;

// A library made here from pav's CPU plugin: the first 20000 bytes of it, or
// the whole with its ELF header naming another machine (aarch64).
std::string made_library(const std::string& what) {
  std::string bytes = slurp(PAV_TEST_CPU_PLUGIN);
  if (what == "truncated") bytes.resize(20000);
  if (what == "other_machine") {
    const uint16_t aarch64 = 183;  // EM_AARCH64, at offset 18 of the ELF header
    std::memcpy(bytes.data() + 18, &aarch64, sizeof aarch64);
  }
  const fs::path p = scratch("made") / ("lib" + what + ".so");
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return p.string();
}

// The --kernel text of a row. state: the fault_worker's --state file.
std::string spec_of(const Row& row, const std::string& state) {
  const std::string f = row.fixture;
  if (row.via == Via::exec)
    return "exec:exec " + adapters::shell_quote(PAV_TEST_FAULT_WORKER) + " --fault " + f + " --min-len 300 --state " +
           adapters::shell_quote(state) + " -- --path uniform";
  if (f.rfind("modes:", 0) == 0)
    return "lib:" + adapters::shell_quote(PAV_TEST_FAULT_MODES) + " --fault " + f.substr(6) + " --path uniform";
  if (f.rfind("no_fini:", 0) == 0)
    return "lib:" + adapters::shell_quote(PAV_TEST_FAULT_NO_FINI) + " --fault " + f.substr(8) + " --path uniform";
  static const std::map<std::string, std::string> libraries = {
      {"bad_text", PAV_TEST_FAULT_BAD_TEXT},
      {"describe", PAV_TEST_FAULT_DESCRIBE},
      {"no_init", PAV_TEST_FAULT_NO_INIT},
      {"missing_decode", PAV_TEST_FAULT_MISSING_DECODE},
      {"missing_describe", PAV_TEST_FAULT_MISSING_DESCRIBE},
      {"missing_abi_version", PAV_TEST_FAULT_MISSING_ABI_VERSION},
      {"abi_version", PAV_TEST_FAULT_ABI_VERSION},
      {"abi_too_old", PAV_TEST_FAULT_ABI_TOO_OLD},
      {"abi_v1", PAV_TEST_ABI_V1},
      {"abi_v2", PAV_TEST_ABI_V2},
      {"abi_v3", PAV_TEST_ABI_V3},
      {"exit_load", PAV_TEST_FAULT_EXIT_LOAD},
      {"exit_decode", PAV_TEST_FAULT_EXIT_DECODE},
      {"segv", PAV_TEST_FAULT_SEGV},
      {"chatty", PAV_TEST_FAULT_CHATTY},
  };
  if (f == "no_init_bare") return "lib:" + adapters::shell_quote(PAV_TEST_FAULT_NO_INIT);
  if (f == "no_such_file") return "lib:/nonexistent/libnothing.so";
  if (f == "truncated" || f == "other_machine") return "lib:" + adapters::shell_quote(made_library(f));
  const auto it = libraries.find(f);
  if (it == libraries.end()) throw std::logic_error("no library " + f);
  return "lib:" + adapters::shell_quote(it->second) + " --path uniform";
}

adapters::OpenOptions options_of(const Row& row) {
  adapters::OpenOptions o;
  const std::string f = row.fixture;
  o.timeout_seconds = f == "hang" || f == "describe-hang" ? 1.0 : 30.0;
  o.isolate = row.via == Via::isolate;
  o.self_exe = PAV_TEST_PAV;
  return o;
}

struct Called {
  CallResult result;
  std::string text;      // what a report says of the call: props::outcome_text, or the standard's verdict
  bool judged = false;   // the output went to the comparison standard
  bool passed = false;   // and met it
};

Called call(adapters::KernelUnderTest& k, const std::string& op, bool armed) {
  props::HostCase c = props::build_case(armed ? adapters::fixture::small_spec() : adapters::fixture::short_spec());
  props::KernelCall kc;
  props::prepare_kernel_call(kc, c, k.description());
  Called r;
  r.result = op == "check" ? k.check(kc.request) : k.decode(kc.request);
  r.text = props::outcome_text(r.result);
  if (op == "decode" && r.result.ok()) {
    const props::KernelJudgement j = props::judge_kernel_output(kc.request, k.description());
    r.judged = true;
    r.passed = j.passed;
    r.text = j.verdict;
  }
  return r;
}

bool holds(const std::string& text, const std::string& fragment) { return text.find(fragment) != std::string::npos; }

std::string regex_quoted(const std::string& s) {
  static const std::regex special(R"([\\^$.|?*+()\[\]{}])");
  return std::regex_replace(s, special, R"(\$&)");
}

// Whether process pid has ended (gone, or a zombie nobody reaped).
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

class Table : public ::testing::TestWithParam<Row> {};

// Removes this process's scratch folder (the worker's state file, the made
// libraries) when the row ends.
struct ScratchRemoved {
  ~ScratchRemoved() {
    std::error_code ec;
    fs::remove_all(scratch("").parent_path(), ec);
  }
};

TEST_P(Table, Row) {
  const Row& row = GetParam();
  const ScratchRemoved removed;
  const std::string state = row.via == Via::exec ? (scratch(row.name) / "state").string() : std::string();
  const std::string spec = spec_of(row, state);
  std::cout << "row " << row.name << ": " << name_of(row.via) << " fixture " << row.fixture << ", " << row.op
            << " sends " << row.sends << "; expected: " << name_of(row.verdict)
            << (*row.text ? std::string(" with '") + row.text + "'" : std::string()) << "\n";

  if (row.verdict == Verdict::exits_3) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
          auto k = adapters::open_kernel(spec, options_of(row));
          (void)call(*k, row.op, /*armed=*/true);
          std::exit(0);
        },
        ::testing::ExitedWithCode(3), regex_quoted(row.text));
    return;
  }

  if (row.stage == Stage::open) {
#ifdef PAV_HAVE_GPU
    if (std::string(row.name) == "lib_describe_device") GTEST_SKIP() << "a GPU build loads device-memory kernels";
#endif
    std::string got = "opened";
    bool spec_error = false, unavailable = false;
    try {
      adapters::open_kernel(spec, options_of(row));
    } catch (const adapters::KernelSpecError& e) {
      spec_error = true;
      got = e.what();
    } catch (const adapters::KernelUnavailable& e) {
      unavailable = true;
      got = e.what();
    }
    std::cout << "  got: " << (spec_error ? "bad input: " : unavailable ? "cannot run: " : "") << got << "\n";
    EXPECT_EQ(spec_error, row.verdict == Verdict::bad_input) << got;
    EXPECT_EQ(unavailable, row.verdict == Verdict::cannot_run) << got;
    EXPECT_TRUE(holds(got, row.text)) << got;
    return;
  }

  auto k = adapters::open_kernel(spec, options_of(row));

  if (row.stage == Stage::close) {
    ASSERT_TRUE(call(*k, "decode", false).result.ok());
    pid_t pid = 0;
    std::ifstream(state) >> pid;
    ASSERT_GT(pid, 0) << "the worker wrote no pid to " << state;
    const auto t0 = std::chrono::steady_clock::now();
    k.reset();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int i = 0; i < 200 && !ended(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::cout << "  got: the kernel let go in " << seconds << " s; worker " << pid
              << (ended(pid) ? " ended" : " still running") << "\n";
    EXPECT_LT(seconds, 5.0);
    EXPECT_TRUE(ended(pid)) << "worker " << pid << " outlived pav's hold on it";
    if (!ended(pid)) ::kill(pid, SIGKILL);
    return;
  }

  if (row.stage == Stage::restart) {
    const Called first = call(*k, "decode", true);
    std::cout << "  first call: " << adapters::to_string(first.result.outcome) << ": " << first.text << "\n";
    ASSERT_EQ(first.result.outcome, Outcome::fault) << first.text;
    ASSERT_TRUE(holds(first.text, "worker exited with status 7")) << first.text;
    if (row.verdict == Verdict::run_ends) {
      std::string got = "the call returned";
      bool changed = false;
      try {
        const Called second = call(*k, "decode", false);
        got += ": " + second.text;
      } catch (const adapters::KernelChanged& e) {
        changed = true;
        got = e.what();
      }
      std::cout << "  got: " << (changed ? "run ends: " : "") << got << "\n";
      EXPECT_TRUE(changed) << got;
      EXPECT_TRUE(holds(got, row.text)) << got;
      return;
    }
    const Called second = call(*k, "decode", false);
    std::cout << "  got: " << adapters::to_string(second.result.outcome) << ": " << second.text << "\n";
    EXPECT_EQ(second.result.outcome, outcome_of(row.verdict)) << second.text;
    EXPECT_TRUE(holds(second.text, row.text)) << second.text;
    return;
  }

  const Called got = call(*k, row.op, /*armed=*/true);
  std::cout << "  got: " << adapters::to_string(got.result.outcome) << ": " << got.text << "\n";
  EXPECT_EQ(got.result.outcome, outcome_of(row.verdict)) << got.text;
  EXPECT_TRUE(holds(got.text, row.text)) << got.text;
  if (row.verdict == Verdict::pass && row.op == std::string("decode")) {
    EXPECT_TRUE(got.judged && got.passed) << got.text;
  }
  if (row.verdict == Verdict::fails_standard) {
    EXPECT_TRUE(got.judged && !got.passed) << got.text;
  }
  if (row.verdict == Verdict::fault) {
    // The worker is started again for the next call, which it answers.
    const Called next = call(*k, "decode", false);
    std::cout << "  next call: " << adapters::to_string(next.result.outcome) << ": " << next.text << "\n";
    EXPECT_TRUE(next.result.ok()) << "after " << row.name << ": " << next.text;
  }
}

INSTANTIATE_TEST_SUITE_P(ProtocolTable, Table, ::testing::ValuesIn(table()),
                         [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });

// ---- completeness ----------------------------------------------------------------------

std::set<std::string> modes_of(Via via, const char* prefix) {
  std::set<std::string> out;
  for (const Row& r : table()) {
    const std::string f = r.fixture;
    if (r.via == via && f.rfind(prefix, 0) == 0) out.insert(f.substr(std::strlen(prefix)));
  }
  return out;
}

template <class List>
std::set<std::string> set_of(const List& list) {
  std::set<std::string> out;
  for (std::string_view s : list) out.emplace(s);
  return out;
}

std::string text_of(const std::set<std::string>& s) {
  std::string t;
  for (const std::string& x : s) t += (t.empty() ? "" : ", ") + x;
  return "{" + t + "}";
}

TEST(ProtocolTableCompleteness, EveryWorkerFaultHasARow) {
  const std::set<std::string> rows = modes_of(Via::exec, ""), offered = set_of(adapters::fixture::kWorkerFaults);
  std::cout << "fault_worker offers " << offered.size() << " faults, the table plays " << rows.size() << "\n";
  EXPECT_EQ(rows, offered) << "rows " << text_of(rows) << "\nfixture " << text_of(offered);
}

TEST(ProtocolTableCompleteness, EveryPluginFaultHasARow) {
  const std::set<std::string> rows = modes_of(Via::lib, "modes:"), offered = set_of(adapters::fixture::kPluginFaults);
  std::cout << "pav_fault_modes offers " << offered.size() << " faults, the table plays " << rows.size() << "\n";
  EXPECT_EQ(rows, offered) << "rows " << text_of(rows) << "\nfixture " << text_of(offered);
}

TEST(ProtocolTableCompleteness, EveryOpOfTheProtocolHasARow) {
  std::set<std::string> ops;
  for (const Row& r : table())
    if (r.via == Via::exec) ops.insert(r.op);
  for (std::string_view op : adapters::protocol::kOps) {
    std::cout << "op " << op << (ops.count(std::string(op)) ? ": has rows\n" : ": no row\n");
    EXPECT_TRUE(ops.count(std::string(op))) << "no row sends a fault with the op " << op;
  }
}

// Each status of an ok: false reply, sent by a worker and by a library behind
// --isolate (pav kernel-worker speaks it), ends in the outcome the protocol
// gives it.
TEST(ProtocolTableCompleteness, EveryProtocolStatusHasARowEndingInItsOutcome) {
  for (const adapters::protocol::StatusName& s : adapters::protocol::kStatuses) {
    bool sent = false;
    for (const Row& r : table())
      if (r.via == Via::exec && r.sends == s.name) {
        sent = true;
        EXPECT_EQ(outcome_of(r.verdict), s.outcome) << r.name;
      }
    std::cout << "status " << s.name << " (" << adapters::to_string(s.outcome) << ")"
              << (sent ? ": has a row\n" : ": no row\n");
    EXPECT_TRUE(sent) << "no worker row sends the status " << s.name;
  }
}

// The pav_status values as include/pav/kernel_abi.h declares them.
std::vector<std::string> header_statuses() {
  const std::string h = slurp(PAV_TEST_ABI_HEADER);
  const size_t from = h.find("typedef enum pav_status {"), to = h.find("} pav_status;");
  EXPECT_NE(from, std::string::npos);
  EXPECT_NE(to, std::string::npos);
  const std::string body = h.substr(from, to - from);
  static const std::regex value(R"((PAV_[A-Z_]+)\s*=\s*[0-9]+)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), value); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

TEST(ProtocolTableCompleteness, EveryPavStatusHasALibRow) {
  const std::vector<std::string> statuses = header_statuses();
  ASSERT_GE(statuses.size(), 5u);
  for (const std::string& s : statuses) {
    int rows = 0;
    for (const Row& r : table())
      if (r.via == Via::lib && (r.sends == s || std::string(r.sends).rfind(s + ",", 0) == 0)) ++rows;
    std::cout << s << ": " << rows << " lib rows\n";
    EXPECT_GT(rows, 0) << "no lib row has a library return " << s;
  }
}

TEST(ProtocolTableCompleteness, EveryOutcomeHasARowThroughEachAdapter) {
  int outcomes = 0;
  for (int o = 0; adapters::to_string(Outcome(o)) != "?"; ++o, ++outcomes)
    for (const Via via : {Via::exec, Via::lib}) {
      int rows = 0;
      for (const Row& r : table())
        if ((r.via == via || (via == Via::lib && r.via == Via::isolate)) && outcome_of(r.verdict) == Outcome(o))
          ++rows;
      std::cout << adapters::to_string(Outcome(o)) << " via " << name_of(via) << ": " << rows << " rows\n";
      EXPECT_GT(rows, 0) << "no " << name_of(via) << " row ends in " << adapters::to_string(Outcome(o));
    }
  EXPECT_GE(outcomes, 5);
}

TEST(ProtocolTableCompleteness, RowNamesAreUnique) {
  std::set<std::string> names;
  for (const Row& r : table()) EXPECT_TRUE(names.insert(r.name).second) << r.name;
}

}  // namespace
