// SPDX-License-Identifier: Apache-2.0
#pragma once
// Conversions between pav's C++ types and the C ABI of include/pav/kernel_abi.h,
// used on both sides of the boundary: by the lib adapter (pav calling a
// library) and by plugins built from pav's own kernels (a library answering).
#include <string>

#include "adapters/kernel.hpp"
#include "pav/kernel_abi.h"

namespace pav::adapters::abi {

int32_t to_abi(kernels::DType t);
// PAV_DTYPE_* to DType; false for a value pav does not know.
bool from_abi(int32_t t, kernels::DType& out);

pav_tensor to_abi(const kernels::TensorView& v);
// The view of an ABI tensor. A dtype value pav does not know becomes
// DType::none (a check must refuse such a tensor, never crash on it).
kernels::TensorView from_abi(const pav_tensor& t);

// The description a library filled in. Throws KernelSpecError naming the field
// (a count past its array, a mask bit that names no value, a string without
// its terminator, an enum value out of range) and applies description_problem().
KernelDescription from_abi(const pav_kernel_desc& d);
// Fills a zeroed desc (struct_size and abi_version are left to the caller).
// Throws KernelSpecError when a list does not fit its array.
void to_abi(const KernelDescription& d, pav_kernel_desc* out);

// The arguments of one call for a library of ABI `version` (struct_size is
// args_size_for(version)). for_check: every data pointer but those of the
// tables (block_tables, context_lens, work_info, reduce_info) is NULL.
pav_decode_args make_args(const DecodeRequest& r, bool for_check, uint32_t version = PAV_KERNEL_ABI_VERSION);
// The struct_size pav hands a library of ABI version `version`: the version-1
// prefix for version 1, the whole struct for the current version.
uint32_t args_size_for(uint32_t version);

// Why the arguments of an ABI call cannot be read safely (a rank past
// PAV_MAX_RANK, a negative extent or stride of a tensor with data, a span that
// overflows); empty when they can. A receiver (plugin_glue) checks this before
// it builds the request, and refuses the call otherwise.
std::string args_problem(const pav_decode_args& a);

// The request an ABI call describes; the plan (split = plan) is rebuilt into
// *plan_storage from work_info / reduce_info and the call's KV-head count.
DecodeRequest request_from_abi(const pav_decode_args& a, kernels::PlanView* plan_storage);

// Copies a message into an ABI error buffer (truncated, always terminated).
void set_message(char* buf, size_t size, const std::string& text);

inline constexpr size_t kMessageBytes = 1024;

}  // namespace pav::adapters::abi
