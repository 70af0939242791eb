// SPDX-License-Identifier: Apache-2.0
#pragma once
// Element types, target architectures and strided tensor views of a decode call.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace pav::kernels {

// fp8_e5m2 comes after none so the earlier values keep their numbers.
enum class DType : uint8_t { f32, f16, bf16, fp8_e4m3fn, fp8_e4m3fnuz, i32, i64, none, fp8_e5m2 };

// Targets the planned kernel knows. gfx942 reads fp8 e4m3fnuz, gfx950 and sm90
// read OCP e4m3fn; gfx90a is a real target the planned kernel does not support.
enum class Arch : uint8_t { gfx942, gfx950, sm90, gfx90a };

std::string_view to_string(DType d);
std::string_view to_string(Arch a);
// Parse names as written by to_string; return false on an unknown name.
bool parse_dtype(std::string_view s, DType& out);
bool parse_arch(std::string_view s, Arch& out);

constexpr int dtype_size(DType d) {
  switch (d) {
    case DType::f32: case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::f16: case DType::bf16: return 2;
    case DType::fp8_e4m3fn: case DType::fp8_e4m3fnuz: case DType::fp8_e5m2: return 1;
    case DType::none: return 0;
  }
  return 0;
}
// An e4m3 flavour: the fp8 types pav's kernels compute in and its numerics
// profiles quantize Q and P to.
constexpr bool is_fp8(DType d) { return d == DType::fp8_e4m3fn || d == DType::fp8_e4m3fnuz; }
// A dtype a KV cache may hold: 16-bit floats or any fp8 (e4m3 flavours, e5m2).
constexpr bool is_cache_dtype(DType d) {
  return d == DType::bf16 || d == DType::f16 || is_fp8(d) || d == DType::fp8_e5m2;
}

// The fp8 flavour an architecture reads; DType::none when it has no supported one.
constexpr DType arch_fp8(Arch a) {
  switch (a) {
    case Arch::gfx942: return DType::fp8_e4m3fnuz;
    case Arch::gfx950: case Arch::sm90: return DType::fp8_e4m3fn;
    case Arch::gfx90a: return DType::none;
  }
  return DType::none;
}

inline constexpr int kMaxRank = 6;

// A strided view; shape and strides are in elements. An absent optional tensor
// (a scale that is not given) has rank 0 and a null data pointer.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::none;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};
  std::array<int64_t, kMaxRank> stride{};

  bool present() const { return rank > 0; }
  int64_t numel() const;
  // Elements from data to the view's last element, inclusive, for
  // non-negative strides: the memory a copy of the view must cover. 0 for an
  // absent or empty view.
  int64_t span() const;
  bool contiguous() const;
  template <class T> T* as() const { return static_cast<T*>(data); }

  // A contiguous (row-major) view of the given shape.
  static TensorView contiguous_of(void* data, DType dtype, std::initializer_list<int64_t> shape);
  std::string shape_string() const;  // "[4, 1, 8, 16, 16]"
};

}  // namespace pav::kernels
