// SPDX-License-Identifier: Apache-2.0
#pragma once
// The numerics profile of a kernel under test: how it quantizes Q, how it
// rounds the softmax weights P before P.V, and the dtype of the partials it
// stores between its split pass and its reduce. The output dtype is the call's
// `out` dtype and is not part of the profile.
//
// The reference computes with Q transformed as the profile says, and the
// comparison standard derives its tolerance from the profile, so a kernel is
// held to the numerics it declares and to nothing looser.
//
// The names below are stable: case files, the kernel ABI and the worker
// protocol spell profiles with them.
//
// Header-only: the reference includes it (a kernel's declaration is what the
// reference computes to) and links nothing of pav_kernels.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/call.hpp"
#include "kernels/types.hpp"

namespace pav::kernels {

// How the kernel quantizes Q before Q.K.
//   fp8_per_row: each query row is scaled by q_scale = max(absmax(row)/FP8_MAX, 1e-20),
//                rounded to fp8 (the cache's flavour) and used as code*q_scale.
//   none:        Q is used as given (its bf16/f16 values).
//   cache_dtype: each Q value is cast to the cache's dtype (bf16, f16, or an
//                fp8 without a scale: q.to(k.dtype)) before Q.K. (Appended.)
enum class QQuant : uint8_t { fp8_per_row, none, cache_dtype };

// How the kernel rounds P before P.V.
//   fp8_running_max: p = exp(s - m) against the running max m, scaled by FP8_MAX
//                    and rounded to fp8 (the cache's flavour); l sums the unrounded p.
//   bf16, f16:       p rounded to that dtype (round to nearest even).
//   none:            p kept in f32.
//   fp8:             p = exp(s - m) <= 1 rounded to fp8 (the cache's e4m3
//                    flavour) as it is, with no FP8_MAX scale: values below
//                    the fp8 subnormals flush to 0; l sums the unrounded p.
//                    (Appended: the earlier values keep their numbers.)
enum class PRound : uint8_t { fp8_running_max, bf16, f16, none, fp8 };

struct NumericsProfile {
  QQuant q_quant = QQuant::fp8_per_row;
  PRound p_round = PRound::fp8_running_max;
  // Dtype of the normalized partials a split kernel stores before its merge:
  // f32, bf16, f16 or an fp8 flavour (e4m3fn, e4m3fnuz, e5m2); none for a
  // kernel that never splits a row.
  kernels::DType partial = kernels::DType::bf16;

  bool operator==(const NumericsProfile&) const = default;
};

namespace profile_detail {

inline constexpr std::pair<QQuant, std::string_view> kQQuantNames[] = {
    {QQuant::fp8_per_row, "fp8_per_row"}, {QQuant::none, "none"}, {QQuant::cache_dtype, "cache_dtype"}};
inline constexpr std::pair<PRound, std::string_view> kPRoundNames[] = {
    {PRound::fp8_running_max, "fp8_running_max"}, {PRound::bf16, "bf16"},
    {PRound::f16, "f16"}, {PRound::none, "none"}, {PRound::fp8, "fp8"}};

// The partial dtypes, spelled as kernels/types.hpp spells them (a test pins
// the agreement); kept here so the header links nothing of pav_kernels.
inline constexpr std::pair<kernels::DType, std::string_view> kPartialNames[] = {
    {kernels::DType::bf16, "bf16"}, {kernels::DType::f16, "f16"}, {kernels::DType::f32, "f32"},
    {kernels::DType::fp8_e4m3fn, "fp8_e4m3fn"}, {kernels::DType::fp8_e4m3fnuz, "fp8_e4m3fnuz"},
    {kernels::DType::fp8_e5m2, "fp8_e5m2"}, {kernels::DType::none, "none"}};

inline std::string_view partial_name(kernels::DType d) {
  for (auto& [k, v] : kPartialNames) if (k == d) return v;
  return "?";
}

}  // namespace profile_detail

// The profile of pav's own kernels for these options: fp8 compute quantizes Q
// per row and P against the running max; bf16 compute does neither. The
// partial dtype is opt.partial.
inline NumericsProfile pav_profile(const kernels::DecodeOptions& opt) {
  NumericsProfile p;
  const bool fp8 = kernels::is_fp8(opt.compute);
  p.q_quant = fp8 ? QQuant::fp8_per_row : QQuant::none;
  p.p_round = fp8 ? PRound::fp8_running_max : PRound::none;
  p.partial = opt.partial;
  return p;
}

inline std::string_view to_string(QQuant q) {
  for (auto& [k, v] : profile_detail::kQQuantNames) if (k == q) return v;
  return "?";
}
inline std::string_view to_string(PRound p) {
  for (auto& [k, v] : profile_detail::kPRoundNames) if (k == p) return v;
  return "?";
}
// "q=fp8_per_row p=fp8_running_max partial=bf16": for verdict lines and logs.
inline std::string to_string(const NumericsProfile& p) {
  return "q=" + std::string(to_string(p.q_quant)) + " p=" + std::string(to_string(p.p_round)) +
         " partial=" + std::string(profile_detail::partial_name(p.partial));
}

// Parse the names to_string writes; false on an unknown name (out untouched).
inline bool parse_q_quant(std::string_view s, QQuant& out) {
  for (auto& [k, v] : profile_detail::kQQuantNames) if (v == s) { out = k; return true; }
  return false;
}
inline bool parse_p_round(std::string_view s, PRound& out) {
  for (auto& [k, v] : profile_detail::kPRoundNames) if (v == s) { out = k; return true; }
  return false;
}
// A partial dtype: "bf16", "f16", "f32", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2"
// or "none" (kernels/types.hpp spellings); false otherwise.
inline bool parse_partial_dtype(std::string_view s, kernels::DType& out) {
  for (auto& [k, v] : profile_detail::kPartialNames) if (v == s) { out = k; return true; }
  return false;
}

// Why a profile cannot be used, or nullopt when it can (a partial dtype that is
// not one of those float dtypes or none, or an enum value outside its names).
inline std::optional<std::string> profile_error(const NumericsProfile& p) {
  if (profile_detail::partial_name(p.partial) == "?")
    return "profile partial dtype (code " + std::to_string(int(p.partial)) + ") is not a float dtype (f32, bf16, f16, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2) or none";
  if (to_string(p.q_quant) == "?") return "profile q_quant holds an unknown value";
  if (to_string(p.p_round) == "?") return "profile p_round holds an unknown value";
  return std::nullopt;
}

}  // namespace pav::kernels
