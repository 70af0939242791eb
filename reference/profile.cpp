// SPDX-License-Identifier: Apache-2.0
#include "reference/profile.hpp"

#include <string>
#include <utility>

namespace pav::reference {
namespace {

constexpr std::pair<QQuant, std::string_view> kQQuantNames[] = {
    {QQuant::fp8_per_row, "fp8_per_row"}, {QQuant::none, "none"}, {QQuant::cache_dtype, "cache_dtype"}};
constexpr std::pair<PRound, std::string_view> kPRoundNames[] = {
    {PRound::fp8_running_max, "fp8_running_max"}, {PRound::bf16, "bf16"},
    {PRound::f16, "f16"}, {PRound::none, "none"}, {PRound::fp8, "fp8"}};

// The partial dtypes, spelled as kernels/types.hpp spells them (a test pins
// the agreement); kept here so pav_reference links nothing of pav_kernels.
constexpr std::pair<kernels::DType, std::string_view> kPartialNames[] = {
    {kernels::DType::bf16, "bf16"}, {kernels::DType::f16, "f16"}, {kernels::DType::f32, "f32"},
    {kernels::DType::fp8_e4m3fn, "fp8_e4m3fn"}, {kernels::DType::fp8_e4m3fnuz, "fp8_e4m3fnuz"},
    {kernels::DType::fp8_e5m2, "fp8_e5m2"}, {kernels::DType::none, "none"}};

std::string_view partial_name(kernels::DType d) {
  for (auto& [k, v] : kPartialNames) if (k == d) return v;
  return "?";
}

}  // namespace

NumericsProfile pav_profile(const kernels::DecodeOptions& opt) {
  NumericsProfile p;
  const bool fp8 = kernels::is_fp8(opt.compute);
  p.q_quant = fp8 ? QQuant::fp8_per_row : QQuant::none;
  p.p_round = fp8 ? PRound::fp8_running_max : PRound::none;
  p.partial = opt.partial;
  return p;
}

std::string_view to_string(QQuant q) {
  for (auto& [k, v] : kQQuantNames) if (k == q) return v;
  return "?";
}
std::string_view to_string(PRound p) {
  for (auto& [k, v] : kPRoundNames) if (k == p) return v;
  return "?";
}
std::string to_string(const NumericsProfile& p) {
  return "q=" + std::string(to_string(p.q_quant)) + " p=" + std::string(to_string(p.p_round)) +
         " partial=" + std::string(partial_name(p.partial));
}

bool parse_q_quant(std::string_view s, QQuant& out) {
  for (auto& [k, v] : kQQuantNames) if (v == s) { out = k; return true; }
  return false;
}
bool parse_p_round(std::string_view s, PRound& out) {
  for (auto& [k, v] : kPRoundNames) if (v == s) { out = k; return true; }
  return false;
}
bool parse_partial_dtype(std::string_view s, kernels::DType& out) {
  for (auto& [k, v] : kPartialNames) if (v == s) { out = k; return true; }
  return false;
}

std::optional<std::string> profile_error(const NumericsProfile& p) {
  if (partial_name(p.partial) == "?")
    return "profile partial dtype (code " + std::to_string(int(p.partial)) + ") is not a float dtype (f32, bf16, f16, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2) or none";
  if (to_string(p.q_quant) == "?") return "profile q_quant holds an unknown value";
  if (to_string(p.p_round) == "?") return "profile p_round holds an unknown value";
  return std::nullopt;
}

}  // namespace pav::reference
