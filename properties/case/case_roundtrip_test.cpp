// SPDX-License-Identifier: Apache-2.0
// Saving a case and reading it back gives the same case, field by field. The
// reader falls back to a default for every absent field, so a writer that drops
// or garbles a field goes unnoticed wherever the value happens to equal the
// default: these tests hold every field away from both defaults (the struct's
// and the reader's), and change one field at a time to see that exactly that
// field, and nothing else, moves through a save and a read.
#include "properties/case/case_format.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pav::props {
namespace {

using nlohmann::json;
using namespace pav::kernels;

// The names of the fields in which a and b differ (every CaseSpec member and
// every option).
std::vector<std::string> differing(const CaseSpec& a, const CaseSpec& b) {
  std::vector<std::string> d;
  auto note = [&](const char* name, bool same) {
    if (!same) d.emplace_back(name);
  };
  note("lens", a.lens == b.lens);
  note("q_len", a.q_len == b.q_len);
  note("hkv", a.hkv == b.hkv);
  note("group", a.group == b.group);
  note("head_dim", a.head_dim == b.head_dim);
  note("block_size", a.block_size == b.block_size);
  note("v_layout", a.v_layout == b.v_layout);
  note("q_dtype", a.q_dtype == b.q_dtype);
  note("cache_dtype", a.cache_dtype == b.cache_dtype);
  note("scales", a.scales == b.scales);
  note("options.arch", a.opt.arch == b.opt.arch);
  note("options.compute", a.opt.compute == b.opt.compute);
  note("options.partial", a.opt.partial == b.opt.partial);
  note("options.softmax_scale", a.softmax_scale == b.softmax_scale);
  note("options.cu", a.opt.cu == b.opt.cu);
  note("options.partition_size", a.opt.partition_size == b.opt.partition_size);
  note("options.uniform_partitions", a.opt.uniform_partitions == b.opt.uniform_partitions);
  note("options.alibi", a.opt.alibi == b.opt.alibi);
  note("options.sinks", a.opt.sinks == b.opt.sinks);
  note("options.sliding_window", a.opt.sliding_window == b.opt.sliding_window);
  note("options.q_prequantized", a.opt.q_prequantized == b.opt.q_prequantized);
  note("path", a.path == b.path);
  note("max_partitions", a.max_partitions == b.max_partitions);
  note("workgroup_budget", a.workgroup_budget == b.workgroup_budget);
  note("q_row_pad", a.q_row_pad == b.q_row_pad);
  note("spare_blocks", a.spare_blocks == b.spare_blocks);
  note("seed", a.seed == b.seed);
  note("generator", a.generator == b.generator);
  bool same_sentinels = a.sentinels.size() == b.sentinels.size();
  for (size_t i = 0; same_sentinels && i < a.sentinels.size(); ++i)
    same_sentinels = a.sentinels[i].seq == b.sentinels[i].seq && a.sentinels[i].token == b.sentinels[i].token;
  note("sentinels", same_sentinels);
  note("variant.window_left", a.window_left == b.window_left);
  note("variant.soft_cap", a.soft_cap == b.soft_cap);
  note("variant.sinks", a.sinks == b.sinks);
  note("variant.alibi_slopes", a.alibi_slopes == b.alibi_slopes);
  note("tensors.block_tables", a.block_tables == b.block_tables);
  note("tensors.q_bits", a.q_bits == b.q_bits);
  note("tensors.k_codes", a.k_codes == b.k_codes);
  note("tensors.v_codes", a.v_codes == b.v_codes);
  note("tensors.k_scale", a.k_scale_values == b.k_scale_values);
  note("tensors.v_scale", a.v_scale_values == b.v_scale_values);
  return d;
}

CaseSpec round_trip(const CaseSpec& s) { return case_from_json(json::parse(case_to_json(s).dump()), "saved.json"); }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

// Every field away from the struct's default and from the value the reader
// assumes when the field is absent.
CaseSpec all_fields_set(int generator) {
  CaseSpec s;
  s.lens = {7, 0, 513};
  s.q_len = 3;
  s.hkv = 2;
  s.group = 4;
  s.head_dim = 64;
  s.block_size = 32;
  s.v_layout = VLayout::trans;
  s.q_dtype = DType::f16;
  s.cache_dtype = DType::fp8_e4m3fnuz;
  s.scales = ScaleKind::none;
  s.opt.arch = Arch::gfx942;
  s.opt.compute = DType::bf16;
  s.opt.partial = DType::f32;
  s.softmax_scale = 0.375f;
  s.opt.cu = 96;
  s.opt.partition_size = 512;
  s.opt.uniform_partitions = 3;
  s.opt.alibi = true;
  s.opt.sinks = true;
  s.opt.sliding_window = 9;
  s.opt.q_prequantized = true;
  s.path = Path::uniform;
  s.max_partitions = 17;
  s.workgroup_budget = 33;
  s.q_row_pad = 5;
  s.spare_blocks = 4;
  s.seed = 0xfedcba9876543210ull;  // above 2^63: an unsigned 64-bit seed, not a signed one
  s.generator = generator;
  s.sentinels = {{2, 100}, {0, 3}};
  s.window_left = 5;
  s.soft_cap = 7.5f;
  s.sinks = std::vector<float>{-50.0f, 0.25f, 3.0f, 50.0f, -1.5f, 0.0f, 2.0f, 9.0f};
  s.alibi_slopes = std::vector<float>{0.5f, 0.25f, 0.125f, 0.0625f, 1.0f, 0.75f, 0.001f, 0.0f};
  return s;
}

// A small case with every inline tensor: lens [5, 300], block 16, Hkv 1, D 64,
// group 2, two inline cache blocks (the table points at both), per-token
// scales for their 2 x 16 tokens.
CaseSpec all_tensors_set() {
  CaseSpec s;
  s.lens = {5, 300};
  s.group = 2;
  s.head_dim = 64;
  s.scales = ScaleKind::per_token;
  std::vector<int32_t> table(2 * 19);
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i % 2);
  s.block_tables = table;
  std::vector<uint16_t> q(2 * 2 * 64);
  for (size_t i = 0; i < q.size(); ++i) q[i] = uint16_t(0x3c00 + 7 * i);
  s.q_bits = q;
  std::vector<uint8_t> k(2 * 64 * 16), v(2 * 64 * 16);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = uint8_t(i * 13);
    v[i] = uint8_t(255 - i * 7);
  }
  s.k_codes = k;
  s.v_codes = v;
  std::vector<float> ks(2 * 16), vs(2 * 16);
  for (size_t i = 0; i < ks.size(); ++i) {
    ks[i] = 0.03125f * float(i + 1);
    vs[i] = 0.5f / float(i + 1);
  }
  s.k_scale_values = ks;
  s.v_scale_values = vs;
  return s;
}

