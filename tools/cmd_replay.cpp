// SPDX-License-Identifier: Apache-2.0
// pav replay CASE.json: runs one saved decode call through a kernel path and
// the reference, prints the error figures and a verdict.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>

#include "kernels/validate.hpp"
#include "properties/case_format.hpp"
#include "properties/fuzz.hpp"
#include "properties/runner.hpp"
#include "tools/backend_option.hpp"
#include "tools/kernel_option.hpp"

namespace {

using namespace pav;
using ojson = nlohmann::ordered_json;

const char* path_name(props::Path p) { return p == props::Path::planned ? "planned" : "uniform"; }

int run(std::vector<std::string> args) {
  CLI::App app{"Replay a case file: run its decode call and the reference, compare, give a verdict.", "replay"};
  std::vector<std::string> files;
  std::string backend_name = "auto";
  std::string path_override;
  cli::ReportOutput output;
  app.add_option("case", files, "case file(s) in the pav-case/1 JSON format")->required()->check(CLI::ExistingFile);
  cli::add_backend_option(app, backend_name);
  app.add_option("--path", path_override, "override the case's kernel path: planned or uniform")
      ->check(CLI::IsMember({"planned", "uniform"}));
  cli::KernelOptions kernel_options;
  cli::add_kernel_options(app, kernel_options);
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();
  // --kernel: every case runs through that kernel. Without it, a case that
  // records the kernel it was found on runs through that one again.
  std::map<std::string, std::unique_ptr<adapters::KernelUnderTest>> kernels;
  auto kernel_for = [&](const std::string& spec) -> adapters::KernelUnderTest& {
    auto& k = kernels[spec];
    if (!k) k = cli::open_kernel(spec, kernel_options);
    return *k;
  };
  const bool json = !output.text();
  const kernels::Backend backend = cli::pick_backend(backend_name);
  ojson report = cli::report_header("replay");
  report["backend"] = cli::backend_name(backend);
  report["cases"] = ojson::array();

  int failures = 0;
  for (const auto& file : files) {
    props::CaseSpec spec;
    nlohmann::json meta;
    try {
      spec = props::load_case_spec(file, &meta);
    } catch (const props::CaseError& e) {
      throw cli::BadInput(e.what());
    }
    // A counterexample of another property (gate mirror, planner, batch
    // invariance, ...) replays through that property's own check.
    if (meta.contains("property") && !meta["property"].is_string())
      throw cli::BadInput(file + ": meta.property: expected a string, got " + std::string(meta["property"].type_name()));
    const std::string property = meta.value("property", std::string("decode"));
    std::string kernel_spec = kernel_options.specs.empty() ? std::string() : kernel_options.specs.front();
    bool recorded = false;
    if (kernel_spec.empty() && meta.contains("kernel") && meta["kernel"].is_object() && meta["kernel"].contains("spec")) {
      if (!meta["kernel"]["spec"].is_string()) throw cli::BadInput(file + ": meta.kernel.spec: expected a string");
      kernel_spec = meta["kernel"]["spec"].get<std::string>();
      recorded = true;
    }
    if (!kernel_spec.empty()) {
      adapters::KernelUnderTest& k = kernel_for(kernel_spec);
      std::string ran;
      props::fuzz::Verdict v;
      try {
        v = props::fuzz::replay_case(spec, meta, {backend, &k}, &ran);
      } catch (const props::CaseError& e) {
        throw cli::BadInput(file + ": " + e.what());
      }
      if (!v.passed) ++failures;
      report["cases"].push_back({{"case", file},
                                 {"property", ran},
                                 {"kernel", adapters::identity_json(k)},
                                 {"kernel_recorded_in_case", recorded},
                                 {"passed", v.passed},
                                 {"verdict", v.message}});
      if (!json)
        fmt::print("case      {}\nproperty  {}\nkernel    {}{}\nverdict   {}\n\n", file, ran, adapters::identity(k),
                   recorded ? " (recorded in the case)" : "", cli::verdict_text(v.passed, v.message));
      continue;
    }
    if (property != "decode") {
      std::string ran;
      props::fuzz::Verdict v;
      try {
        v = props::fuzz::replay_case(spec, meta, {backend}, &ran);
      } catch (const props::CaseError& e) {
        throw cli::BadInput(file + ": " + e.what());
      }
      if (!v.passed) ++failures;
      report["cases"].push_back(
          {{"case", file}, {"property", ran}, {"passed", v.passed}, {"verdict", v.message}});
      if (!json) {
        fmt::print("case      {}\nproperty  {}\nbackend   {}\nverdict   {}\n\n", file, ran,
                   cli::backend_name(backend), cli::verdict_text(v.passed, v.message));
      }
      continue;
    }
    if (path_override == "planned") spec.path = props::Path::planned;
    if (path_override == "uniform") spec.path = props::Path::uniform;
    props::HostCase c;
    try {
      c = props::build_case(spec);
    } catch (const std::invalid_argument& e) {
      throw cli::BadInput(file + ": " + e.what());
    }
    ojson j;
    j["case"] = file;
    j["property"] = "decode";
    j["path"] = path_name(spec.path);
    j["num_seqs"] = spec.lens.size();
    try {
      const props::CaseCheck k = props::check_case(c, backend);
      const auto& r = k.compare;
      j["passed"] = k.passed;
      j["elements"] = r.elements;
      j["mismatches"] = r.mismatches;
      j["nonfinite"] = r.nonfinite;
      j["nonzero_in_empty_rows"] = r.nonzero_in_empty_rows;
      j["max_abs_err"] = r.max_abs_err;
      j["max_rel_err"] = r.max_rel_err;
      j["rel_l2_err"] = r.rel_l2_err;
      j["worst_ratio"] = r.worst_ratio;
      j["stale_plan"] = k.run.status.status != kernels::DecodeStatus::ok;
      j["scratch_touched_past_active"] = k.scratch_touched_past_active;
      j["verdict"] = k.verdict;
      if (r.first.index >= 0)
        j["first_mismatch"] = {{"seq", r.first.seq}, {"pos", r.first.pos}, {"head", r.first.head}, {"d", r.first.d},
                               {"out", r.first.out}, {"ref", r.first.ref}, {"allowed", r.first.allowed},
                               {"kind", r.first.kind}};
      if (!k.passed) ++failures;
      if (!json) {
        fmt::print("case      {}\n", file);
        if (meta.contains("property")) fmt::print("property  {}\n", property);
        fmt::print("call      {} seqs, q_len {}, Hkv {}, G {}, D {}, block {}, {} path, {} backend\n",
                   spec.lens.size(), spec.q_len, spec.hkv, spec.group, spec.head_dim, spec.block_size,
                   path_name(spec.path), cli::backend_name(backend));
        fmt::print("elements  {}   mismatches {}   non-finite {}   non-zero in empty rows {}\n", r.elements,
                   r.mismatches, r.nonfinite, r.nonzero_in_empty_rows);
        fmt::print("errors    max abs {:.3e}   max rel {:.3e}   ||d||/||ref|| {:.3e}   worst/allowed {:.3f}\n",
                   r.max_abs_err, r.max_rel_err, r.rel_l2_err, r.worst_ratio);
        if (r.first.index >= 0)
          fmt::print("first     seq {} pos {} head {} d {}: out {} ref {} allowed {:.3e} ({})\n", r.first.seq,
                     r.first.pos, r.first.head, r.first.d, r.first.out, r.first.ref, r.first.allowed, r.first.kind);
        fmt::print("verdict   {}\n\n", cli::verdict_text(k.passed, k.verdict));
      }
    } catch (const kernels::RejectError& e) {
      ++failures;
      j["passed"] = false;
      j["rejected"] = e.what();
      if (!json) fmt::print("case      {}\nverdict   FAIL: the kernel rejected the call: {}\n\n", file, e.what());
    } catch (const std::invalid_argument& e) {
      // Plan parameters the planner refuses (a ceiling above cu): the file's fault.
      throw cli::BadInput(file + ": " + e.what());
    }
    report["cases"].push_back(std::move(j));
  }
  if (!json && files.size() > 1) fmt::print("{} of {} cases passed\n", files.size() - failures, files.size());
  report["passed"] = failures == 0;
  return output.finish(report, failures ? cli::kExitFail : cli::kExitOk, "replay");
}

}  // namespace

PAV_COMMAND("replay", "run a saved case through a kernel and the reference, and give a verdict", run);
