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
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/call.hpp"
#include "kernels/types.hpp"

namespace pav::reference {

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

// The profile of pav's own kernels for these options: fp8 compute quantizes Q
// per row and P against the running max; bf16 compute does neither. The
// partial dtype is opt.partial.
NumericsProfile pav_profile(const kernels::DecodeOptions& opt);

std::string_view to_string(QQuant q);
std::string_view to_string(PRound p);
// "q=fp8_per_row p=fp8_running_max partial=bf16": for verdict lines and logs.
std::string to_string(const NumericsProfile& p);

// Parse the names to_string writes; false on an unknown name (out untouched).
bool parse_q_quant(std::string_view s, QQuant& out);
bool parse_p_round(std::string_view s, PRound& out);
// A partial dtype: "bf16", "f16", "f32", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2"
// or "none" (kernels/types.hpp spellings); false otherwise.
bool parse_partial_dtype(std::string_view s, kernels::DType& out);

// Why a profile cannot be used, or nullopt when it can (a partial dtype that is
// not one of those float dtypes or none, or an enum value outside its names).
std::optional<std::string> profile_error(const NumericsProfile& p);

}  // namespace pav::reference
