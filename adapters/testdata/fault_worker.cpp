// SPDX-License-Identifier: Apache-2.0
// Test fixture: a worker that serves pav's CPU kernel over the worker protocol
// and misbehaves in one chosen way on every call whose longest context reaches
// --min-len tokens (so shrinking has a boundary to find), or while it
// describes itself.
//   fault_worker --fault MODE [--min-len N] [--state FILE] [-- KERNEL WORDS...]
// MODE is one of fixture::kWorkerFaults (fault_modes.hpp); --list prints them.
// --state FILE: the worker creates FILE when it starts (and writes its pid
// there), so a worker started again finds it and knows it is a restart
// (describe-changes, restart-fails).
//   decode, the process: crash (SIGSEGV), exit (status 7), exit-139 (the status
//     a shell reports for signal 11), hang, close-stdout (closes it and waits),
//     non-utf8 (stderr bytes that are not UTF-8, a character cut at the
//     excerpt's start, then exit 9)
//   decode, the reply: garbage (not JSON), long-line (past 64 MiB), no-ok,
//     bad-id (the next id), no-id; reject, stale-plan, error (ok false with
//     that status, from the kernel's outcome), status-missing, status-unknown,
//     status-not-string, no-message (ok false without an error text)
//   decode, the outputs: missing, wrong-shape, wrong-dtype, fortran, too-large,
//     fifo (a FIFO nobody writes), devzero (a symlink to /dev/zero), directory,
//     lse-missing (describes writes_lse, leaves lse.npy out), nan
//   check: check-reject (with a reason), check-reject-silent (without),
//     check-error, check-no-accept, check-reason-not-string
//   describe: no-describe (exits first), describe-hang, describe-garbage,
//     describe-not-ok, describe-protocol-2, describe-device, describe-invalid
//     (empty head_dims), describe-unknown-field, describe-changes (exits on an
//     armed decode; started again it describes other head_dims and
//     max_num_seqs), restart-fails (exits on an armed decode; started again it
//     exits before describing)
//   quit: ignore-quit (ignores quit, end of input and SIGTERM)
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "adapters/npy.hpp"
#include "adapters/pav_kernel.hpp"
#include "adapters/testdata/fault_modes.hpp"
#include "adapters/worker_protocol.hpp"
#include "adapters/worker_server.hpp"

namespace {

using namespace pav::adapters;
using nlohmann::json;

std::string g_fault = "none";
int64_t g_min_len = 0;
bool g_armed = false;
bool g_restarted = false;

bool is(const char* mode) { return g_fault == mode; }

// Whether a call reaches --min-len tokens in some sequence.
bool reaches_min_len(const pav::kernels::TensorView& lens) {
  const auto* l = lens.as<int32_t>();
  for (int64_t s = 0; s < lens.shape[0]; ++s)
    if (l[s] >= g_min_len) return true;
  return false;
}

void announce() {
  std::fprintf(stderr, "fault_worker: injecting %s\n", g_fault.c_str());
  std::fflush(stderr);
}

class FaultKernel final : public KernelUnderTest {
 public:
  explicit FaultKernel(std::unique_ptr<KernelUnderTest> inner) : inner_(std::move(inner)), d_(inner_->description()) {
    if (is("lse-missing")) d_.writes_lse = true;
  }
  const KernelDescription& description() const override { return d_; }
  std::string adapter() const override { return "fault fixture"; }
  std::string spec() const override { return "fault_worker"; }
  int64_t decode_calls() const override { return inner_->decode_calls(); }
  CallResult check(const DecodeRequest& r) override {
    g_armed = reaches_min_len(r.call.context_lens);
    if (g_armed && g_fault.rfind("check-", 0) == 0) {
      announce();
      if (is("check-reject")) return {Outcome::rejected, "fault_worker refuses: check-reject"};
      if (is("check-reject-silent")) return {Outcome::rejected, ""};
      if (is("check-error")) return {Outcome::kernel_error, "fault_worker fails: check-error"};
    }
    return inner_->check(inner_request(r));
  }
  CallResult decode(const DecodeRequest& r) override {
    g_armed = reaches_min_len(r.call.context_lens);
    if (g_armed) {
      announce();
      if (is("non-utf8")) {
        // A euro sign cut by the 2048-byte excerpt's start, then bytes that
        // are no UTF-8 at all, then an exit whose verdict quotes them.
        // 2049 bytes: pav's 2048-byte excerpt starts at the euro sign's second byte.
        const std::string tail = "\nbad bytes: \xff\xfe\xc0\xaf \xed\xa0\x80 cut \xe2\x82\n";
        std::string text = "\xe2\x82\xac";
        text += std::string(2046 - tail.size(), 'x');
        text += tail;
        std::fwrite(text.data(), 1, text.size(), stderr);
        std::fflush(stderr);
        ::_exit(9);  // not a signal: the shell adds no line of its own after the text
      }
      if (is("crash")) ::raise(SIGSEGV);
      if (is("exit") || is("describe-changes") || is("restart-fails")) ::_exit(7);
      if (is("exit-139")) ::_exit(139);
      if (is("close-stdout")) ::close(1);
      if (is("hang") || is("close-stdout"))
        for (;;) ::pause();
      if (is("reject")) return {Outcome::rejected, "fault_worker refuses: reject"};
      if (is("stale-plan")) return {Outcome::stale_plan, "fault_worker's plan is stale: stale-plan"};
      if (is("error")) return {Outcome::kernel_error, "fault_worker fails: error"};
    }
    CallResult res = inner_->decode(inner_request(r));
    if (g_armed && is("nan") && res.ok()) {
      auto* out = r.call.out.as<uint16_t>();
      out[r.call.out.numel() / 2] = r.call.out.dtype == pav::kernels::DType::bf16 ? 0x7fc0 : 0x7e00;
    }
    return res;
  }

