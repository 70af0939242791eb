// SPDX-License-Identifier: Apache-2.0
#pragma once
// The drift sweep's data: the decode call of one (cell, data seed) with the
// source values the end-to-end reference reads.
#include <cstdint>
#include <vector>

#include "properties/drift/normals.hpp"
#include "properties/drift/sweep.hpp"
#include "properties/case/host_case.hpp"
#include "reference/source_decode.hpp"

namespace pav::props {

// The decode call of one (cell, data seed): K, V from source_normal quantized to
// the arch's fp8 flavour as fp8(source / kv_scale), q from q_std*source_normal
// rounded to q_dtype. Blocks are laid out in request order; every byte outside
// the context and the spare block are NaN. `q_source` keeps the unrounded q.
struct DriftData {
  HostCase c;
  std::vector<float> q_source;  // [num_seqs*q_len, Hq, D]
};
DriftData build_drift_data(const DriftSweep& s, const DriftCell& cell, uint64_t data_seed);
// The source K and V of that call, chunk by chunk, for reference::source_decode.
reference::SourceChunkFn drift_source_chunks(const DriftSweep& s, const DriftCell& cell, uint64_t data_seed);
reference::SourceGeometry drift_source_geometry(const DriftSweep& s, const DriftCell& cell);


}  // namespace pav::props
