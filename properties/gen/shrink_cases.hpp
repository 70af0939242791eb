// SPDX-License-Identifier: Apache-2.0
#pragma once
// How the fuzz engine simplifies a failing value past what RapidCheck's shrink
// tree reaches: shorter lengths and simpler decode calls (fewer sequences,
// shorter lengths, smaller shapes, one part of the case recipe at a time).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "properties/case/host_case.hpp"

namespace pav::props {

// "[5,0,9000]", with ",... (N total)" past max_shown lengths.
std::string lens_text(const std::vector<int32_t>& lens, size_t max_shown = 12);

// Shorter lengths to try in place of len, most aggressive first: the tile
// boundaries, and len minus len/2, len/4, ..., 1.
std::vector<int32_t> shorter_lengths(int32_t len);

// Simpler decode calls than s, each still a valid call of the generator's
// domain; the caller keeps those that still fit its kernel's description.
// keep_seq >= 0: that request is never removed (its new index is returned
// alongside).
std::vector<std::pair<CaseSpec, int64_t>> simpler_decode_specs(const CaseSpec& s, int64_t keep_seq);
std::vector<CaseSpec> simpler_decode_specs(const CaseSpec& s);

}  // namespace pav::props
