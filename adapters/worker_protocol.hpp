// SPDX-License-Identifier: Apache-2.0
#pragma once
// The worker protocol's messages (docs/verify-your-kernel.md, "Worker
// protocol"), shared by pav's side (worker_kernel) and pav's own worker
// (worker_server, behind `pav kernel-worker` and --isolate).
#include <array>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"

namespace pav::adapters::protocol {

inline constexpr int kVersion = 1;

// The ops pav sends, in the order a worker first sees them; pav kernel-worker
// answers any other with an error.
inline constexpr std::array<std::string_view, 4> kOps = {"describe", "check", "decode", "quit"};

// The statuses of an ok: false decode reply and the outcome each stands for.
struct StatusName {
  std::string_view name;
  Outcome outcome;
};
inline constexpr std::array<StatusName, 3> kStatuses = {
    {{"reject", Outcome::rejected}, {"stale_plan", Outcome::stale_plan}, {"error", Outcome::kernel_error}}};
// The outcome a status names; false for a name not in kStatuses.
bool outcome_of_status(std::string_view name, Outcome& out);
// The status a worker sends for an outcome other than ok ("error" for a fault).
std::string_view status_of(Outcome o);

// The inputs of a call, by the names the protocol uses, in a fixed order.
struct NamedTensor {
  const char* name;
  kernels::TensorView view;
};
std::vector<NamedTensor> inputs_of(const DecodeRequest& r);

// How a decode input's file holds it. A view in C order at unit spacing goes
// as its shape; any other (a padded page, a half of a combined cache, a
// latent cache, a strided q: only ever sent to a kernel that declares such
// strides) goes as its storage span, a 1-D array of the elements from its
// first to its last, padding included, and the descriptor says
// "storage": "span": the tensor is that array at the descriptor's strides.
bool sent_as_span(const kernels::TensorView& v);
// The 1-D view of v's span (same data).
kernels::TensorView span_view(const kernels::TensorView& v);

// "bf16", ..., or "unknown" for a dtype pav cannot name.
std::string dtype_name(kernels::DType t);

// {"dtype", "shape", "strides"} plus "file" when file is non-empty (and
// "storage": "span" when sent_as_span) and the row-major "values" when
// with_values (int32 / int64 tables only).
nlohmann::json descriptor(const kernels::TensorView& v, const std::string& file, bool with_values);

// args: the call's scalars and (for_decode) the geometry derived from its shapes.
nlohmann::json args_of(const DecodeRequest& r, bool for_decode);

// The request lines pav sends.
// poison_scratch: the kernel declares scratch; the request asks it to fill its
// scratch with NaN before it computes (every decode request of such a kernel).
nlohmann::json decode_request(int64_t id, const std::string& dir, const DecodeRequest& r, bool poison_scratch);
nlohmann::json check_request(int64_t id, const DecodeRequest& r);

// The largest extent or stride a descriptor may carry (a request past it is
// malformed); extents and strides of a tensor that holds data must also be
// non-negative.
inline constexpr int64_t kMaxExtent = int64_t(1) << 40;

// Why a tensor of these extents and strides cannot be laid out in memory
// (a negative extent or stride, a span past kernels::kMaxCaseHostBytes); empty
// when it can. Checked before any buffer is sized or written.
std::string storage_problem(const kernels::TensorView& v, int element_bytes);

// A tensor rebuilt from a descriptor on the worker side: the view's dtype,
// shape and strides (contiguous when the file holds its shape, the
// descriptor's over a span file), and its bytes.
struct OwnedTensor {
  kernels::TensorView view;
  std::vector<uint8_t> bytes;
};
// A descriptor is read through the shared JSON reader (input/json_input.hpp):
// a field of the wrong type, past its range or unknown throws input::InputError
// ("request: tensors.NAME.FIELD: why"); a tensor that cannot be laid out or a
// file that differs from its descriptor throws std::runtime_error naming the
// tensor.
// From a decode descriptor: reads DIR/file.
OwnedTensor load_tensor(const nlohmann::json& d, const std::string& dir, const std::string& name);
// From a check descriptor: no data, except inline "values" for tables.
OwnedTensor describe_tensor(const nlohmann::json& d, const std::string& name);

}  // namespace pav::adapters::protocol
