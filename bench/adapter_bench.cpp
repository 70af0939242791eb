// SPDX-License-Identifier: Apache-2.0
// Adapter overhead per decode call: what pav spends getting one call to a
// kernel under test and its output back, without the kernel's own work. Each
// adapter is timed with a kernel that does no attention (bench/adapter/: a
// plugin and a worker that write zeros), on one generated case (by default 4
// sequences of 4096 tokens). Goals: <= 0.1 ms per call through a shared
// library, <= 2 ms through a worker. docs/verify-your-kernel.md ("Speed")
// quotes the figures.
//
//   adapter_bench [--calls N] [--tokens T] [--batch B] [--hkv H] [--group G]
//                 [--head-dim D] [--format NAME] [--kernel SPEC]... [--json-out FILE]
//                 [--pav PATH] [--python PY] [--null-kernel PATH] [--null-worker PATH]
//
// Without --kernel it times the built-in set: lib (in process), lib with
// --isolate (pav's own worker in a child process), exec with a NumPy worker
// that only answers, and exec with one that also maps every input file. The
// last four options point it at those pieces when it runs outside the build
// tree (a build carried to another machine). The Python extension runs the
// same bench in its own process (bench/adapter/inprocess_bench.py), where
// --kernel inproc:KEY names a Python kernel registered there. --format picks the cache format
// of the case: packed (fp8 e4m3, the default), nhd, hnd, nhd-combined,
// nhd-csr-page1 (bf16 caches), or mla (one bf16 latent head of 512 + 64 dims,
// G 16, whatever --hkv, --group and --head-dim say).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "common/test_paths.hpp"
#include "properties/case/host_case.hpp"

namespace {

using namespace pav;
using Clock = std::chrono::steady_clock;

struct Entry {
  std::string label;
  std::string spec;
  bool isolate = false;
};

// Per-call times of one series of calls.
struct Series {
  double mean_ms = 0, median_ms = 0, p10_ms = 0, p90_ms = 0, min_ms = 0;
};

struct Timing {
  std::string label, spec, identity;
  int64_t calls = 0, failures = 0;
  Series repeat;  // the same inputs as the call before (a drift sweep, a replay, a comparison)
  Series fresh;   // inputs that differ from the call before (fuzzing: every case is new)
  double open_ms = 0;
  std::string first_failure;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

Series summarize(const std::vector<double>& ms) {
  Series r;
  double sum = 0;
  for (double x : ms) sum += x;
  r.mean_ms = sum / double(ms.size());
  r.median_ms = percentile(ms, 0.5);
  r.p10_ms = percentile(ms, 0.1);
  r.p90_ms = percentile(ms, 0.9);
  r.min_ms = *std::min_element(ms.begin(), ms.end());
  return r;
}

adapters::DecodeRequest request_of(props::HostCase& c, bool with_lse, std::vector<float>& lse) {
  adapters::DecodeRequest r;
  r.call = c.call();
  if (with_lse) {
    const int64_t rows = r.call.q.shape[0], hq = r.call.q.shape[1];
    lse.assign(size_t(rows * hq), 0.0f);
    r.lse = kernels::TensorView::contiguous_of(lse.data(), kernels::DType::f32, {rows, hq});
  }
  return r;
}

// Times `calls` decode calls of case a alone (repeat), then `calls` calls
// alternating a and b (fresh).
Timing time_adapter(const Entry& e, const std::string& pav_binary, props::HostCase& a, props::HostCase& b,
                    int calls) {
  Timing t;
  t.label = e.label;
  t.spec = e.spec;
  adapters::OpenOptions opt;
  opt.isolate = e.isolate;
  opt.self_exe = pav_binary;  // --isolate runs `pav kernel-worker`
  const auto t0 = Clock::now();
  std::unique_ptr<adapters::KernelUnderTest> k = adapters::open_kernel(e.spec, opt);
  t.open_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  t.identity = adapters::identity(*k);
  const bool with_lse = k->description().writes_lse;
  std::vector<float> lse_a, lse_b;
  const adapters::DecodeRequest ra = request_of(a, with_lse, lse_a), rb = request_of(b, with_lse, lse_b);

  auto series = [&](bool alternate) {
    // Warm-up: the first calls pay for page faults, imports and caches.
    for (int i = 0; i < 3; ++i) (void)k->decode(alternate && i % 2 ? rb : ra);
    std::vector<double> ms;
    ms.reserve(size_t(calls));
    for (int i = 0; i < calls; ++i) {
      const adapters::DecodeRequest& r = alternate && i % 2 == 0 ? rb : ra;
      const auto c0 = Clock::now();
      const adapters::CallResult res = k->decode(r);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - c0).count());
      if (!res.ok()) {
        ++t.failures;
        if (t.first_failure.empty()) t.first_failure = res.message;
      }
    }
    return summarize(ms);
  };
  t.repeat = series(false);
  t.fresh = series(true);
  t.calls = 2 * int64_t(calls);
  return t;
}

}  // namespace

