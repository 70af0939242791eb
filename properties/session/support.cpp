// SPDX-License-Identifier: Apache-2.0
#include "properties/session/support.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "common/durable_file.hpp"
#include "common/text_list.hpp"
#include "kernels/validate.hpp"
#include "properties/case/case_format.hpp"
#include "properties/engine/counterexample.hpp"
#include "properties/engine/fuzz_report.hpp"
#include "properties/checks/builtin_properties.hpp"
#include "properties/checks/kernel_properties.hpp"
#include "properties/checks/replay.hpp"
#include "properties/checks/runner_kernel.hpp"
#include "properties/gen/kernel_gen.hpp"
#include "properties/session/stop.hpp"

namespace pav::session {

namespace fz = pav::props::fuzz;

void check_save_dir(const std::string& dir) { pav::check_writable_dir(dir, "--save " + dir); }

bool stopping(const Io& io) { return stop_test(io)(); }

std::string stop_name(const Io& io) { return io.stop_reason ? io.stop_reason() : std::string(stop_signal_name()); }

std::function<bool()> stop_test(const Io& io) {
  if (io.should_stop) return io.should_stop;
  return stop_requested;
}

nlohmann::json kernel_run_record(const KernelOptions& o) {
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  return {{"isolate", o.isolate}, {"timeout_seconds", o.timeout}, {"cwd", ec ? std::string() : cwd.string()}};
}

fz::FreshKernel fresh_kernel(const adapters::KernelUnderTest& k, const KernelOptions& o) {
  fz::FreshKernel fresh;
  const std::string adapter = k.adapter();
  if (adapter == "exec" || adapter == "lib (isolated)" || adapter == "pav") {
    fresh.open = [spec = k.spec(), o] { return open_kernel(spec, o, false); };
  } else if (adapter == "lib") {
    fresh.unavailable = "an in-process library keeps its memory for the whole run; with --isolate it runs in a "
                        "child process, and its failures are seen again in a fresh one";
  } else {
    fresh.unavailable = "the " + adapter + " kernel is one object in this process; a fresh one is a new object "
                        "(replay the saved case in a new process)";
  }
  return fresh;
}

void print_kernel(std::FILE* f, const adapters::KernelUnderTest& k, const char* label) {
  if (!f) return;
  fmt::print(f, "{:<9} {}\n{:<9} {}\n", label, adapters::identity(k), "", adapters::summary(k.description()));
}

void print_shapes(std::FILE* f, const std::vector<props::CaseSpec>& shapes, const fz::DecodeDraw& draw, bool asked) {
  if (!f || draw.shapes <= 0) return;
  fmt::print(f, "{:<9} decode draws its calls in {} shape(s), drawn from seed {} ({}){}\n", "shapes", shapes.size(),
             draw.shape_seed,
             asked ? fmt::format("--shapes {}", draw.shapes)
                   : "the kernel compiles per shape; --shapes 0 gives each call its own",
             int(shapes.size()) < draw.shapes ? "; the description has no more" : "");
  for (size_t i = 0; i < shapes.size(); ++i) fmt::print(f, "{:<9} {}. {}\n", "", i + 1, props::shape_of(shapes[i]));
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
  // Cases per decode region they were drawn in (empty unless the run drew by region).
  j["regions"] = nlohmann::ordered_json::object();
  for (const auto& [name, n] : run.regions) j["regions"][name] = n;
  // Distinct shapes among the cases (0 for a property that names none).
  j["shapes"] = run.shapes;
  j["interrupted"] = run.interrupted;
  j["passed"] = !run.failure.has_value();
  j["seeds"] = {{"from", props::fuzz::stream_point_json(run.from)}, {"to", props::fuzz::stream_point_json(run.to)}};
  if (run.failure) {
    const fz::Found& f = *run.failure;
    j["failure"] = {{"seed", f.seed},
                    {"size", f.size},
                    {"region", f.region.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.region)},
                    {"first_message", f.first_message},
                    {"message", f.message},
                    {"shrunk_case", f.description},
                    {"reproduced", f.reproduced()},
                    {"reproduction", f.reproduction},
                    {"reproduction_note", f.reproduction_note},
                    // Calls replayed before the shrunk case (its prelude): > 0 only for "sequence".
                    {"earlier_calls", f.spec.prelude.size()},
                    // The shrunk case's name without its seed: the same minimal case found
                    // from different seeds (or shards) has the same id.
                    {"case_id", f.reproduced() ? nlohmann::ordered_json(props::case_id(f.property, f.spec, f.meta))
                                             : nlohmann::ordered_json(nullptr)},
                    {"shrink_hit_limit", f.shrink_hit_limit},
                    {"shrink_stopped", f.shrink_stopped},
                    {"saved", run.saved_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(run.saved_path)},
                    {"save_error", run.save_error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(run.save_error)},
                    {"reproduce", f.reproduce}};
  }
  return j;
}

// ---- replaying case files ----------------------------------------------------------

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
    if (!t.is_number() || !timeout_in_range(t.get<double>()))
      throw BadInput(at + fmt::format(".timeout_seconds: expected a number of seconds in [{:g}, {:g}]",
                                      kMinTimeoutSeconds, kMaxTimeoutSeconds));
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

int fuzz_exit_code(const fz::FuzzReport& report) {
  if (!report.passed()) return kExitFail;
  if (report.interrupted) return kExitCannotRun;
  for (const auto& r : report.runs)
    if (!r.save_error.empty()) return kExitCannotRun;
  return kExitOk;
}

}  // namespace pav::session