TEST(CaseRoundTrip, EveryFieldAwayFromItsDefaultsReadsBackUnchanged) {
  for (int generator : {1, 2}) {
    const CaseSpec s = all_fields_set(generator);
    EXPECT_EQ(joined(differing(round_trip(s), s)), "(none)") << "generator " << generator;
  }
  const CaseSpec t = all_tensors_set();
  EXPECT_EQ(joined(differing(round_trip(t), t)), "(none)");
}

// One field changed from a saved default case: after a save and a read, the
// case differs from the default's round trip in that field and no other.
TEST(CaseRoundTrip, ChangingOneFieldMovesThatFieldOnly) {
  using Edit = std::function<void(CaseSpec&)>;
  const std::vector<std::pair<std::string, Edit>> edits = {
      {"lens", [](CaseSpec& s) { s.lens = {4, 9}; }},
      {"q_len", [](CaseSpec& s) { s.q_len = 2; }},
      {"hkv", [](CaseSpec& s) { s.hkv = 3; }},
      {"group", [](CaseSpec& s) { s.group = 5; }},
      {"head_dim", [](CaseSpec& s) { s.head_dim = 32; }},
      {"block_size", [](CaseSpec& s) { s.block_size = 64; }},
      {"v_layout", [](CaseSpec& s) { s.v_layout = VLayout::trans; }},
      {"q_dtype", [](CaseSpec& s) { s.q_dtype = DType::f16; }},
      {"cache_dtype", [](CaseSpec& s) { s.cache_dtype = DType::fp8_e4m3fnuz; }},
      {"scales", [](CaseSpec& s) { s.scales = ScaleKind::per_token; }},
      {"options.arch", [](CaseSpec& s) { s.opt.arch = Arch::gfx950; }},
      {"options.compute", [](CaseSpec& s) { s.opt.compute = DType::bf16; }},
      {"options.partial", [](CaseSpec& s) { s.opt.partial = DType::f16; }},
      {"options.softmax_scale", [](CaseSpec& s) { s.softmax_scale = 0.125f; }},
      {"options.cu", [](CaseSpec& s) { s.opt.cu = 7; }},
      {"options.partition_size", [](CaseSpec& s) { s.opt.partition_size = 128; }},
      {"options.uniform_partitions", [](CaseSpec& s) { s.opt.uniform_partitions = 6; }},
      {"options.alibi", [](CaseSpec& s) { s.opt.alibi = true; }},
      {"options.sinks", [](CaseSpec& s) { s.opt.sinks = true; }},
      {"options.sliding_window", [](CaseSpec& s) { s.opt.sliding_window = 64; }},
      {"options.q_prequantized", [](CaseSpec& s) { s.opt.q_prequantized = true; }},
      {"path", [](CaseSpec& s) { s.path = s.path == Path::planned ? Path::uniform : Path::planned; }},
      {"max_partitions", [](CaseSpec& s) { s.max_partitions = 11; }},
      {"workgroup_budget", [](CaseSpec& s) { s.workgroup_budget = 19; }},
      {"q_row_pad", [](CaseSpec& s) { s.q_row_pad = 8; }},
      {"spare_blocks", [](CaseSpec& s) { s.spare_blocks = 3; }},
      {"seed", [](CaseSpec& s) { s.seed = 77; }},
      {"generator", [](CaseSpec& s) { s.generator = s.generator == 1 ? 2 : 1; }},
      {"sentinels", [](CaseSpec& s) { s.sentinels = {{0, 1}}; }},
      {"variant.window_left", [](CaseSpec& s) { s.window_left = 0; }},
      {"variant.soft_cap", [](CaseSpec& s) { s.soft_cap = 50.0f; }},
      {"variant.sinks", [](CaseSpec& s) { s.sinks = std::vector<float>{-2.0f}; }},
      {"variant.alibi_slopes", [](CaseSpec& s) { s.alibi_slopes = std::vector<float>{0.5f}; }},
  };
  CaseSpec base;
  base.lens = {20, 40};
  const CaseSpec base_back = round_trip(base);
  EXPECT_EQ(joined(differing(base_back, base)), "(none)");
  for (const auto& [field, edit] : edits) {
    CaseSpec s = base;
    edit(s);
    ASSERT_EQ(joined(differing(s, base)), field) << "the edit itself";
    EXPECT_EQ(joined(differing(round_trip(s), base_back)), field) << "after a save and a read";
  }
}

