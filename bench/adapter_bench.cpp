// Adapter overhead per decode call: what pav spends getting one call to a
// kernel under test and its output back, without the kernel's own work. Each
// adapter is timed with a kernel that does no attention (bench/adapter/: a
// plugin and a worker that write zeros), on one generated case (by default 4
// sequences of 4096 tokens). Goals: <= 0.1 ms per call through a shared
// library, <= 2 ms through a worker. docs/verify-your-kernel.md ("Speed")
// quotes the figures.
//
//   adapter_bench [--calls N] [--tokens T] [--batch B] [--hkv H] [--group G]
//                 [--head-dim D] [--kernel SPEC]... [--json-out FILE]
//
// Without --kernel it times the built-in set: lib (in process), lib with
// --isolate (pav's own worker in a child process), exec with a NumPy worker
// that only answers, and exec with one that also maps every input file.
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
#include "properties/host_case.hpp"

namespace {

using namespace pav;
using Clock = std::chrono::steady_clock;

struct Entry {
  std::string label;
  std::string spec;
  bool isolate = false;
};

struct Timing {
  std::string label, spec, identity;
  int64_t calls = 0, failures = 0;
  double mean_ms = 0, median_ms = 0, p10_ms = 0, p90_ms = 0, min_ms = 0;
  double open_ms = 0;
  std::string first_failure;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

Timing time_adapter(const Entry& e, props::HostCase& c, int calls) {
  Timing t;
  t.label = e.label;
  t.spec = e.spec;
  adapters::OpenOptions opt;
  opt.isolate = e.isolate;
  opt.self_exe = PAV_BINARY;  // --isolate runs `pav kernel-worker`
  const auto t0 = Clock::now();
  std::unique_ptr<adapters::KernelUnderTest> k = adapters::open_kernel(e.spec, opt);
  t.open_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  t.identity = adapters::identity(*k);

  adapters::DecodeRequest r;
  r.call = c.call();
  std::vector<float> lse;
  if (k->description().writes_lse) {
    const int64_t rows = r.call.q.shape[0], hq = r.call.q.shape[1];
    lse.assign(size_t(rows * hq), 0.0f);
    r.lse = kernels::TensorView::contiguous_of(lse.data(), kernels::DType::f32, {rows, hq});
  }
  // Warm-up: the first calls pay for page faults, imports and caches.
  for (int i = 0; i < 3; ++i) (void)k->decode(r);
  std::vector<double> ms;
  ms.reserve(size_t(calls));
  for (int i = 0; i < calls; ++i) {
    const auto a = Clock::now();
    const adapters::CallResult res = k->decode(r);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
    if (!res.ok()) {
      ++t.failures;
      if (t.first_failure.empty()) t.first_failure = res.message;
    }
  }
  t.calls = calls;
  double sum = 0;
  for (double x : ms) sum += x;
  t.mean_ms = sum / double(ms.size());
  t.median_ms = percentile(ms, 0.5);
  t.p10_ms = percentile(ms, 0.1);
  t.p90_ms = percentile(ms, 0.9);
  t.min_ms = *std::min_element(ms.begin(), ms.end());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Adapter overhead per decode call, with kernels that do no attention."};
  int calls = 200, tokens = 4096, batch = 4, hkv = 8, group = 8, head_dim = 128;
  std::vector<std::string> kernels_given;
  std::string json_out;
  app.add_option("--calls", calls, "timed calls per adapter (after 3 warm-up calls)")->check(CLI::Range(1, 1000000));
  app.add_option("--tokens", tokens, "context length of every sequence")->check(CLI::Range(1, 1 << 24));
  app.add_option("--batch", batch, "sequences per call")->check(CLI::Range(1, 4096));
  app.add_option("--hkv", hkv, "KV heads")->check(CLI::Range(1, 64));
  app.add_option("--group", group, "query heads per KV head")->check(CLI::Range(1, 16));
  app.add_option("--head-dim", head_dim, "head dim")->check(CLI::IsMember({64, 128, 256}));
  app.add_option("--kernel", kernels_given, "time this --kernel text instead of the built-in set (repeatable)");
  app.add_option("--json-out", json_out, "also write the figures as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  std::vector<Entry> entries;
  for (const auto& s : kernels_given) entries.push_back({s, s, false});
  if (entries.empty()) {
    const std::string lib = std::string("lib:") + PAV_NULL_KERNEL;
    const std::string worker = std::string("exec:") + PAV_PYTHON + " " + PAV_NULL_WORKER;
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
  props::HostCase c = props::build_case(spec);
  const double cache_mb = double(c.k.size() + c.v.size()) / 1e6;
  const double q_mb = double(c.q.size() * 2) / 1e6;
  fmt::print("case: {} x {} tokens, Hkv {}, G {}, D {}, block 16: K+V {:.1f} MB, q {:.2f} MB, {} calls each\n\n",
             batch, tokens, hkv, group, head_dim, cache_mb, q_mb, calls);
  fmt::print("{:<22} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}\n", "adapter", "mean ms", "median", "p10", "p90",
             "calls/s", "open ms");
  nlohmann::json j;
  j["case"] = {{"batch", batch}, {"tokens", tokens}, {"hkv", hkv}, {"group", group}, {"head_dim", head_dim},
               {"block_size", 16}, {"cache_mb", cache_mb}, {"q_mb", q_mb}, {"calls", calls}};
  int status = 0;
  for (const Entry& e : entries) {
    Timing t;
    try {
      t = time_adapter(e, c, calls);
    } catch (const std::exception& ex) {
      fmt::print("{:<22} cannot open: {}\n", e.label, ex.what());
      status = 1;
      continue;
    }
    fmt::print("{:<22} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>10.0f} {:>9.1f}\n", t.label, t.mean_ms, t.median_ms,
               t.p10_ms, t.p90_ms, 1000.0 / t.mean_ms, t.open_ms);
    if (t.failures) {
      fmt::print("  {} of {} calls failed: {}\n", t.failures, t.calls, t.first_failure);
      status = 1;
    }
    j["adapters"].push_back({{"label", t.label}, {"spec", t.spec}, {"kernel", t.identity}, {"calls", t.calls},
                             {"failures", t.failures}, {"mean_ms", t.mean_ms}, {"median_ms", t.median_ms},
                             {"p10_ms", t.p10_ms}, {"p90_ms", t.p90_ms}, {"min_ms", t.min_ms},
                             {"calls_per_second", 1000.0 / t.mean_ms}, {"open_ms", t.open_ms}});
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
