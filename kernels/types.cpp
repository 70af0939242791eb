// SPDX-License-Identifier: Apache-2.0
#include "kernels/types.hpp"

namespace pav::kernels {

namespace {
constexpr std::pair<DType, std::string_view> kDTypeNames[] = {
    {DType::f32, "f32"},   {DType::f16, "f16"},
    {DType::bf16, "bf16"}, {DType::fp8_e4m3fn, "fp8_e4m3fn"},
    {DType::fp8_e4m3fnuz, "fp8_e4m3fnuz"}, {DType::i32, "i32"},
    {DType::i64, "i64"},   {DType::none, "none"},
    {DType::fp8_e5m2, "fp8_e5m2"}};
constexpr std::pair<Arch, std::string_view> kArchNames[] = {
    {Arch::gfx942, "gfx942"}, {Arch::gfx950, "gfx950"}, {Arch::sm90, "sm90"}, {Arch::gfx90a, "gfx90a"}};
}  // namespace

std::string_view to_string(DType d) {
  for (auto& [k, v] : kDTypeNames) if (k == d) return v;
  return "?";
}
std::string_view to_string(Arch a) {
  for (auto& [k, v] : kArchNames) if (k == a) return v;
  return "?";
}
bool parse_dtype(std::string_view s, DType& out) {
  for (auto& [k, v] : kDTypeNames) if (v == s) { out = k; return true; }
  return false;
}
bool parse_arch(std::string_view s, Arch& out) {
  for (auto& [k, v] : kArchNames) if (v == s) { out = k; return true; }
  return false;
}

int64_t TensorView::numel() const {
  if (rank == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

int64_t TensorView::span() const {
  if (rank == 0) return 0;
  int64_t last = 0;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] == 0) return 0;
    last += (shape[i] - 1) * stride[i];
  }
  return last + 1;
}

bool TensorView::contiguous() const {
  int64_t expect = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (shape[i] != 1 && stride[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

TensorView TensorView::contiguous_of(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) v.shape[i++] = s;
  int64_t st = 1;
  for (int k = v.rank - 1; k >= 0; --k) {
    v.stride[k] = st;
    st *= v.shape[k];
  }
  return v;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace pav::kernels