// A file may leave out every field but lens: each absent field takes its
// default, written out here field by field (the first options-free file is an
// sm90 case with fp8_e4m3fn compute; a file saved before generator 2 existed
// meant the legacy stream, so an absent generator is 1).
TEST(CaseRoundTrip, AbsentFieldsTakeTheirDefaults) {
  const CaseSpec s = case_from_json(json::parse(R"({"lens": [5, 0]})"), "min.json");
  CaseSpec want;
  want.lens = {5, 0};
  want.q_len = 1;
  want.hkv = 1;
  want.group = 1;
  want.head_dim = 128;
  want.block_size = 16;
  want.v_layout = VLayout::plain;
  want.q_dtype = DType::bf16;
  want.cache_dtype = DType::fp8_e4m3fn;
  want.scales = ScaleKind::per_tensor;
  want.opt.arch = Arch::sm90;
  want.opt.compute = DType::fp8_e4m3fn;
  want.opt.partial = DType::bf16;
  want.softmax_scale = 0.0f;
  want.opt.cu = 132;
  want.opt.partition_size = 256;
  want.opt.uniform_partitions = 0;
  want.opt.alibi = want.opt.sinks = want.opt.q_prequantized = false;
  want.opt.sliding_window = 0;
  want.path = Path::planned;
  want.max_partitions = 0;
  want.workgroup_budget = 0;
  want.q_row_pad = 0;
  want.spare_blocks = 1;
  want.seed = 1;
  want.generator = 1;
  EXPECT_EQ(joined(differing(s, want)), "(none)");
  // Empty options: the same, the compute dtype following the default arch.
  EXPECT_EQ(joined(differing(case_from_json(json::parse(R"({"lens": [5, 0], "options": {}})"), "min.json"), want)),
            "(none)");
  // The compute default follows the arch's fp8 flavour; an arch without one
  // (gfx90a) gets fp8_e4m3fn.
  const std::pair<const char*, DType> flavours[] = {{"gfx942", DType::fp8_e4m3fnuz},
                                                    {"gfx950", DType::fp8_e4m3fn},
                                                    {"sm90", DType::fp8_e4m3fn},
                                                    {"gfx90a", DType::fp8_e4m3fn}};
  for (const auto& [arch, compute] : flavours) {
    const CaseSpec a = case_from_json(json{{"lens", {5}}, {"options", {{"arch", arch}}}}, "arch.json");
    EXPECT_EQ(a.opt.compute, compute) << arch;
    EXPECT_EQ(a.opt.partial, DType::bf16) << arch;
  }
}

}  // namespace
}  // namespace pav::props
