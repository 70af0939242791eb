// SPDX-License-Identifier: Apache-2.0
// session::replay: saved case files through the kernel each names (or the one
// the options name) and the reference, each with its verdict and, for a decode
// case, its error figures. The one replay path of pav replay, pav fuzz
// --replay and the Python package.
#include <fmt/core.h>

#include <map>
#include <memory>

#include "common/durable_file.hpp"
#include "properties/case/case_format.hpp"
#include "properties/checks/replay.hpp"
#include "properties/checks/runner_kernel.hpp"
#include "properties/checks/builtin_properties.hpp"
#include "properties/session/support.hpp"

namespace pav::session {

namespace fz = pav::props::fuzz;
using ojson = nlohmann::ordered_json;

namespace {

const char* path_name(props::Path p) { return p == props::Path::planned ? "planned" : "uniform"; }

}  // namespace

Report replay(const ReplayOptions& o, const Io& io) {
  const std::string& command = o.command;
  const std::string& array_key = o.array_key;
  const std::vector<std::string>& files = o.files;
  if (files.empty()) throw BadInput("replay: no case file");
  if (o.path_override != "" && o.path_override != "planned" && o.path_override != "uniform")
    throw BadInput("--path: expected planned or uniform, got '" + o.path_override.substr(0, 40) + "'");
  std::FILE* out = io.out;
  const kernels::Backend backend = pick_backend(o.backend);
  // One kernel per way of opening it, shared by the cases that name it.
  std::map<std::string, std::unique_ptr<adapters::KernelUnderTest>> kernels;
  auto kernel_for = [&](const ReplayKernel& rk, const std::string& file) -> adapters::KernelUnderTest& {
    auto& k = kernels[fmt::format("{}\n{}\n{}", rk.spec, rk.isolate, rk.timeout)];
    if (!k) {
      KernelOptions ko = o.kernel;
      ko.isolate = rk.isolate;
      ko.timeout = rk.timeout;
      try {
        k = open_kernel(rk.spec, ko);
      } catch (const BadInput& e) {
        if (!rk.recorded) throw;
        throw BadInput(file + ": meta.kernel: " + e.what());
      }
    }
    return *k;
  };
  ojson report = report_header(command);
  report["backend"] = backend_name(backend);
  report[array_key] = ojson::array();

  int failures = 0;
  for (const auto& file : files) {
    props::CaseSpec spec;
    nlohmann::json meta;
    try {
      spec = props::load_case_spec(file, &meta);
    } catch (const props::CaseError& e) {
      throw BadInput(e.what());
    }
    // A counterexample of another property (gate mirror, planner, batch
    // invariance, ...) replays through that property's own check.
    if (meta.contains("property") && !meta["property"].is_string())
      throw BadInput(file + ": meta.property: expected a string, got " + std::string(meta["property"].type_name()));
    const std::string named = meta.value("property", std::string("decode"));
    const ReplayKernel rk = replay_kernel(file, meta, o);
    // The kernel: --kernel, the one the case records, or pav's with the
    // settings the case holds; none for a case about pav's planner or gate.
    std::unique_ptr<adapters::KernelUnderTest> own;
    adapters::KernelUnderTest* k = nullptr;
    if (!rk.spec.empty()) {
      k = &kernel_for(rk, file);
    } else if (!fz::is_host_property(named)) {
      if (o.path_override == "planned") spec.path = props::Path::planned;
      if (o.path_override == "uniform") spec.path = props::Path::uniform;
      try {
        own = fz::case_kernel(spec, meta, backend);
      } catch (const props::CaseError& e) {
        throw BadInput(file + ": " + e.what());
      } catch (const adapters::KernelSpecError& e) {
        throw BadInput(file + ": meta.kernel.spec: " + e.what());
      } catch (const adapters::KernelUnavailable& e) {
        throw CannotRun(file + ": " + e.what());
      }
      k = own.get();
    }
    std::string ran = named;
    if (k) {
      try {
        ran = fz::kernel_property_named(fz::kernel_properties(*k), named, *k).name;
      } catch (const props::CaseError& e) {
        throw BadInput(file + ": " + e.what());
      }
    }
    ojson j;
    j["case"] = file;
    j["property"] = ran;
    if (k) {
      j["kernel"] = adapters::identity_json(*k);
      j["kernel_recorded_in_case"] = rk.recorded;
    }
    // How the run that saved it saw the failure again (fuzz_engine.hpp's Reproduction).
    const nlohmann::json* saved_as = meta.contains("reproduction") ? &meta["reproduction"] : nullptr;
    j["saved_reproduction"] = saved_as && saved_as->is_string() ? ojson(saved_as->get<std::string>()) : ojson(nullptr);
    if (out) {
      fmt::print(out, "case      {}\nproperty  {}\n", file, ran);
      if (k)
        fmt::print(out, "kernel    {}{}\n", adapters::identity(*k), rk.recorded ? " (recorded in the case)" : "");
      else
        fmt::print(out, "backend   {}\n", backend_name(backend));
      if (j["saved_reproduction"] == "state-dependent")
        fmt::print(out, "note      saved as state-dependent: it failed only after earlier calls of the run that "
                        "found it, and a fresh instance of the kernel passed it; a PASS here does not show the bug "
                        "is gone\n");
    }
    if (ran != "decode") {
      props::fuzz::Verdict v;
      try {
        v = props::fuzz::replay_case(spec, meta, {backend, k});
      } catch (const props::CaseError& e) {
        throw BadInput(file + ": " + e.what());
      }
      if (!v.passed) ++failures;
      j["passed"] = v.passed;
      j["verdict"] = v.message;
      report[array_key].push_back(std::move(j));
      if (out) fmt::print(out, "verdict   {}\n\n", verdict_text(v.passed, v.message));
      continue;
    }
    // A decode case: its error figures beside the verdict.
    j["path"] = path_name(spec.path);
    j["num_seqs"] = spec.lens.size();
    j["earlier_calls"] = spec.prelude.size();
    props::KernelJudgement jd;
    bool earlier_failed = false;
    try {
      // The kernel's large_cache decides whether a case with low blocks may
      // take more than the 1 GiB of any case; checked before anything is built.
      const bool large_cache = k->description().large_cache;
      props::check_case_spec(spec, true, large_cache);
      // A sequence: its earlier calls through the same kernel first; the
      // first that fails is the verdict.
      for (size_t i = 0; i < spec.prelude.size() && !earlier_failed; ++i) {
        props::check_case_spec(spec.prelude[i].spec, true, large_cache);
        const props::KernelJudgement before = props::check_kernel_case(spec.prelude[i].spec, *k);
        if (!before.passed) {
          earlier_failed = true;
          jd = before;
          jd.verdict = fz::earlier_call_failed(i, spec.prelude.size(), before.verdict);
        }
      }
      if (!earlier_failed) jd = props::check_kernel_case(spec, *k);
    } catch (const pav::IoError&) {
      throw;
    } catch (const std::invalid_argument& e) {
      throw BadInput(file + ": " + e.what());  // a recipe the case builder or the planner refuses
    }
    const auto& r = jd.compare;
    j["passed"] = jd.passed;
    if (!jd.passed) ++failures;
    if (r.elements > 0) {
      j["elements"] = r.elements;
      j["mismatches"] = r.mismatches;
      j["nonfinite"] = r.nonfinite;
      j["nonzero_in_empty_rows"] = r.nonzero_in_empty_rows;
      j["max_abs_err"] = r.max_abs_err;
      j["max_rel_err"] = r.max_rel_err;
      j["rel_l2_err"] = r.rel_l2_err;
      j["worst_ratio"] = r.worst_ratio;
      if (r.first.index >= 0)
        j["first_mismatch"] = {{"seq", r.first.seq}, {"pos", r.first.pos}, {"head", r.first.head}, {"d", r.first.d},
                               {"out", r.first.out}, {"ref", r.first.ref}, {"allowed", r.first.allowed},
                               {"kind", r.first.kind}};
    }
    j["verdict"] = jd.verdict;
    if (!jd.known.empty()) j["known_shape"] = jd.known;  // a failure of a known shape (runner_kernel.hpp)
    if (out) {
      if (!spec.prelude.empty())
        fmt::print(out, "prelude   {} earlier call(s) through the same kernel first{}\n", spec.prelude.size(),
                   earlier_failed ? "" : ", each passed");
      fmt::print(out, "call      {} seqs, q_len {}, Hkv {}, G {}, D {}, block {}, {} path\n", spec.lens.size(), spec.q_len,
                 spec.hkv, spec.group, spec.head_dim, spec.block_size, path_name(spec.path));
      if (r.elements > 0) {
        fmt::print(out, "elements  {}   mismatches {}   non-finite {}   non-zero in empty rows {}\n", r.elements,
                   r.mismatches, r.nonfinite, r.nonzero_in_empty_rows);
        fmt::print(out, "errors    max abs {:.3e}   max rel {:.3e}   ||d||/||ref|| {:.3e}   worst/allowed {:.3f}\n",
                   r.max_abs_err, r.max_rel_err, r.rel_l2_err, r.worst_ratio);
        if (r.first.index >= 0)
          fmt::print(out, "first     seq {} pos {} head {} d {}: out {} ref {} allowed {:.3e} ({})\n", r.first.seq,
                     r.first.pos, r.first.head, r.first.d, r.first.out, r.first.ref, r.first.allowed, r.first.kind);
      }
      fmt::print(out, "verdict   {}\n\n", verdict_text(jd.passed, jd.verdict));
    }
    report[array_key].push_back(std::move(j));
  }
  if (out && files.size() > 1) fmt::print(out, "{} of {} cases passed\n", files.size() - failures, files.size());
  report["passed"] = failures == 0;
  Report rep;
  rep.exit_code = failures ? kExitFail : kExitOk;
  rep.verdict = failures ? fmt::format("FAIL ({} of {} cases failed)", failures, files.size()) : "PASS";
  rep.json = std::move(report);
  return rep;
}

}  // namespace pav::session
