// SPDX-License-Identifier: Apache-2.0
// Test fixture: a worker that serves pav's CPU kernel over the worker protocol
// and misbehaves in one chosen way on every call whose longest context reaches
// --min-len tokens (so shrinking has a boundary to find).
//   fault_worker --fault MODE [--min-len N] [-- KERNEL WORDS...]
// MODE: none, crash, exit, hang, garbage, wrong-shape, wrong-dtype, missing,
// bad-id, nan, no-describe (exits before describing itself), fifo (out.npy a
// FIFO nobody writes), devzero (out.npy a symlink to /dev/zero), non-utf8
// (stderr bytes that are not UTF-8, a character cut at the excerpt's start,
// then exit 9).
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
#include "adapters/worker_server.hpp"

namespace {

using namespace pav::adapters;

std::string g_fault = "none";
int64_t g_min_len = 0;
bool g_armed = false;

class FaultKernel final : public KernelUnderTest {
 public:
  explicit FaultKernel(std::unique_ptr<KernelUnderTest> inner) : inner_(std::move(inner)) {}
  const KernelDescription& description() const override { return inner_->description(); }
  std::string adapter() const override { return "fault fixture"; }
  std::string spec() const override { return "fault_worker"; }
  CallResult check(const DecodeRequest& r) override { return inner_->check(r); }
  int64_t decode_calls() const override { return inner_->decode_calls(); }
  CallResult decode(const DecodeRequest& r) override {
    const auto* lens = r.call.context_lens.as<int32_t>();
    g_armed = false;
    for (int64_t s = 0; s < r.call.context_lens.shape[0]; ++s) g_armed = g_armed || lens[s] >= g_min_len;
    if (g_armed) {
      std::fprintf(stderr, "fault_worker: injecting %s\n", g_fault.c_str());
      std::fflush(stderr);
      if (g_fault == "non-utf8") {
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
      if (g_fault == "crash") ::raise(SIGSEGV);
      if (g_fault == "exit") ::_exit(7);
      if (g_fault == "hang")
        for (;;) ::pause();
    }
    CallResult res = inner_->decode(r);
    if (g_armed && g_fault == "nan" && res.ok()) {
      auto* out = r.call.out.as<uint16_t>();
      out[r.call.out.numel() / 2] = r.call.out.dtype == pav::kernels::DType::bf16 ? 0x7fc0 : 0x7e00;
    }
    return res;
  }

 private:
  std::unique_ptr<KernelUnderTest> inner_;
};

void rewrite(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, size_t bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const std::string head = npy::header(descr, shape);
  f.write(head.data(), std::streamsize(head.size()));
  const std::string zeros(bytes, '\0');
  f.write(zeros.data(), std::streamsize(zeros.size()));
}

std::optional<std::string> tamper(const nlohmann::json& req, const nlohmann::json& reply) {
  if (!g_armed) return std::nullopt;
  const std::string out = req.at("dir").get<std::string>() + "/out.npy";
  const auto shape = req.at("outputs").at("out").at("shape").get<std::vector<int64_t>>();
  const int64_t n = shape[0] * shape[1] * shape[2];
  if (g_fault == "garbage") return std::string("fault_worker says hello");
  if (g_fault == "bad-id") {
    nlohmann::json r = reply;
    r["id"] = req.at("id").get<int64_t>() + 1;
    return r.dump();
  }
  if (g_fault == "missing") std::filesystem::remove(out);
  if (g_fault == "fifo") {
    std::filesystem::remove(out);
    ::mkfifo(out.c_str(), 0600);
  }
  if (g_fault == "devzero") {
    std::filesystem::remove(out);
    std::filesystem::create_symlink("/dev/zero", out);
  }
  if (g_fault == "wrong-shape") {  // the right dtype, half the head dim: a shape fault only
    pav::kernels::DType t = pav::kernels::DType::bf16;
    pav::kernels::parse_dtype(req.at("outputs").at("out").at("dtype").get<std::string>(), t);
    rewrite(out, std::string(npy::descr_of(t)), {shape[0], shape[1], shape[2] / 2}, size_t(n));
  }
  if (g_fault == "wrong-dtype") rewrite(out, "<f4", shape, size_t(n) * 4);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--fault" && i + 1 < argc) g_fault = argv[++i];
    else if (a == "--min-len" && i + 1 < argc) g_min_len = std::stoll(argv[++i]);
    else if (a == "--") {
      for (++i; i < argc; ++i) words.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "fault_worker: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (g_fault == "no-describe") {
    std::fprintf(stderr, "fault_worker: exiting before describing myself\n");
    return 5;
  }
  FaultKernel kernel(make_pav_kernel(parse_pav_kernel_words(words), "fault_worker"));
  ServeHooks hooks;
  hooks.after_decode = tamper;
  return serve_worker(kernel, 0, 1, hooks);
}