int adapter_bench_main(int argc, char** argv) {
  CLI::App app{"Adapter overhead per decode call, with kernels that do no attention."};
  int calls = 200, tokens = 4096, batch = 4, hkv = 8, group = 8, head_dim = 128;
  std::vector<std::string> kernels_given;
  std::string json_out;
  app.add_option("--calls", calls, "timed calls per series and adapter (after 3 warm-up calls)")->check(CLI::Range(1, 1000000));
  app.add_option("--tokens", tokens, "context length of every sequence")->check(CLI::Range(1, 1 << 24));
  app.add_option("--batch", batch, "sequences per call")->check(CLI::Range(1, 4096));
  app.add_option("--hkv", hkv, "KV heads")->check(CLI::Range(1, 64));
  app.add_option("--group", group, "query heads per KV head")->check(CLI::Range(1, 16));
  app.add_option("--head-dim", head_dim, "head dim")->check(CLI::IsMember({64, 128, 256}));
  app.add_option("--kernel", kernels_given, "time this --kernel text instead of the built-in set (repeatable)");
  app.add_option("--json-out", json_out, "also write the figures as JSON to this file");
  std::string format = "packed";
  app.add_option("--format", format, "the case's cache format")
      ->check(CLI::IsMember({"packed", "nhd", "hnd", "nhd-combined", "nhd-csr-page1", "mla"}))
      ->capture_default_str();
  std::string pav_binary = PAV_BINARY, python = PAV_PYTHON, null_kernel = PAV_NULL_KERNEL,
              null_worker = PAV_NULL_WORKER;
  app.add_option("--pav", pav_binary, "the pav binary --isolate runs as the library's worker")->capture_default_str();
  app.add_option("--python", python, "the Python (with NumPy) the built-in exec entries run")->capture_default_str();
  app.add_option("--null-kernel", null_kernel, "the built-in lib entries' plugin")->capture_default_str();
  app.add_option("--null-worker", null_worker, "the built-in exec entries' worker script")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<Entry> entries;
  for (const auto& s : kernels_given) entries.push_back({s, s, false});
  if (entries.empty()) {
    const std::string lib = "lib:" + null_kernel;
    const std::string worker = "exec:" + python + " " + null_worker;
    entries = {{"lib", lib, false},
               {"lib --isolate", lib, true},
               {"exec (answer only)", worker, false},
               {"exec (maps inputs)", worker + " --load", false}};
  }

  props::CaseSpec spec;
  spec.lens.assign(size_t(batch), tokens);
  spec.hkv = hkv;
  spec.group = group;
  spec.head_dim = head_dim;
  spec.block_size = 16;
  spec.scales = props::ScaleKind::per_tensor;
  spec.path = props::Path::uniform;
  if (format != "packed") {  // the formats of bf16 engines: read as stored, nothing converted
    spec.cache_dtype = kernels::DType::bf16;
    spec.opt.compute = kernels::DType::bf16;
    spec.scales = props::ScaleKind::none;
    spec.layout = format == "hnd" ? kernels::CacheLayout::hnd : kernels::CacheLayout::nhd;
    spec.kv_combined = format == "nhd-combined";
    if (format == "nhd-csr-page1") {
      spec.page_table = kernels::PageTable::csr;
      spec.block_size = 1;
    }
    if (format == "mla") {
      spec.hkv = 1;
      spec.group = 16;
      spec.head_dim = 576;
      spec.v_head_dim = 512;
    }
  }
  props::HostCase a = props::build_case(spec);
  spec.seed += 1;  // same shapes, other values
  props::HostCase b = props::build_case(spec);
  const double cache_mb = double(a.k.size() + a.v.size()) / 1e6;
  const double q_mb = double(a.q.size() * 2) / 1e6;
  fmt::print("case: {} x {} tokens, {} cache, Hkv {}, G {}, D {}, block {}: K+V {:.1f} MB, q {:.2f} MB; {} calls per series\n",
             batch, tokens, format, spec.hkv, spec.group, spec.head_dim, spec.block_size, cache_mb, q_mb, calls);
  fmt::print("repeat: the inputs of the call before; fresh: every call's inputs differ from the call before's\n\n");
  fmt::print("{:<20} {:>13} {:>9} {:>9} {:>12} {:>9} {:>9} {:>10} {:>8}\n", "adapter", "repeat mean ms", "median",
             "p90", "fresh mean ms", "median", "p90", "fresh/s", "open ms");
  nlohmann::json j;
  j["case"] = {{"batch", batch}, {"tokens", tokens}, {"format", format}, {"hkv", spec.hkv}, {"group", spec.group},
               {"head_dim", spec.head_dim}, {"block_size", spec.block_size}, {"cache_mb", cache_mb}, {"q_mb", q_mb},
               {"calls", calls}};
  int status = 0;
  for (const Entry& e : entries) {
    Timing t;
    try {
      t = time_adapter(e, pav_binary, a, b, calls);
    } catch (const std::exception& ex) {
      fmt::print("{:<22} cannot open: {}\n", e.label, ex.what());
      status = 1;
      continue;
    }
    fmt::print("{:<20} {:>13.3f} {:>9.3f} {:>9.3f} {:>12.3f} {:>9.3f} {:>9.3f} {:>10.0f} {:>8.1f}\n", t.label,
               t.repeat.mean_ms, t.repeat.median_ms, t.repeat.p90_ms, t.fresh.mean_ms, t.fresh.median_ms,
               t.fresh.p90_ms, 1000.0 / t.fresh.mean_ms, t.open_ms);
    if (t.failures) {
      fmt::print("  {} of {} calls failed: {}\n", t.failures, t.calls, t.first_failure);
      status = 1;
    }
    auto series = [](const Series& x) {
      return nlohmann::json{{"mean_ms", x.mean_ms}, {"median_ms", x.median_ms}, {"p10_ms", x.p10_ms},
                            {"p90_ms", x.p90_ms}, {"min_ms", x.min_ms}, {"calls_per_second", 1000.0 / x.mean_ms}};
    };
    j["adapters"].push_back({{"label", t.label}, {"spec", t.spec}, {"kernel", t.identity}, {"calls", t.calls},
                             {"failures", t.failures}, {"repeat", series(t.repeat)}, {"fresh", series(t.fresh)},
                             {"open_ms", t.open_ms}});
  }
  if (!json_out.empty()) {
    std::ofstream f(json_out);
    f << j.dump(2) << "\n";
    if (!f) {
      fmt::print(stderr, "cannot write {}\n", json_out);
      return 3;
    }
  }
  return status;
}
