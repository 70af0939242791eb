// SPDX-License-Identifier: Apache-2.0
// The case-file reader, field by field: every limit accepted at itself and
// refused one past it on both sides, every field refused with the wrong type,
// each message naming the file and the field; inline tensors against shapes.
#include "properties/case/case_format.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/limits.hpp"

namespace pav::props {
namespace {

using nlohmann::json;
using namespace pav::kernels;

json base_case() {
  return json::parse(R"({"format": "pav-case/1", "lens": [5, 300], "q_len": 1, "hkv": 1, "group": 2,
    "head_dim": 64, "block_size": 16, "scales": "per_tensor", "path": "planned", "seed": 3,
    "options": {"arch": "sm90", "partial": "f32", "cu": 8}})");
}

// Sets a dotted path ("options.cu") in a copy of j.
json with(json j, const std::string& path, const json& v) {
  json* node = &j;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
    node = &(*node)[path.substr(start, dot - start)];
  (*node)[path.substr(start)] = v;
  return j;
}

// "(accepted)" or the CaseError message.
std::string read(const json& j) {
  try {
    case_from_json(j, "x.json");
  } catch (const CaseError& e) {
    return e.what();
  }
  return "(accepted)";
}

struct IntField {
  const char* path;
  int64_t lo, hi;
  int64_t CaseSpec::*member = nullptr;  // top-level int64 members, checked for the value read
};

std::string range(const char* path, int64_t lo, int64_t hi, int64_t got) {
  return "x.json: " + std::string(path) + ": must be in " + std::to_string(lo) + ".." + std::to_string(hi) +
         ", got " + std::to_string(got);
}

const std::vector<IntField>& int_fields() {
  static const std::vector<IntField> f = {
      {"q_len", 1, 16},
      {"hkv", 1, kMaxKvHeads},
      {"group", 1, 128},
      {"head_dim", 16, 4096},
      {"block_size", 16, 4096},
      {"max_partitions", 0, kMaxCu, &CaseSpec::max_partitions},
      {"workgroup_budget", 0, kMaxWorkgroupBudget, &CaseSpec::workgroup_budget},
      {"q_row_pad", 0, 1 << 20, &CaseSpec::q_row_pad},
      {"spare_blocks", 1, 1 << 20, &CaseSpec::spare_blocks},
      {"options.cu", 1, kMaxCu},
      {"options.partition_size", 1, 1 << 20},
      {"options.uniform_partitions", 0, 1 << 20},
      {"options.sliding_window", 0, std::numeric_limits<int32_t>::max()},
  };
  return f;
}

TEST(CaseFormat, EveryIntegerFieldAcceptsItsLimitsAndRefusesOnePastOnBothSides) {
  ASSERT_EQ(read(base_case()), "(accepted)");
  for (const IntField& f : int_fields()) {
    SCOPED_TRACE(f.path);
    for (int64_t ok : {f.lo, f.hi}) {
      const json j = with(base_case(), f.path, ok);
      ASSERT_EQ(read(j), "(accepted)") << ok;
      if (f.member) {
        EXPECT_EQ(case_from_json(j, "x.json").*f.member, ok);
      }
    }
    EXPECT_EQ(read(with(base_case(), f.path, f.lo - 1)), range(f.path, f.lo, f.hi, f.lo - 1));
    EXPECT_EQ(read(with(base_case(), f.path, f.hi + 1)), range(f.path, f.lo, f.hi, f.hi + 1));
  }
}

TEST(CaseFormat, EveryIntegerFieldRefusesOtherTypesByName) {
  const std::vector<std::pair<json, std::string>> bad = {
      {json("7"), "a string \"7\""}, {json(1.5), "a number 1.5"}, {json(true), "a boolean true"},
      {json(nullptr), "null null"},  {json::array({1}), "an array [1]"}, {json(2.0), "a number 2.0"}};
  for (const IntField& f : int_fields())
    for (const auto& [v, shown] : bad)
      EXPECT_EQ(read(with(base_case(), f.path, v)), "x.json: " + std::string(f.path) + ": expected an integer, got " + shown);
}

TEST(CaseFormat, ShapesThatMustBeMultiplesOf16) {
  for (const char* f : {"head_dim", "block_size"}) {
    EXPECT_EQ(read(with(base_case(), f, 24)), "x.json: " + std::string(f) + ": must be a multiple of 16, got 24");
    EXPECT_EQ(read(with(base_case(), f, 4080)), "(accepted)");
  }
}

TEST(CaseFormat, SeedIsAnyUnsigned64BitIntegerAndNothingElse) {
  EXPECT_EQ(case_from_json(with(base_case(), "seed", 0), "x.json").seed, 0u);
  EXPECT_EQ(case_from_json(with(base_case(), "seed", std::numeric_limits<uint64_t>::max()), "x.json").seed,
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(read(with(base_case(), "seed", -1)), "x.json: seed: must be in 0..18446744073709551615, got -1");
  EXPECT_EQ(read(with(base_case(), "seed", 1.0)), "x.json: seed: expected an integer, got a number 1.0");
}

TEST(CaseFormat, SoftmaxScaleIsAFiniteNumberInRange) {
  EXPECT_EQ(read(with(base_case(), "options.softmax_scale", 0)), "(accepted)");
  EXPECT_EQ(read(with(base_case(), "options.softmax_scale", 1e4)), "(accepted)");
  EXPECT_EQ(read(with(base_case(), "options.softmax_scale", -0.001)),
            "x.json: options.softmax_scale: must be in [0, 10000], got -0.001");
  EXPECT_EQ(read(with(base_case(), "options.softmax_scale", 10000.5)),
            "x.json: options.softmax_scale: must be in [0, 10000], got 10000.5");
  EXPECT_EQ(read(with(base_case(), "options.softmax_scale", "0.1")),
            "x.json: options.softmax_scale: expected a number, got a string \"0.1\"");
}

TEST(CaseFormat, ChoiceFieldsListWhatTheyTake) {
  struct Choice {
    const char* path;
    std::vector<const char*> ok;
    const char* list;
  };
  const std::vector<Choice> choices = {
      {"format", {"pav-case/1", "pav-case/2"}, "pav-case/1, pav-case/2"},
      {"v_layout", {"plain", "trans"}, "plain, trans"},
      {"q_dtype", {"bf16", "f16"}, "bf16, f16"},
      {"cache_dtype", {"fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2", "bf16", "f16"}, "fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2, bf16, f16"},
      {"scales", {"none", "per_tensor", "per_head", "per_token"}, "none, per_tensor, per_head, per_token"},
      {"cache.layout", {"packed"}, "packed, nhd, hnd"},
      {"cache.kv", {"separate"}, "separate, combined, latent"},
      {"cache.page_table", {"block_table", "csr"}, "block_table, csr"},
      {"cache.v_scales", {"none", "per_tensor", "per_head", "per_token"}, "none, per_tensor, per_head, per_token"},
      {"path", {"planned", "uniform"}, "planned, uniform"},
      {"options.arch", {"gfx942", "gfx950", "sm90", "gfx90a"}, "gfx942, gfx950, sm90, gfx90a"},
      {"options.compute", {"f32", "bf16", "fp8_e4m3fn", "i64"}, "f32, f16, bf16, fp8_e4m3fn, fp8_e4m3fnuz, i32, i64"},
      {"options.partial", {"f32", "f16", "fp8_e4m3fnuz"}, "f32, f16, bf16, fp8_e4m3fn, fp8_e4m3fnuz, i32, i64"},
  };
  for (const Choice& c : choices) {
    SCOPED_TRACE(c.path);
    for (const char* v : c.ok) EXPECT_EQ(read(with(base_case(), c.path, v)), "(accepted)") << v;
    EXPECT_EQ(read(with(base_case(), c.path, "nope")),
              "x.json: " + std::string(c.path) + ": expected one of " + c.list + ", got a string \"nope\"");
    EXPECT_EQ(read(with(base_case(), c.path, 5)),
              "x.json: " + std::string(c.path) + ": expected one of " + c.list + ", got an integer 5");
  }
  // What the buffers hold: 16-bit queries, fp8 cache codes.
  EXPECT_EQ(case_from_json(with(base_case(), "q_dtype", "f16"), "x.json").q_dtype, DType::f16);
  EXPECT_EQ(case_from_json(with(base_case(), "options.partial", "fp8_e4m3fnuz"), "x.json").opt.partial,
            DType::fp8_e4m3fnuz);
}

TEST(CaseFormat, BooleansAreTrueOrFalseOnly) {
  for (const char* f : {"options.alibi", "options.sinks", "options.q_prequantized"}) {
    EXPECT_EQ(read(with(base_case(), f, true)), "(accepted)");
    EXPECT_EQ(read(with(base_case(), f, 1)), "x.json: " + std::string(f) + ": expected true or false, got an integer 1");
    EXPECT_EQ(read(with(base_case(), f, "false")),
              "x.json: " + std::string(f) + ": expected true or false, got a string \"false\"");
  }
}

TEST(CaseFormat, LensBatchAndValueLimits) {
  EXPECT_EQ(read(with(base_case(), "lens", std::vector<int>(kMaxPlanBatch, 1))), "(accepted)");
  EXPECT_EQ(read(with(base_case(), "lens", std::vector<int>(kMaxPlanBatch + 1, 1))),
            "x.json: lens: expected 1..4096 entries, got 4097");
  EXPECT_EQ(read(with(base_case(), "lens", json::array())), "x.json: lens: expected 1..4096 entries, got 0");
  EXPECT_EQ(read(with(base_case(), "lens", json::array({INT32_MIN, INT32_MAX}))), "(accepted)");
  EXPECT_EQ(read(with(base_case(), "lens", json::array({int64_t(5), int64_t(INT32_MAX) + 1}))),
            "x.json: lens[1]: must be in -2147483648..2147483647, got 2147483648");
  EXPECT_EQ(read(with(base_case(), "lens", json::array({int64_t(INT32_MIN) - 1}))),
            "x.json: lens[0]: must be in -2147483648..2147483647, got -2147483649");
  EXPECT_EQ(read(with(base_case(), "lens", "5")), "x.json: lens: expected an array, got a string \"5\"");
  json no_lens = base_case();
  no_lens.erase("lens");
  EXPECT_EQ(read(no_lens), "x.json: lens: missing (required)");
}

TEST(CaseFormat, UnknownFieldsAreRefusedAtEveryLevel) {
  EXPECT_EQ(read(with(base_case(), "lenz", 1)).rfind("x.json: lenz: unknown field (known: format, name, lens", 0), 0u);
  EXPECT_EQ(read(with(base_case(), "options.cus", 1)).rfind("x.json: options.cus: unknown field (known: arch", 0), 0u);
  EXPECT_EQ(read(with(base_case(), "tensors.o_bits", {1})).rfind("x.json: tensors.o_bits: unknown field", 0), 0u);
  EXPECT_EQ(read(with(base_case(), "options", 5)), "x.json: options: expected an object, got an integer 5");
}

TEST(CaseFormat, SentinelsNameTheirIndex) {
  auto pair = [](int64_t seq, int64_t token) { return json::array({seq, token}); };
  EXPECT_EQ(read(with(base_case(), "sentinels", json::array({pair(0, 0), pair(1, 299), pair(1, INT32_MAX)}))),
            "(accepted)");
  EXPECT_EQ(read(with(base_case(), "sentinels", json::array({pair(2, 0)}))),
            "x.json: sentinels[0][0]: must be in 0..1, got 2");
  EXPECT_EQ(read(with(base_case(), "sentinels", json::array({pair(0, 0), pair(-1, 0)}))),
            "x.json: sentinels[1][0]: must be in 0..1, got -1");
  EXPECT_EQ(read(with(base_case(), "sentinels", json::array({pair(0, -1)}))),
            "x.json: sentinels[0][1]: must be in 0..2147483647, got -1");
  EXPECT_EQ(read(with(base_case(), "sentinels", json::array({json::array({0})}))),
            "x.json: sentinels[0]: expected 2 entries, got 1");
}

TEST(CaseFormat, MetaFieldsPavReadsBackAreTyped) {
  EXPECT_EQ(read(with(base_case(), "meta", {{"property", "planner"}, {"prior_lens", {1, 2}}, {"seq", 1},
                                            {"with_plan", false}, {"violate", "x"}, {"variant", 0}, {"note", {1}}})),
            "(accepted)");
  EXPECT_EQ(read(with(base_case(), "meta", {{"property", 5}})),
            "x.json: meta.property: expected a string, got an integer 5");
  EXPECT_EQ(read(with(base_case(), "meta", {{"prior_lens", {1}}})), "x.json: meta.prior_lens: expected 2 entries, got 1");
  EXPECT_EQ(read(with(base_case(), "meta", {{"seq", 2}})), "x.json: meta.seq: must be in 0..1, got 2");
  EXPECT_EQ(read(with(base_case(), "meta", {{"seq", -1}})), "x.json: meta.seq: must be in 0..1, got -1");
  EXPECT_EQ(read(with(base_case(), "meta", {{"with_plan", "yes"}})),
            "x.json: meta.with_plan: expected true or false, got a string \"yes\"");
  EXPECT_EQ(read(with(base_case(), "meta", {{"variant", -1}})), "x.json: meta.variant: must be in 0..2147483647, got -1");
}

TEST(CaseFormat, InlineTensorsMustMatchTheShapes) {
  // lens [5, 300], block 16: 1 + 19 blocks used, 1 spare; Hkv 1, D 64.
  const int64_t blocks = 21, per_block = 1 * 64 * 16;
  json tok = with(base_case(), "scales", "per_token");
  EXPECT_EQ(read(with(tok, "tensors", {{"k_scale", std::vector<float>(blocks * 16, 0.03f)},
                                       {"v_scale", std::vector<float>(blocks * 16, 0.03f)}})),
            "(accepted)");
  for (int n : {1, 2, 3, int(blocks * 16 - 1)})
    EXPECT_EQ(read(with(tok, "tensors", {{"k_scale", std::vector<float>(n, 0.03f)},
                                         {"v_scale", std::vector<float>(n, 0.03f)}})),
              "x.json: tensors.k_scale: needs 336 values for per_token scales, got " + std::to_string(n));
  EXPECT_EQ(read(with(base_case(), "tensors", {{"k_scale", {0.03}}})),
            "x.json: tensors.v_scale: missing: the inline scales come together");
  EXPECT_EQ(read(with(base_case(), "tensors", {{"k_scale", {0.03}}, {"v_scale", {0.03, 0.03}}})),
            "x.json: tensors.v_scale: needs 1 values for per_tensor scales, got 2");
  EXPECT_EQ(read(with(with(base_case(), "scales", "none"), "tensors", {{"k_scale", {1}}, {"v_scale", {1}}})),
            "x.json: tensors.k_scale: given, but its scale kind is 'none'");
  EXPECT_EQ(read(with(base_case(), "tensors", {{"k_scale", {1e39}}, {"v_scale", {1}}})),
            "x.json: tensors.k_scale[0]: must be in [-3.4028234663852886e+38, 3.4028234663852886e+38], got 1e+39");
  EXPECT_EQ(read(with(base_case(), "tensors", {{"q_bits", {1, 2, 3}}})), "x.json: tensors.q_bits: needs 256 values, got 3");
  EXPECT_EQ(read(with(base_case(), "tensors", {{"q_bits", {65536}}})), "x.json: tensors.q_bits[0]: must be in 0..65535, got 65536");
  EXPECT_EQ(read(with(base_case(), "tensors", {{"block_tables", {0, 1, 2}}})),
            "x.json: tensors.block_tables: 3 entries is not a whole number of rows for 2 sequences");
  EXPECT_EQ(read(with(base_case(), "tensors", {{"block_tables", {0, -1}}})),
            "x.json: tensors.block_tables[1]: must be in 0..2147483647, got -1");
  std::vector<int> table(2 * 19, 0);
  EXPECT_EQ(read(with(base_case(), "tensors", {{"block_tables", table}, {"k_codes", std::vector<int>(per_block, 0)}})),
            "(accepted)");
  EXPECT_EQ(read(with(base_case(), "tensors", {{"block_tables", table}, {"k_codes", std::vector<int>(per_block + 1, 0)}})),
            "x.json: tensors.k_codes: 1025 codes is not a whole number of blocks of 1024");
  table[5] = 1;
  EXPECT_EQ(read(with(base_case(), "tensors", {{"block_tables", table}, {"k_codes", std::vector<int>(per_block, 0)}})),
            "x.json: tensors.block_tables: refers past the inline k_codes");
  EXPECT_EQ(read(with(base_case(), "tensors", {{"block_tables", {0, 1}}})),
            "x.json: tensors.block_tables: sequence 1 needs 19 blocks, its row has 1");
}

// Each inline tensor's values: both ends of the stored type's range are read
// back as written, one past either end is refused naming the entry.
TEST(CaseFormat, InlineTensorValuesTakeTheirWholeRangeAndNoMore) {
  const json base = base_case();  // lens [5, 300], G 2, D 64: 256 query values; 1024 codes per block
  const std::vector<int> table(2 * 19, 0);
  struct Field {
    const char* key;
    size_t count;
    int64_t hi;
  };
  for (const Field f : {Field{"q_bits", 256, 0xffff}, Field{"k_codes", 1024, 0xff}, Field{"v_codes", 1024, 0xff}}) {
    SCOPED_TRACE(f.key);
    std::vector<int64_t> values(f.count, 1);
    values.front() = 0;
    values.back() = f.hi;
    json t = {{"block_tables", table}, {f.key, values}};
    const CaseSpec s = case_from_json(with(base, "tensors", t), "x.json");
    const std::string key = f.key;
    std::vector<int64_t> got;
    auto take = [&](const auto& read_back) {
      if (read_back) got.assign(read_back->begin(), read_back->end());
    };
    if (key == "q_bits") take(s.q_bits);
    if (key == "k_codes") take(s.k_codes);
    if (key == "v_codes") take(s.v_codes);
    EXPECT_EQ(got, values);
    for (const auto& [at, bad] : {std::pair<size_t, int64_t>{0, -1}, {f.count - 1, f.hi + 1}}) {
      std::vector<int64_t> off = values;
      off[at] = bad;
      t[f.key] = off;
      EXPECT_EQ(read(with(base, "tensors", t)), "x.json: tensors." + key + "[" + std::to_string(at) +
                                                   "]: must be in 0.." + std::to_string(f.hi) + ", got " +
                                                   std::to_string(bad));
    }
  }
}

TEST(CaseFormat, SavedCaseReadsBackUnchanged) {
  const CaseSpec s = case_from_json(with(with(base_case(), "options.cu", kMaxCu), "workgroup_budget", kMaxWorkgroupBudget), "x.json");
  const CaseSpec t = case_from_json(case_to_json(s), "y.json");
  EXPECT_EQ(t.lens, s.lens);
  EXPECT_EQ(t.opt.cu, int(kMaxCu));
  EXPECT_EQ(t.workgroup_budget, kMaxWorkgroupBudget);
  EXPECT_EQ(t.seed, s.seed);
}

// A sequence (pav-case/2): earlier calls with their own meta, in order.
json sequence_case(size_t earlier) {
  json j = with(base_case(), "format", "pav-case/2");
  j["prelude"] = json::array();
  for (size_t i = 0; i < earlier; ++i) {
    json call = with(base_case(), "lens", json::array({int(i) + 1, 40}));
    call["meta"] = {{"property", "decode"}, {"call", i}};
    j["prelude"].push_back(call);
  }
  return j;
}

TEST(CaseFormat, PreludeHoldsOneToItsLimitOfCallsUnderFormat2Only) {
  EXPECT_EQ(read(sequence_case(1)), "(accepted)");
  EXPECT_EQ(read(sequence_case(size_t(kMaxPrelude))), "(accepted)");
  EXPECT_EQ(read(sequence_case(size_t(kMaxPrelude) + 1)),
            "x.json: prelude: expected 1.." + std::to_string(kMaxPrelude) + " entries, got " +
                std::to_string(kMaxPrelude + 1));
  EXPECT_EQ(read(sequence_case(0)), "x.json: prelude: expected 1.." + std::to_string(kMaxPrelude) + " entries, got 0");
  // A prelude under format 1 (a reader of format 1 would drop it) is refused by name.
  EXPECT_EQ(read(with(sequence_case(1), "format", "pav-case/1")),
            "x.json: prelude: earlier calls need \"format\": \"pav-case/2\"");
  // Format 2 without a prelude is one call.
  EXPECT_EQ(read(with(base_case(), "format", "pav-case/2")), "(accepted)");
  EXPECT_EQ(read(with(base_case(), "format", "pav-case/3")).rfind("x.json: format: ", 0), 0u);
}

TEST(CaseFormat, PreludeCallsAreCasesCheckedFieldByFieldAndNotNested) {
  json j = sequence_case(2);
  j["prelude"][1]["q_len"] = 0;
  EXPECT_EQ(read(j).rfind("x.json: prelude[1]: q_len: must be in 1..", 0), 0u) << read(j);
  j = sequence_case(2);
  j["prelude"][0] = 7;
  EXPECT_EQ(read(j), "x.json: prelude[0]: expected an object, got an integer 7");
  j = sequence_case(1);
  j["prelude"][0]["prelude"] = sequence_case(1)["prelude"];
  EXPECT_EQ(read(j), "x.json: prelude[0].prelude: an earlier call has no prelude of its own");
  j = sequence_case(1);
  j["prelude"][0]["meta"] = "decode";
  EXPECT_EQ(read(j), "x.json: prelude[0]: meta: expected an object, got a string \"decode\"");
}

TEST(CaseFormat, SequenceReadsBackUnchangedAndOneCallStaysFormat1) {
  const CaseSpec s = case_from_json(sequence_case(3), "x.json");
  ASSERT_EQ(s.prelude.size(), 3u);
  const json written = case_to_json(s);
  EXPECT_EQ(written["format"], "pav-case/2");
  const CaseSpec t = case_from_json(written, "y.json");
  ASSERT_EQ(t.prelude.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t.prelude[i].spec.lens, (std::vector<int32_t>{int32_t(i) + 1, 40}));
    EXPECT_EQ(t.prelude[i].meta, (json{{"property", "decode"}, {"call", i}}));
  }
  EXPECT_EQ(case_to_json(t), written);
  CaseSpec one = s;
  one.prelude.clear();
  EXPECT_EQ(case_to_json(one)["format"], "pav-case/1");
  EXPECT_FALSE(case_to_json(one).contains("prelude"));
}

}  // namespace
}  // namespace pav::props
