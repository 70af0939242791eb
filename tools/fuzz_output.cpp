// SPDX-License-Identifier: Apache-2.0
#include "tools/fuzz_output.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "common/durable_file.hpp"
#include "common/text_list.hpp"
#include "kernels/validate.hpp"
#include "properties/case_format.hpp"
#include "properties/counterexample.hpp"
#include "properties/fuzz_report.hpp"
#include "properties/builtin_properties.hpp"
#include "properties/kernel_properties.hpp"
#include "properties/replay.hpp"
#include "properties/runner_kernel.hpp"
#include "tools/backend_option.hpp"
#include "tools/options.hpp"

namespace pav::cli {

namespace fz = pav::props::fuzz;

CLI::Option* add_save_option(CLI::App& app, std::string& dir) {
  dir = props::default_counterexample_dir();
  return app.add_option("--save", dir,
                        "folder for counterexample case files (default: $PAV_COUNTEREXAMPLE_DIR, else "
                        "./counterexamples)")
      ->check(non_empty());
}

void check_save_dir(const std::string& dir) { pav::check_writable_dir(dir, "--save " + dir); }

std::vector<const fz::Property*> select_properties(const std::vector<std::string>& names) {
  return select_properties(names, fz::properties());
}

std::vector<const fz::Property*> select_properties(const std::vector<std::string>& names,
                                                   const std::vector<fz::Property>& available) {
  std::vector<const fz::Property*> out;
  for (const std::string& option_value : names)
    for (const std::string& n : pav::split_list(option_value)) {
      const fz::Property* p = nullptr;
      for (const auto& q : available)
        if (q.name == n) p = &q;
      if (!p) {
        std::string known;
        for (const auto& q : available) known += (known.empty() ? "" : ", ") + q.name;
        throw BadInput("--property: unknown property '" + n.substr(0, 60) + "' (known: " + known + ")");
      }
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
  if (out.empty())
    for (const auto& p : available) out.push_back(&p);
  return out;
}

nlohmann::ordered_json property_run_json(const fz::PropertyRun& run) {
  nlohmann::ordered_json j;
  j["property"] = run.property;
  j["cases"] = run.cases;
  j["seconds"] = run.seconds;
  j["cpu_seconds"] = run.cpu_seconds;
  j["cases_per_job"] = run.cases_per_job;
  j["interrupted"] = run.interrupted;
  j["passed"] = !run.failure.has_value();
  j["seeds"] = {{"from", props::fuzz::stream_point_json(run.from)}, {"to", props::fuzz::stream_point_json(run.to)}};
  if (run.failure) {
    const fz::Found& f = *run.failure;
    j["failure"] = {{"seed", f.seed},
                    {"size", f.size},
                    {"first_message", f.first_message},
                    {"message", f.message},
                    {"shrunk_case", f.description},
                    {"reproduced", f.reproduced},
                    // The shrunk case's name without its seed: the same minimal case found
                    // from different seeds (or shards) has the same id.
                    {"case_id", f.reproduced ? nlohmann::ordered_json(props::case_id(f.property, f.spec, f.meta))
                                             : nlohmann::ordered_json(nullptr)},
                    {"shrink_hit_limit", f.shrink_hit_limit},
                    {"saved", run.saved_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(run.saved_path)},
                    {"save_error", run.save_error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(run.save_error)},
                    {"reproduce", f.reproduce}};
  }
  return j;
}

// ---- replaying case files ----------------------------------------------------------

void add_trust_case_kernel_option(CLI::App& app, ReplayOptions& o) {
  app.add_flag("--trust-case-kernel", o.trust_case_kernel,
               "run the lib: or exec: kernel a case file records (it loads that library or runs that command); "
               "without it such a case is refused unless --kernel names the kernel");
}

namespace {

using ojson = nlohmann::ordered_json;

std::string scheme_of(const std::string& spec) {
  const auto colon = spec.find(':');
  return colon == std::string::npos ? std::string() : spec.substr(0, colon);
}

// The spec as it runs from here: a relative path is relative to the folder
// the case was found in (meta.kernel.cwd), not to where it is replayed.
std::string spec_from(const std::string& file, const std::string& spec, const std::string& cwd) {
  std::error_code ec;
  const std::filesystem::path here = std::filesystem::current_path(ec);
  if (cwd.empty() || (!ec && std::filesystem::path(cwd) == here)) return spec;
  const std::string scheme = scheme_of(spec);
  const std::string rest = spec.substr(scheme.size() + 1);
  const bool exists = std::filesystem::is_directory(cwd, ec);
  const std::string missing = file + ": meta.kernel.cwd: the folder '" + cwd.substr(0, 200) +
                              "' the kernel's spec is relative to does not exist here; name the kernel with "
                              "--kernel SPEC";
  if (scheme == "exec") {
    if (!exists) throw BadInput(missing);
    return "exec:cd " + adapters::shell_quote(cwd) + " || exit 127; " + rest;
  }
  if (scheme == "lib") {
    std::vector<std::string> words;
    try {
      words = adapters::split_words(rest);
    } catch (const std::exception& e) {
      throw BadInput(file + ": meta.kernel.spec: " + e.what());
    }
    if (words.empty() || std::filesystem::path(words.front()).is_absolute()) return spec;
    if (!exists) throw BadInput(missing);
    std::string out = "lib:" + adapters::shell_quote((std::filesystem::path(cwd) / words.front()).string());
    for (size_t i = 1; i < words.size(); ++i) out += " " + adapters::shell_quote(words[i]);
    return out;
  }
  return spec;
}

}  // namespace

ReplayKernel replay_kernel(const std::string& file, const nlohmann::json& meta, const ReplayOptions& o) {
  ReplayKernel r;
  r.isolate = o.kernel.isolate;
  r.timeout = o.kernel.timeout;
  if (!o.kernel.specs.empty()) {
    if (o.kernel.specs.size() > 1) throw BadInput("--kernel: one kernel replays a case");
    r.spec = o.kernel.specs.front();
    return r;
  }
  if (!meta.is_object() || !meta.contains("kernel") || meta.at("kernel").is_null()) return r;
  const nlohmann::json& k = meta.at("kernel");
  const std::string at = file + ": meta.kernel";
  if (!k.is_object()) throw BadInput(at + ": expected an object, got " + std::string(k.type_name()));
  if (!k.contains("spec") || !k.at("spec").is_string())
    throw BadInput(at + ".spec: expected the kernel's --kernel text (a string)");
  r.recorded = true;
  r.recorded_spec = k.at("spec").get<std::string>();
  std::string adapter;
  if (k.contains("adapter")) {
    if (!k.at("adapter").is_string()) throw BadInput(at + ".adapter: expected a string");
    adapter = k.at("adapter").get<std::string>();
  }
  // Isolation: recorded since meta.kernel.isolate exists; before, the adapter said it.
  bool isolate = adapter == "lib (isolated)";
  if (k.contains("isolate")) {
    if (!k.at("isolate").is_boolean()) throw BadInput(at + ".isolate: expected true or false");
    isolate = k.at("isolate").get<bool>();
  }
  r.isolate = isolate || o.kernel.isolate;
  if (k.contains("timeout_seconds") && !o.timeout_given) {
    const nlohmann::json& t = k.at("timeout_seconds");
    if (!t.is_number() || !std::isfinite(t.get<double>()) || t.get<double>() < 0.01 || t.get<double>() > 86400)
      throw BadInput(at + ".timeout_seconds: expected a number of seconds in [0.01, 86400]");
    r.timeout = t.get<double>();
  }
  std::string cwd;
  if (k.contains("cwd")) {
    if (!k.at("cwd").is_string()) throw BadInput(at + ".cwd: expected a folder (a string)");
    cwd = k.at("cwd").get<std::string>();
    if (!cwd.empty() && !std::filesystem::path(cwd).is_absolute())
      throw BadInput(at + ".cwd: expected an absolute folder, got '" + cwd.substr(0, 200) + "'");
  }
  const std::string scheme = scheme_of(r.recorded_spec);
  if ((scheme == "lib" || scheme == "exec") && !o.trust_case_kernel)
    throw BadInput(file + ": the case records the kernel '" + r.recorded_spec.substr(0, 300) +
                   "' (meta.kernel.spec), which would " + (scheme == "lib" ? "load that library" : "run that command") +
                   "; a case file never does that on its own. Replay it with --kernel SPEC (that kernel, or "
                   "another build of it), or, if you trust this file, with --trust-case-kernel");
  if (scheme != "lib" && scheme != "exec" && scheme != "pav")
    throw BadInput(at + ".spec: '" + r.recorded_spec.substr(0, 200) +
                   "' is not a kernel spec (pav:cpu, pav:gpu, lib:PATH.so [WORDS], exec:'CMD ARGS')");
  r.spec = spec_from(file, r.recorded_spec, cwd);
  return r;
}

namespace {

const char* path_name(props::Path p) { return p == props::Path::planned ? "planned" : "uniform"; }

}  // namespace

int replay_case_files(const std::string& command, const std::string& array_key, const std::vector<std::string>& files,
                      const ReplayOptions& o, const ReportOutput& output) {
  output.check_writable();
  const bool json = !output.text();
  const kernels::Backend backend = pick_backend(o.backend_name);
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
      const std::vector<fz::Property> props = fz::kernel_properties(*k);
      ran = props.front().name;
      for (const fz::Property& p : props)
        if (p.name == named) ran = p.name;
    }
    ojson j;
    j["case"] = file;
    j["property"] = ran;
    if (k) {
      j["kernel"] = adapters::identity_json(*k);
      j["kernel_recorded_in_case"] = rk.recorded;
    }
    if (!json) {
      fmt::print("case      {}\nproperty  {}\n", file, ran);
      if (k)
        fmt::print("kernel    {}{}\n", adapters::identity(*k), rk.recorded ? " (recorded in the case)" : "");
      else
        fmt::print("backend   {}\n", backend_name(backend));
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
      if (!json) fmt::print("verdict   {}\n\n", verdict_text(v.passed, v.message));
      continue;
    }
    // A decode case: its error figures beside the verdict.
    j["path"] = path_name(spec.path);
    j["num_seqs"] = spec.lens.size();
    props::KernelJudgement jd;
    try {
      props::check_case_spec(spec);
      jd = props::check_kernel_case(spec, *k);
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
    if (!json) {
      fmt::print("call      {} seqs, q_len {}, Hkv {}, G {}, D {}, block {}, {} path\n", spec.lens.size(), spec.q_len,
                 spec.hkv, spec.group, spec.head_dim, spec.block_size, path_name(spec.path));
      if (r.elements > 0) {
        fmt::print("elements  {}   mismatches {}   non-finite {}   non-zero in empty rows {}\n", r.elements,
                   r.mismatches, r.nonfinite, r.nonzero_in_empty_rows);
        fmt::print("errors    max abs {:.3e}   max rel {:.3e}   ||d||/||ref|| {:.3e}   worst/allowed {:.3f}\n",
                   r.max_abs_err, r.max_rel_err, r.rel_l2_err, r.worst_ratio);
        if (r.first.index >= 0)
          fmt::print("first     seq {} pos {} head {} d {}: out {} ref {} allowed {:.3e} ({})\n", r.first.seq,
                     r.first.pos, r.first.head, r.first.d, r.first.out, r.first.ref, r.first.allowed, r.first.kind);
      }
      fmt::print("verdict   {}\n\n", verdict_text(jd.passed, jd.verdict));
    }
    report[array_key].push_back(std::move(j));
  }
  if (!json && files.size() > 1) fmt::print("{} of {} cases passed\n", files.size() - failures, files.size());
  report["passed"] = failures == 0;
  return output.finish(report, failures ? kExitFail : kExitOk, command);
}

int fuzz_exit_code(const fz::FuzzReport& report) {
  if (!report.passed()) return kExitFail;
  if (report.interrupted) return kExitCannotRun;
  for (const auto& r : report.runs)
    if (!r.save_error.empty()) return kExitCannotRun;
  return kExitOk;
}

}  // namespace pav::cli