 private:
  // pav's kernel writes no lse: it is not handed the one this worker declares.
  DecodeRequest inner_request(const DecodeRequest& r) const {
    DecodeRequest inner = r;
    if (!inner_->description().writes_lse) inner.lse = {};
    return inner;
  }
  std::unique_ptr<KernelUnderTest> inner_;
  KernelDescription d_;
};

void rewrite(const std::string& path, const std::string& header, size_t bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(header.data(), std::streamsize(header.size()));
  const std::string zeros(bytes, '\0');
  f.write(zeros.data(), std::streamsize(zeros.size()));
}

json failed(const json& req, const json& fields) {
  json r = {{"id", req.at("id")}, {"ok", false}};
  r.update(fields);
  return r;
}

std::optional<std::string> tamper_describe(const json& reply) {
  json r = reply;
  if (is("describe-garbage")) return std::string("fault_worker describes nothing");
  if (is("describe-not-ok")) return json({{"ok", false}, {"error", "fault_worker will not say"}}).dump();
  if (is("describe-protocol-2")) r["protocol"] = 2;
  if (is("describe-device")) r["kernel"]["memory"] = "device";
  if (is("describe-invalid")) r["kernel"]["head_dims"] = json::array();
  if (is("describe-unknown-field")) r["kernel"]["head_dimz"] = {64};
  if (is("describe-changes") && g_restarted) {
    r["kernel"]["head_dims"] = {64, 128};
    r["kernel"]["max_num_seqs"] = 8;
  }
  return r.dump();
}

std::optional<std::string> tamper_check(const json& req, const json& reply) {
  if (!g_armed) return std::nullopt;
  if (is("check-no-accept")) return json({{"id", req.at("id")}, {"ok", true}}).dump();
  if (is("check-reason-not-string"))
    return json({{"id", req.at("id")}, {"ok", true}, {"accept", false}, {"reason", 7}}).dump();
  (void)reply;
  return std::nullopt;
}

std::optional<std::string> tamper_decode(const json& req, const json& reply) {
  if (!g_armed) return std::nullopt;
  const std::string dir = req.at("dir").get<std::string>();
  const std::string out = dir + "/out.npy";
  const auto shape = req.at("outputs").at("out").at("shape").get<std::vector<int64_t>>();
  const int64_t n = shape[0] * shape[1] * shape[2];
  pav::kernels::DType t = pav::kernels::DType::bf16;
  pav::kernels::parse_dtype(req.at("outputs").at("out").at("dtype").get<std::string>(), t);
  const std::string descr(npy::descr_of(t));
  if (is("garbage")) return std::string("fault_worker says hello");
  if (is("long-line")) return std::string(size_t(pav::kernels::kMaxWorkerLineBytes) + 4096, 'x');
  if (is("no-ok")) return json({{"id", req.at("id")}}).dump();
  if (is("bad-id")) {
    json r = reply;
    r["id"] = req.at("id").get<int64_t>() + 1;
    return r.dump();
  }
  if (is("no-id")) return json({{"ok", true}}).dump();
  if (is("status-missing")) return failed(req, {{"error", "fault_worker fails without a status"}}).dump();
  if (is("status-unknown")) return failed(req, {{"status", "busy"}, {"error", "fault_worker is busy"}}).dump();
  if (is("status-not-string")) return failed(req, {{"status", 3}, {"error", "fault_worker fails"}}).dump();
  if (is("no-message")) return failed(req, {{"status", "error"}}).dump();
  if (is("missing")) std::filesystem::remove(out);
  if (is("lse-missing")) std::filesystem::remove(dir + "/lse.npy");
  if (is("fifo")) {
    std::filesystem::remove(out);
    ::mkfifo(out.c_str(), 0600);
  }
  if (is("devzero")) {
    std::filesystem::remove(out);
    std::filesystem::create_symlink("/dev/zero", out);
  }
  if (is("directory")) {
    std::filesystem::remove(out);
    std::filesystem::create_directory(out);
  }
  const size_t es = size_t(pav::kernels::dtype_size(t));
  // The right dtype, half the head dim: a shape fault only.
  if (is("wrong-shape")) rewrite(out, npy::header(descr, {shape[0], shape[1], shape[2] / 2}), size_t(n) / 2 * es);
  if (is("wrong-dtype")) rewrite(out, npy::header("<f4", shape), size_t(n) * 4);
  if (is("fortran")) {
    std::string head = npy::header(descr, shape);
    head.replace(head.find("False"), 5, "True ");
    rewrite(out, head, size_t(n) * es);
  }
  // Past the data its shape calls for and the largest header together.
  if (is("too-large")) rewrite(out, npy::header(descr, shape), size_t(n) * es + (size_t(2) << 20));
  return std::nullopt;
}

std::optional<std::string> tamper(const json& req, const json& reply) {
  const std::string op = req.value("op", std::string());
  if (op == "describe") return tamper_describe(reply);
  if (op == "check") return tamper_check(req, reply);
  if (op == "decode") return tamper_decode(req, reply);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words;
  std::string state;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--fault" && i + 1 < argc) g_fault = argv[++i];
    else if (a == "--min-len" && i + 1 < argc) g_min_len = std::stoll(argv[++i]);
    else if (a == "--state" && i + 1 < argc) state = argv[++i];
    else if (a == "--list") {
      for (std::string_view f : fixture::kWorkerFaults) std::printf("%.*s\n", int(f.size()), f.data());
      return 0;
    } else if (a == "--") {
      for (++i; i < argc; ++i) words.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "fault_worker: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!fixture::listed(fixture::kWorkerFaults, g_fault)) {
    std::fprintf(stderr, "fault_worker: unknown fault %s (--list names them)\n", g_fault.c_str());
    return 2;
  }
  if (!state.empty()) {
    g_restarted = std::filesystem::exists(state);
    std::ofstream(state) << ::getpid() << "\n";
  }
  if (is("no-describe") || (is("restart-fails") && g_restarted)) {
    std::fprintf(stderr, "fault_worker: exiting before describing myself\n");
    return 5;
  }
  if (is("describe-hang"))
    for (;;) ::pause();
  FaultKernel kernel(make_pav_kernel(parse_pav_kernel_words(words), "fault_worker"));
  ServeHooks hooks;
  hooks.replace_reply = tamper;
  const int rc = serve_worker(kernel, 0, 1, hooks);
  if (is("ignore-quit")) {
    ::signal(SIGTERM, SIG_IGN);
    for (;;) ::pause();
  }
  return rc;
}
