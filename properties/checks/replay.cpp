// SPDX-License-Identifier: Apache-2.0
#include "properties/checks/replay.hpp"

#include "input/json_input.hpp"
#include "properties/checks/builtin_properties.hpp"
#include "properties/case/case_format.hpp"
#include "properties/checks/kernel_properties.hpp"

namespace pav::props::fuzz {

using nlohmann::json;

std::unique_ptr<adapters::KernelUnderTest> case_kernel(CaseSpec& spec, const json& meta, kernels::Backend backend) {
  // pav's kernels compute in bf16 or an fp8 flavour (their adapter takes the
  // arch's); a case naming another type (i64) was not drawn by pav, and a PASS
  // through them would say nothing about it.
  if (spec.opt.compute != kernels::DType::bf16 && !kernels::is_fp8(spec.opt.compute))
    throw CaseError("options.compute: " + std::string(kernels::to_string(spec.opt.compute)) +
                    " is no compute type of pav's kernels (bf16 or an fp8 flavour)");
  const std::string recorded = case_kernel_spec(meta);
  if (recorded.empty()) return pav_kernel_for_case(spec, backend);
  // A case found on another kernel is evidence about that kernel: run on
  // pav's kernels instead it would pass for the wrong reason.
  if (recorded.rfind("pav:", 0) != 0)
    throw CaseError("meta.kernel.spec: the case was found with the kernel '" + input::excerpt(recorded, 200) +
                    "'; it replays only on that kernel (--kernel SPEC), not on pav's own kernels");
  return adapters::open_kernel(recorded, {});
}

Verdict replay_case(const CaseSpec& spec, const json& meta, const CheckContext& ctx, std::string* property_out) {
  const std::string named = case_property(meta);
  if (is_host_property(named)) {
    const Property* p = find_property(named);
    if (property_out) *property_out = p->name;
    return p->replay(spec, meta, ctx);
  }
  CaseSpec s = spec;
  std::unique_ptr<adapters::KernelUnderTest> owned;
  CheckContext on = ctx;
  if (!on.kernel) {
    try {
      owned = case_kernel(s, meta, ctx.backend);
    } catch (const adapters::KernelSpecError& e) {
      throw CaseError(std::string("meta.kernel.spec: ") + e.what());
    }
    on.kernel = owned.get();
  }
  // The case replays through the kernel's property of the same name.
  const std::vector<Property> props = kernel_properties(*on.kernel);
  const Property& p = kernel_property_named(props, named, *on.kernel);
  if (property_out) *property_out = p.name;
  return p.replay(s, meta, on);
}

const Property& kernel_property_named(const std::vector<Property>& props, const std::string& named,
                                      const adapters::KernelUnderTest& k) {
  const std::string want = named.empty() ? std::string("decode") : named;
  std::string have;
  for (const Property& p : props) {
    if (p.name == want) return p;
    have += (have.empty() ? "" : ", ") + p.name;
  }
  throw CaseError("meta.property: the case is of property '" + input::excerpt(want, 60) + "', which " +
                  adapters::identity(k) + " does not have (it has " + have +
                  "); replay it on a kernel that has it (--kernel SPEC)");
}

Verdict replay_case_file(const std::string& path, const CheckContext& ctx, std::string* property_out) {
  json meta;
  const CaseSpec spec = load_case_spec(path, &meta);  // CaseError names the file and field
  try {
    return replay_case(spec, meta, ctx, property_out);
  } catch (const CaseError& e) {
    throw CaseError(path + ": " + e.what());
  }
}

}  // namespace pav::props::fuzz
