// SPDX-License-Identifier: Apache-2.0
// The cache formats end to end: every layout, storage, page table, dtype and
// scale kind against a plain long-double model that indexes the buffers with
// its own formulas (not kernels::cache_offset) and decodes the elements with
// its own arithmetic (not the codecs); the same values laid out in every
// format give the same reference; the contract admits each format only where
// it is declared, on both sides of each rule; the case file, the C ABI and the
// worker protocol carry each field; the generator reaches each format.
#include <fmt/core.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "adapters/abi.hpp"
#include "adapters/kernel.hpp"
#include "adapters/npy.hpp"
#include "adapters/worker_protocol.hpp"
#include "adapters/worker_server.hpp"
#include "kernels/cache_format.hpp"
#include "kernels/codecs.hpp"
#include "properties/case/case_format.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/gen/gen.hpp"
#include "properties/case/host_case.hpp"
#include "properties/gen/kernel_gen.hpp"
#include "properties/checks/runner_kernel.hpp"
#include "reference/compare.hpp"
#include "reference/decode.hpp"

namespace {

using namespace pav;
using kernels::CacheLayout;
using kernels::DType;
using kernels::PageTable;
using kernels::TensorView;
using props::CaseSpec;
using props::ScaleKind;

CaseSpec base_spec() {
  CaseSpec s;
  s.lens = {70, 0, 33};
  s.q_len = 2;
  s.hkv = 2;
  s.group = 2;
  s.head_dim = 32;
  s.block_size = 16;
  s.scales = ScaleKind::per_tensor;
  s.path = props::Path::uniform;
  s.seed = 5;
  return s;
}

// ---- the independent model -------------------------------------------------------

// One element's value, decoded by arithmetic on the bits (no codec call).
long double element(DType t, const uint8_t* p) {
  if (t == DType::bf16 || t == DType::f16) {
    const uint32_t h = uint32_t(p[0]) | uint32_t(p[1]) << 8;
    if (t == DType::bf16) {
      const uint32_t u = h << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    const int e = int(h >> 10) & 31, m = int(h & 1023);
    const long double v = e == 0 ? std::ldexp((long double)m, -24) : std::ldexp((long double)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
  }
  const int b = p[0];
  if (t == DType::fp8_e5m2) {
    const int e = (b >> 2) & 31, m = b & 3;
    const long double v = e == 0 ? std::ldexp((long double)m, -16) : std::ldexp((long double)(4 + m), e - 17);
    return (b & 0x80) ? -v : v;
  }
  const int bias = t == DType::fp8_e4m3fnuz ? 8 : 7;
  const int e = (b >> 3) & 15, m = b & 7;
  const long double v = e == 0 ? std::ldexp((long double)m, 1 - bias - 3) : std::ldexp((long double)(8 + m), e - bias - 3);
  return (b & 0x80) ? -v : v;
}

// Element (page, head, slot, d) of K or V in the case's buffers, by the
// layouts' definitions written out here.
long double cache_value(const props::HostCase& c, bool is_v, int64_t page, int64_t h, int64_t slot, int64_t d) {
  const CaseSpec& s = c.spec;
  const int64_t H = s.hkv, D = s.head_dim, ps = s.block_size, es = kernels::dtype_size(s.cache_dtype);
  int64_t off = 0;
  // MLA: V is K's first v_head_dim dims, read from the K buffer at K's place.
  const props::CacheBytes* buf = is_v && !s.kv_combined && s.v_head_dim == 0 ? &c.v : &c.k;
  if (s.layout == CacheLayout::packed) {
    if (!is_v) off = (((page * H + h) * (D / 16) + d / 16) * ps + slot) * 16 + d % 16;
    else if (s.v_layout == kernels::VLayout::plain) off = ((page * H + h) * D + d) * ps + slot;
    else off = (((page * H + h) * (ps / 16) + slot / 16) * D + d) * 16 + slot % 16;
  } else {
    const int64_t row = D + s.row_pad, half = H * ps * row;
    const int64_t page_stride = (s.kv_combined ? 2 * half : half) + s.page_pad;
    const int64_t in_page = s.layout == CacheLayout::nhd ? (slot * H + h) * row + d : (h * ps + slot) * row + d;
    off = page * page_stride + (s.kv_combined && is_v ? half : 0) + in_page;
  }
  return element(s.cache_dtype, buf->data() + off * es);
}

long double scale_value(const props::HostCase& c, bool is_v, int64_t page, int64_t h, int64_t slot) {
  is_v = is_v && c.spec.v_head_dim == 0;  // an MLA cache has K's one scale
  const ScaleKind k = is_v ? c.v_scale_kind() : c.spec.scales;
  const std::vector<float>& v = is_v ? c.v_scale : c.k_scale;
  if (k == ScaleKind::per_tensor) return v[0];
  if (k == ScaleKind::per_head) return v[size_t(h)];
  if (k == ScaleKind::per_token) return v[size_t((page * c.spec.hkv + h) * c.spec.block_size + slot)];
  return 1.0L;
}

// The i-th page of sequence b: from the CSR lists when the case has them.
int64_t page_at(const props::HostCase& c, int64_t b, int64_t i) {
  if (c.spec.page_table == PageTable::csr) return c.kv_indices[size_t(c.kv_indptr[size_t(b)] + i)];
  return c.block_tables[size_t(b * c.max_blocks + i)];
}

// Plain causal softmax attention, one row and one token at a time.
// The scaled logits of query row p of sequence b at query head `head` (bf16
// q), one per key it sees (tokens 0..pos; none when pos < 0).
std::vector<long double> row_logits(const props::HostCase& c, int64_t b, int64_t p, int64_t head) {
  const CaseSpec& s = c.spec;
  const int64_t D = s.head_dim, Hq = int64_t(s.hkv) * s.group, ps = s.block_size, h = head / s.group;
  const long double scale = s.softmax_scale != 0.0f ? (long double)s.softmax_scale : 1.0L / std::sqrt((long double)D);
  const int64_t qrow = b * s.q_len + p, pos = s.lens[size_t(b)] - s.q_len + p;
  std::vector<long double> logits;
  for (int64_t t = 0; t <= pos; ++t) {
    const int64_t page = page_at(c, b, t / ps), slot = t % ps;
    long double dot = 0.0L;
    for (int64_t d = 0; d < D; ++d) {
      const uint16_t qb = c.q[size_t(qrow * (Hq * D + s.q_row_pad) + head * D + d)];
      uint32_t u = uint32_t(qb) << 16;
      float qf;
      std::memcpy(&qf, &u, 4);
      dot += (long double)qf * cache_value(c, false, page, h, slot, d) * scale_value(c, false, page, h, slot);
    }
    logits.push_back(dot * scale);
  }
  return logits;
}

std::vector<long double> model(const props::HostCase& c) {
  const CaseSpec& s = c.spec;
  const int64_t B = int64_t(s.lens.size()), G = s.group, H = s.hkv, Hq = H * G, ps = s.block_size;
  const int64_t Dv = s.out_head_dim();  // MLA: the values' dims
  std::vector<long double> out(size_t(B * s.q_len * Hq * Dv), 0.0L);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < s.q_len; ++p)
      for (int64_t head = 0; head < Hq; ++head) {
        const int64_t h = head / G, qrow = b * s.q_len + p, L = s.lens[size_t(b)], pos = L - s.q_len + p;
        if (pos < 0) continue;
        const std::vector<long double> logits = row_logits(c, b, p, head);
        long double mx = -INFINITY, sum = 0.0L;
        for (long double x : logits) mx = std::max(mx, x);
        for (long double x : logits) sum += std::exp(x - mx);
        for (int64_t t = 0; t <= pos; ++t) {
          const int64_t page = page_at(c, b, t / ps), slot = t % ps;
          const long double w = std::exp(logits[size_t(t)] - mx) / sum;
          for (int64_t d = 0; d < Dv; ++d)
            out[size_t((qrow * Hq + head) * Dv + d)] +=
                w * cache_value(c, true, page, h, slot, d) * scale_value(c, true, page, h, slot);
        }
      }
  return out;
}

struct Format {
  std::string name;
  std::function<void(CaseSpec&)> set;
};

std::vector<Format> formats() {
  return {
      {"packed plain", [](CaseSpec&) {}},
      {"packed trans", [](CaseSpec& s) { s.v_layout = kernels::VLayout::trans; }},
      {"packed csr", [](CaseSpec& s) { s.page_table = PageTable::csr; }},
      {"nhd", [](CaseSpec& s) { s.layout = CacheLayout::nhd; }},
      {"hnd", [](CaseSpec& s) { s.layout = CacheLayout::hnd; }},
      {"nhd combined", [](CaseSpec& s) { s.layout = CacheLayout::nhd; s.kv_combined = true; }},
      {"hnd combined padded", [](CaseSpec& s) { s.layout = CacheLayout::hnd; s.kv_combined = true; s.page_pad = 16; s.row_pad = 8; }},
      {"nhd padded csr", [](CaseSpec& s) { s.layout = CacheLayout::nhd; s.page_pad = 3; s.row_pad = 1; s.page_table = PageTable::csr; }},
      {"nhd page 1 (token indices)", [](CaseSpec& s) { s.layout = CacheLayout::nhd; s.block_size = 1; }},
      {"hnd page 7 csr", [](CaseSpec& s) { s.layout = CacheLayout::hnd; s.block_size = 7; s.page_table = PageTable::csr; }},
      // MLA: one latent head of 32 + 16 dims, the values its first 32; and two heads, padded, through CSR.
      {"nhd MLA", [](CaseSpec& s) { s.layout = CacheLayout::nhd; s.hkv = 1; s.group = 4; s.head_dim = 48; s.v_head_dim = 32; }},
      {"hnd MLA padded csr page 5", [](CaseSpec& s) {
         s.layout = CacheLayout::hnd; s.head_dim = 64; s.v_head_dim = 16; s.page_pad = 2; s.row_pad = 3;
         s.page_table = PageTable::csr; s.block_size = 5; }},
  };
}

const DType kCacheDtypes[] = {DType::fp8_e4m3fn, DType::fp8_e4m3fnuz, DType::fp8_e5m2, DType::bf16, DType::f16};

reference::NumericsProfile exact() { return {reference::QQuant::none, reference::PRound::none, DType::none}; }

TEST(CacheFormat, EachFormatAndDtypeAgreesWithAPlainModel) {
  for (const Format& f : formats())
    for (DType t : kCacheDtypes)
      for (const auto& [k, v] : {std::pair{ScaleKind::per_tensor, ScaleKind::per_tensor},
                                 std::pair{ScaleKind::per_head, ScaleKind::per_token},
                                 std::pair{ScaleKind::none, ScaleKind::per_head}}) {
        CaseSpec s = base_spec();
        f.set(s);
        if (s.v_head_dim > 0 && v != k) continue;  // an MLA cache has one scale
        s.cache_dtype = t;
        s.scales = k;
        if (v != k) s.v_scales = v;
        SCOPED_TRACE(f.name + " " + std::string(kernels::to_string(t)) + " K " + std::string(kernels::to_string(k)) +
                     " V " + std::string(kernels::to_string(v)));
        props::HostCase c = props::build_case(s);
        const reference::ReferenceResult r = reference::decode(c.call(), exact());
        const std::vector<long double> want = model(c);
        ASSERT_EQ(r.out.size(), want.size());
        int bad = 0;
        for (size_t i = 0; i < want.size() && bad < 3; ++i)
          if (!(std::fabs((long double)r.out[i] - want[i]) <= 1e-5L * (1.0L + std::fabs(want[i])))) {
            ADD_FAILURE() << "element " << i << ": reference " << r.out[i] << ", model " << (double)want[i];
            ++bad;
          }
      }
}

adapters::KernelDescription every_format();

// Q cast to the cache's dtype (profile q_quant cache_dtype): the reference
// equals the plain model with Q rounded so, and differs from it unrounded.
TEST(CacheFormat, QCastToTheCacheDtypeIsTheDeclaredRounding) {
  // (A bf16 q cast to an f16 cache is nearly exact: the fp8 casts are the ones that show.)
  for (DType t : {DType::fp8_e4m3fn, DType::fp8_e5m2}) {
    SCOPED_TRACE(std::string(kernels::to_string(t)));
    CaseSpec s = base_spec();  // bf16 q
    s.layout = CacheLayout::nhd;
    s.cache_dtype = t;
    s.scales = ScaleKind::none;
    props::HostCase c = props::build_case(s);
    const reference::ReferenceResult plain = reference::decode(c.call(), exact());
    const reference::ReferenceResult cast =
        reference::decode(c.call(), {reference::QQuant::cache_dtype, reference::PRound::none, DType::none});
    const std::vector<long double> unrounded = model(c);
    // Q's values as the cache's dtype holds them, then the same model.
    for (uint16_t& bits : c.q) {
      uint32_t u = uint32_t(bits) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      uint8_t e[2];
      kernels::put_cache_element(t, f, e);
      const float r = float(element(t, e));
      std::memcpy(&u, &r, 4);
      bits = uint16_t(u >> 16);  // exact: every f16 and fp8 value of this range is a bf16 value
    }
    const std::vector<long double> rounded = model(c);
    double off_rounded = 0, off_unrounded = 0;
    for (size_t i = 0; i < rounded.size(); ++i) {
      off_rounded = std::max(off_rounded, double(std::fabs((long double)cast.out[i] - rounded[i])));
      off_unrounded = std::max(off_unrounded, double(std::fabs((long double)cast.out[i] - unrounded[i])));
      EXPECT_LE(std::fabs((long double)plain.out[i] - unrounded[i]), 1e-4L * (1 + std::fabs(unrounded[i])));
    }
    EXPECT_LE(off_rounded, 1e-4);
    EXPECT_GT(off_unrounded, 10 * off_rounded + 1e-6);
  }
  EXPECT_EQ(adapters::description_problem([] {
              adapters::KernelDescription d = every_format();
              d.profile.q_quant = reference::QQuant::cache_dtype;
              return d;
            }()),
            "");
}

// The same values in every layout, storage and page table: the same reference.
TEST(CacheFormat, TheSameValuesInEveryFormatGiveTheSameReference) {
  props::HostCase base = props::build_case(base_spec());
  const reference::ReferenceResult want = reference::decode(base.call(), exact());
  for (const Format& f : formats()) {
    if (f.name.find("trans") != std::string::npos || f.name.find("page") != std::string::npos ||
        f.name.find("MLA") != std::string::npos)
      continue;
    CaseSpec s = base_spec();
    f.set(s);
    props::HostCase c = props::build_case(s);
    const reference::ReferenceResult got = reference::decode(c.call(), exact());
    EXPECT_EQ(got.out, want.out) << f.name;
    EXPECT_EQ(got.lse, want.lse) << f.name;
  }
}

// Every byte a format leaves outside the cache's elements (a page's padding,
// a row's padding, the spare pages) is NaN: a kernel that reads one is seen.
TEST(CacheFormat, PaddingAndSparePagesArePoisoned) {
  CaseSpec s = base_spec();
  s.layout = CacheLayout::hnd;
  s.kv_combined = true;
  s.page_pad = 5;
  s.row_pad = 3;
  s.cache_dtype = DType::bf16;
  props::HostCase c = props::build_case(s);
  std::vector<bool> used(c.k.size() / 2, false);
  for (int64_t page = 0; page < c.num_blocks; ++page)
    for (int64_t h = 0; h < s.hkv; ++h)
      for (int64_t slot = 0; slot < s.block_size; ++slot)
        for (int64_t d = 0; d < s.head_dim; ++d) {
          const int64_t row = s.head_dim + s.row_pad, half = s.hkv * s.block_size * row;
          const int64_t base = page * (2 * half + s.page_pad) + (h * s.block_size + slot) * row + d;
          used[size_t(base)] = used[size_t(base + half)] = true;
        }
  int64_t finite_outside = 0, poisoned_inside = 0;
  for (size_t i = 0; i < used.size(); ++i) {
    const long double x = element(DType::bf16, &c.k[2 * i]);
    if (!used[i] && !std::isnan(x)) ++finite_outside;
    if (used[i] && std::isnan(x)) ++poisoned_inside;
  }
  EXPECT_EQ(finite_outside, 0);
  EXPECT_GT(poisoned_inside, 0);  // the spare pages and the tokens past each context
}

// ---- the contract -----------------------------------------------------------------

adapters::KernelDescription every_format() {
  adapters::KernelDescription d;
  d.name = "every_format";
  d.q_dtypes = {DType::bf16, DType::f16};
  d.cache_dtypes = {DType::fp8_e4m3fn, DType::fp8_e4m3fnuz, DType::fp8_e5m2, DType::bf16, DType::f16};
  d.cache_layouts = {CacheLayout::packed, CacheLayout::nhd, CacheLayout::hnd};
  d.v_layouts = {kernels::VLayout::plain, kernels::VLayout::trans};
  d.kv_storage = {adapters::KvStorage::separate, adapters::KvStorage::combined, adapters::KvStorage::latent};
  d.mla_dims = {{32, 16}};
  d.page_tables = {PageTable::block_table, PageTable::csr};
  d.strided_cache = true;
  d.mixed_scales = true;
  d.scale_kinds = {ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_token, ScaleKind::per_head};
  d.block_sizes = {1, 7, 16, 32};
  d.head_dims = {32, 48, 64};
  d.gqa_ratios = {1, 2, 4};
  d.min_q_len = 1;
  d.max_q_len = 4;
  d.profile = {reference::QQuant::none, reference::PRound::none, DType::none};
  adapters::canonicalize(d);
  return d;
}

std::string violation(const CaseSpec& s, const adapters::KernelDescription& d,
                      const std::function<void(kernels::DecodeCall&)>& edit = nullptr) {
  props::HostCase c = props::build_case(s);
  adapters::DecodeRequest r;
  r.call = c.call();
  if (edit) edit(r.call);
  return adapters::contract_violation(r, d);
}

TEST(CacheFormat, TheContractAdmitsEachFormatOnlyWhereDeclared) {
  const adapters::KernelDescription all = every_format();
  ASSERT_EQ(adapters::description_problem(all), "");
  struct Rule {
    const char* name;
    std::function<void(CaseSpec&)> set;
    std::function<void(adapters::KernelDescription&)> undeclare;
    const char* why;
  };
  const std::vector<Rule> rules = {
      {"nhd", [](CaseSpec& s) { s.layout = CacheLayout::nhd; },
       [](auto& d) { d.cache_layouts = {CacheLayout::packed, CacheLayout::hnd}; }, "cache layout nhd not in cache_layouts"},
      {"hnd", [](CaseSpec& s) { s.layout = CacheLayout::hnd; },
       [](auto& d) { d.cache_layouts = {CacheLayout::packed, CacheLayout::nhd}; }, "cache layout hnd not in cache_layouts"},
      {"packed", [](CaseSpec&) {}, [](auto& d) { d.cache_layouts = {CacheLayout::nhd, CacheLayout::hnd}; d.v_layouts.clear(); d.block_sizes = {16}; },
       "cache layout packed not in cache_layouts"},
      {"combined", [](CaseSpec& s) { s.layout = CacheLayout::nhd; s.kv_combined = true; },
       [](auto& d) { d.kv_storage = {adapters::KvStorage::separate, adapters::KvStorage::latent}; },
       "kv storage combined not in kv_storage"},
      {"separate", [](CaseSpec& s) { s.layout = CacheLayout::nhd; },
       [](auto& d) { d.kv_storage = {adapters::KvStorage::combined, adapters::KvStorage::latent}; d.cache_layouts = {CacheLayout::nhd}; d.v_layouts.clear(); },
       "kv storage separate not in kv_storage"},
      {"csr", [](CaseSpec& s) { s.page_table = PageTable::csr; },
       [](auto& d) { d.page_tables = {PageTable::block_table}; }, "page table csr not in page_tables"},
      {"block table", [](CaseSpec&) {}, [](auto& d) { d.page_tables = {PageTable::csr}; },
       "page table block_table not in page_tables"},
      {"padded pages", [](CaseSpec& s) { s.layout = CacheLayout::hnd; s.page_pad = 1; },
       [](auto& d) { d.strided_cache = false; }, "not contiguous (the kernel takes no strided cache)"},
      {"padded rows", [](CaseSpec& s) { s.layout = CacheLayout::nhd; s.kv_combined = true; s.row_pad = 1; },
       [](auto& d) { d.strided_cache = false; }, "kv_cache: not contiguous"},
      {"mixed scales", [](CaseSpec& s) { s.scales = ScaleKind::per_head; s.v_scales = ScaleKind::per_tensor; },
       [](auto& d) { d.mixed_scales = false; }, "k_scale and v_scale are of different kinds (per_head, per_tensor)"},
      {"one scale absent", [](CaseSpec& s) { s.scales = ScaleKind::none; s.v_scales = ScaleKind::per_tensor; },
       [](auto& d) { d.mixed_scales = false; }, "scales: k_scale absent but v_scale given"},
      {"per-head scales", [](CaseSpec& s) { s.scales = ScaleKind::per_head; },
       [](auto& d) { d.scale_kinds = {ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_token}; },
       "scales: per_head (k_scale) not in scale_kinds"},
      {"e5m2", [](CaseSpec& s) { s.cache_dtype = DType::fp8_e5m2; },
       [](auto& d) { d.cache_dtypes = {DType::fp8_e4m3fn, DType::bf16}; }, "k_cache: dtype fp8_e5m2 not in cache_dtypes"},
      {"bf16", [](CaseSpec& s) { s.cache_dtype = DType::bf16; s.layout = CacheLayout::nhd; },
       [](auto& d) { d.cache_dtypes = {DType::fp8_e4m3fn, DType::f16}; }, "k_cache: dtype bf16 not in cache_dtypes"},
      {"page size 1", [](CaseSpec& s) { s.layout = CacheLayout::nhd; s.block_size = 1; },
       [](auto& d) { d.block_sizes = {7, 16, 32}; }, "block_size 1 not in block_sizes"},
      {"MLA", [](CaseSpec& s) { s.layout = CacheLayout::nhd; s.head_dim = 48; s.v_head_dim = 32; },
       [](auto& d) { d.kv_storage = {adapters::KvStorage::separate, adapters::KvStorage::combined}; d.mla_dims.clear(); },
       "kv storage latent not in kv_storage"},
      {"MLA dims", [](CaseSpec& s) { s.layout = CacheLayout::hnd; s.head_dim = 48; s.v_head_dim = 32; },
       [](auto& d) { d.mla_dims = {{16, 32}}; }, "MLA dims [32, 16] (D_v 32, D 48) not in mla_dims 16+32"},
  };
  for (const Rule& rule : rules) {
    SCOPED_TRACE(rule.name);
    CaseSpec s = base_spec();
    rule.set(s);
    EXPECT_EQ(violation(s, all), "");
    adapters::KernelDescription d = all;
    rule.undeclare(d);
    ASSERT_EQ(adapters::description_problem(d), "");
    const std::string v = violation(s, d);
    EXPECT_NE(v.find(rule.why), std::string::npos) << "'" << v << "' (wanted " << rule.why << ")";
  }
}

TEST(CacheFormat, TheContractChecksCsrListsAndCombinedHalves) {
  const adapters::KernelDescription all = every_format();
  CaseSpec s = base_spec();
  s.layout = CacheLayout::nhd;
  s.page_table = PageTable::csr;
  s.block_size = 7;
  ASSERT_EQ(violation(s, all), "");
  auto at = [](const TensorView& t, int64_t i) -> int32_t& { return t.as<int32_t>()[i]; };
  struct Edit {
    std::function<void(kernels::DecodeCall&)> edit;
    const char* why;
  };
  const std::vector<Edit> edits = {
      // lens {70, 0, 33} at page size 7: 10, 0 and 5 pages; the last pages hold 7, 0 and 5.
      {[&](auto& c) { at(c.kv_indptr, 0) = 1; }, "kv_indptr[0] = 1 (expected 0)"},
      {[&](auto& c) { at(c.kv_indptr, 1) = 9; }, "kv_indptr[0..1] = 0..9 holds 9 pages, context_lens[0] = 70 needs 10"},
      {[&](auto& c) { at(c.kv_indptr, 3) = 16; }, "kv_indptr[2..3] = 10..16 holds 6 pages"},
      {[&](auto& c) { at(c.kv_last_page_len, 0) = 6; }, "kv_last_page_len[0] = 6 (context_lens[0] = 70 leaves 7"},
      {[&](auto& c) { at(c.kv_last_page_len, 1) = 1; }, "kv_last_page_len[1] = 1 (context_lens[1] = 0 leaves 0"},
      {[&](auto& c) { at(c.kv_last_page_len, 2) = 4; }, "kv_last_page_len[2] = 4"},
      {[&](auto& c) { at(c.kv_indices, 14) = int32_t(c.k_cache.shape[0]); }, "kv_indices[14] ="},
      {[&](auto& c) { at(c.kv_indices, 0) = -1; }, "kv_indices[0] = -1"},
      {[&](auto& c) { c.kv_indptr.shape[0] = 3; }, "kv_indptr: i32 [3] (expected a contiguous i32 [>= 4])"},
      {[&](auto& c) { c.kv_indices.shape[0] = 14; }, "kv_indptr[3] = 15 past kv_indices' 14 entries"},
      {[&](auto& c) { c.block_tables = c.kv_indptr; }, "block_tables: given with CSR page lists"},
  };
  for (const Edit& e : edits) {
    const std::string v = violation(s, all, e.edit);
    EXPECT_NE(v.find(e.why), std::string::npos) << "'" << v << "' (wanted " << e.why << ")";
  }
  // The largest page id and the last index are inside: accepted.
  EXPECT_EQ(violation(s, all, [&](auto& c) { at(c.kv_indices, 14) = int32_t(c.k_cache.shape[0] - 1); }), "");
  // Combined: k_cache and v_cache must be the tensor's two halves.
  CaseSpec comb = base_spec();
  comb.layout = CacheLayout::hnd;
  comb.kv_combined = true;
  ASSERT_EQ(violation(comb, all), "");
  EXPECT_NE(violation(comb, all, [](auto& c) { c.v_cache.data = c.k_cache.data; }).find("halves"), std::string::npos);
  EXPECT_NE(violation(comb, all, [](auto& c) { c.kv_cache.shape[1] = 3; }).find("kv_cache:"), std::string::npos);
  EXPECT_NE(violation(comb, all, [](auto& c) { c.v_cache.stride[1] += 1; }).find("halves"), std::string::npos);
  // nhd and hnd disagree on which dim is the page size: the wrong one is refused.
  CaseSpec h = base_spec();
  h.layout = CacheLayout::hnd;
  EXPECT_NE(violation(h, all, [](auto& c) { c.layout = CacheLayout::nhd; }).find("block_size 2 not in block_sizes"),
            std::string::npos);
}

// ---- formats through the case file, the ABI and the protocol ----------------------------

CaseSpec every_field() {
  CaseSpec s = base_spec();
  s.layout = CacheLayout::hnd;
  s.kv_combined = true;
  s.page_pad = 4;
  s.row_pad = 2;
  s.page_table = PageTable::csr;
  s.block_size = 5;
  s.cache_dtype = DType::fp8_e5m2;
  s.scales = ScaleKind::per_head;
  s.v_scales = ScaleKind::per_token;
  return s;
}

TEST(CacheFormat, TheCaseFileCarriesEachField) {
  const CaseSpec s = every_field();
  const CaseSpec back = props::case_from_json(props::case_to_json(s, {}), "x.json");
  EXPECT_EQ(back.layout, s.layout);
  EXPECT_EQ(back.kv_combined, s.kv_combined);
  EXPECT_EQ(back.page_pad, s.page_pad);
  EXPECT_EQ(back.row_pad, s.row_pad);
  EXPECT_EQ(back.page_table, s.page_table);
  EXPECT_EQ(back.block_size, s.block_size);
  EXPECT_EQ(back.cache_dtype, s.cache_dtype);
  EXPECT_EQ(back.scales, s.scales);
  EXPECT_EQ(back.v_scales, s.v_scales);
  const props::HostCase a = props::build_case(s), b = props::build_case(back);
  EXPECT_EQ(a.k, b.k);
  ASSERT_EQ(a.v_scale.size(), b.v_scale.size());  // NaN where no token is: compared as bytes
  EXPECT_EQ(std::memcmp(a.v_scale.data(), b.v_scale.data(), a.v_scale.size() * sizeof(float)), 0);
  EXPECT_EQ(a.kv_indices, b.kv_indices);
  // A single-sequence spec keeps the format and the bytes (inline buffers).
  props::HostCase one = props::build_case(props::single_sequence_spec(a, 2));
  EXPECT_EQ(one.k, a.k);
  EXPECT_EQ(one.spec.layout, CacheLayout::hnd);
  // A packed case takes no padding, and its pages hold multiples of 16 tokens.
  CaseSpec bad = base_spec();
  bad.page_pad = 1;
  EXPECT_THROW(props::check_case_spec(bad), std::invalid_argument);
  bad = base_spec();
  bad.block_size = 5;
  EXPECT_THROW(props::check_case_spec(bad), std::invalid_argument);
}

TEST(Abi, TheCacheFormatCrossesTheBoundary) {
  props::HostCase c = props::build_case(every_field());
  adapters::DecodeRequest r;
  r.call = c.call();
  for (const bool for_check : {false, true}) {
    pav_decode_args a = adapters::abi::make_args(r, for_check);
    EXPECT_EQ(a.cache_layout, PAV_CACHE_LAYOUT_HND);
    EXPECT_EQ(a.page_table, PAV_PAGE_TABLE_CSR);
    EXPECT_EQ(a.kv_cache.rank, 5);
    EXPECT_EQ(a.kv_cache.data == nullptr, for_check);
    EXPECT_NE(a.kv_indptr.data, nullptr);  // a table: host memory in a check too
    EXPECT_EQ(a.kv_indices.shape[0], int64_t(c.kv_indices.size()));
    EXPECT_EQ(a.k_cache.dtype, PAV_DTYPE_FP8_E5M2);
    kernels::PlanView plan;
    const adapters::DecodeRequest back = adapters::abi::request_from_abi(a, &plan);
    EXPECT_EQ(back.call.layout, CacheLayout::hnd);
    EXPECT_EQ(back.call.page_table, PageTable::csr);
    EXPECT_TRUE(back.call.kv_cache.present());
    EXPECT_EQ(back.call.k_cache.dtype, DType::fp8_e5m2);
    // A version-2 library's prefix hides them: packed and block tables.
    const pav_decode_args v2 = adapters::abi::make_args(r, for_check, 2);
    EXPECT_EQ(v2.struct_size, PAV_DECODE_ARGS_V2_SIZE);
    EXPECT_EQ(v2.kv_cache.rank, 0);
    const adapters::DecodeRequest old = adapters::abi::request_from_abi(v2, &plan);
    EXPECT_EQ(old.call.layout, CacheLayout::packed);
    EXPECT_FALSE(old.call.kv_indptr.present());
  }
  // The description's format fields through the desc and back, MLA, large
  // caches and fp8 partials (version 4) included.
  adapters::KernelDescription d = every_format();
  d.large_cache = true;
  d.head_dims = {32, 48, 64, 576};
  d.mla_dims = {{32, 16}, {512, 64}};
  d.profile.partial = DType::fp8_e5m2;
  adapters::canonicalize(d);
  pav_kernel_desc desc{};
  desc.struct_size = sizeof desc;
  desc.abi_version = PAV_KERNEL_ABI_VERSION;
  adapters::abi::to_abi(d, &desc);
  EXPECT_EQ(desc.cache_layouts, 7u);
  EXPECT_EQ(desc.page_tables, 3u);
  EXPECT_EQ(desc.kv_storage, 7u);
  EXPECT_EQ(desc.scale_kinds, 15u);
  EXPECT_EQ(desc.large_cache, 1);
  ASSERT_EQ(desc.num_mla_dims, 2);
  EXPECT_EQ(desc.mla_dims[1][0], 512);
  EXPECT_EQ(desc.mla_dims[1][1], 64);
  EXPECT_EQ(desc.partial_dtype, PAV_DTYPE_FP8_E5M2);
  EXPECT_EQ(adapters::abi::from_abi(desc), d);
  // A version-3 library has none of them: the latent bit names no value there,
  // and fp8 partials are refused naming the version; its reserved bytes (zero) read as no MLA.
  {
    pav_kernel_desc v3 = desc;
    v3.abi_version = 3;
    v3.partial_dtype = PAV_DTYPE_F32;
    try {
      adapters::abi::from_abi(v3);
      ADD_FAILURE() << "the latent bit accepted from a version-3 library";
    } catch (const adapters::KernelSpecError& e) {
      EXPECT_NE(std::string(e.what()).find("kv_storage has bits set"), std::string::npos) << e.what();
    }
    v3.partial_dtype = desc.partial_dtype;
    v3.kv_storage = 3u;
    try {
      adapters::abi::from_abi(v3);
      ADD_FAILURE() << "fp8 partials accepted from a version-3 library";
    } catch (const adapters::KernelSpecError& e) {
      EXPECT_NE(std::string(e.what()).find("version-3"), std::string::npos) << e.what();
    }
    v3.partial_dtype = PAV_DTYPE_F32;
    const adapters::KernelDescription got = adapters::abi::from_abi(v3);
    EXPECT_FALSE(got.large_cache);
    EXPECT_TRUE(got.mla_dims.empty());
    // A bad count is refused by name.
    pav_kernel_desc bad = desc;
    bad.num_mla_dims = PAV_MAX_MLA_DIMS + 1;
    EXPECT_THROW(adapters::abi::from_abi(bad), adapters::KernelSpecError);
    bad.num_mla_dims = -1;
    EXPECT_THROW(adapters::abi::from_abi(bad), adapters::KernelSpecError);
    bad = desc;
    bad.large_cache = 2;
    EXPECT_THROW(adapters::abi::from_abi(bad), adapters::KernelSpecError);
  }
  d.kv_storage = {adapters::KvStorage::separate, adapters::KvStorage::combined};
  d.mla_dims.clear();
  d.large_cache = false;
  d.head_dims = {32, 48, 64};
  d.profile.partial = DType::none;
  adapters::canonicalize(d);
  desc = pav_kernel_desc{};
  desc.struct_size = sizeof desc;
  desc.abi_version = PAV_KERNEL_ABI_VERSION;
  adapters::abi::to_abi(d, &desc);
  EXPECT_EQ(desc.kv_storage, 3u);
  // P cast to fp8 without a scale is a profile of its own (PAV_P_ROUND_FP8).
  adapters::KernelDescription unscaled = d;
  unscaled.cache_dtypes = {DType::fp8_e4m3fn};
  unscaled.profile.p_round = reference::PRound::fp8;
  pav_kernel_desc u{};
  u.struct_size = sizeof u;
  u.abi_version = PAV_KERNEL_ABI_VERSION;
  adapters::abi::to_abi(unscaled, &u);
  EXPECT_EQ(u.p_round, PAV_P_ROUND_FP8);
  EXPECT_EQ(adapters::abi::from_abi(u), unscaled);
  EXPECT_EQ(adapters::description_from_json(adapters::to_json(unscaled)), unscaled);
  unscaled.cache_dtypes = {DType::fp8_e4m3fn, DType::bf16};  // fp8 rounding needs an e4m3 cache
  EXPECT_NE(adapters::description_problem(unscaled).find("profile:"), std::string::npos);
  // Zero masks keep the older meaning; a bit past the enums is refused.
  pav_kernel_desc zero = desc;
  zero.cache_layouts = zero.kv_storage = zero.page_tables = 0;
  zero.v_layouts = PAV_BIT(PAV_V_LAYOUT_PLAIN);
  const adapters::KernelDescription z = adapters::abi::from_abi(zero);
  EXPECT_EQ(z.cache_layouts, std::vector{CacheLayout::packed});
  EXPECT_EQ(z.page_tables, std::vector{PageTable::block_table});
  zero.cache_layouts = PAV_BIT(3);
  EXPECT_THROW(adapters::abi::from_abi(zero), adapters::KernelSpecError);
  // A version-2 desc cannot name a 16-bit or e5m2 cache, nor per-head scales.
  pav_kernel_desc old = desc;
  old.abi_version = 2;
  EXPECT_THROW(adapters::abi::from_abi(old), adapters::KernelSpecError);
  old.cache_dtypes = PAV_BIT(PAV_DTYPE_FP8_E4M3FN);
  EXPECT_THROW(adapters::abi::from_abi(old), adapters::KernelSpecError);  // per_head's bit
  old.scale_kinds = PAV_BIT(PAV_SCALE_PER_TENSOR);
  const adapters::KernelDescription o = adapters::abi::from_abi(old);
  EXPECT_EQ(o.cache_layouts, std::vector{CacheLayout::packed});
  EXPECT_FALSE(o.strided_cache);
}

// An MLA call crosses the ABI (version 4): kv_storage latent, v_cache K's
// [..., :D_v] view of the same memory, v_scale K's, out of D_v dims; the
// receiving side rebuilds the latent call, which the contract admits. A
// version-3 prefix has no kv_storage.
CaseSpec mla_spec();

TEST(Abi, AnMlaCallCrossesTheBoundary) {
  CaseSpec s = mla_spec();
  s.page_pad = 16;
  s.v_scales.reset();
  props::HostCase c = props::build_case(s);
  adapters::DecodeRequest r;
  r.call = c.call();
  ASSERT_TRUE(r.call.v_latent);
  for (const bool for_check : {false, true}) {
    const pav_decode_args a = adapters::abi::make_args(r, for_check);
    EXPECT_EQ(a.kv_storage, PAV_KV_LATENT);
    EXPECT_EQ(a.kv_cache.rank, 0);
    EXPECT_EQ(a.v_cache.shape[3], 32);
    EXPECT_EQ(a.k_cache.shape[3], 48);
    EXPECT_EQ(a.out.shape[2], 32);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(a.v_cache.stride[i], a.k_cache.stride[i]) << i;
    EXPECT_EQ(a.v_cache.data, a.k_cache.data);
    kernels::PlanView plan;
    const adapters::DecodeRequest back = adapters::abi::request_from_abi(a, &plan);
    EXPECT_TRUE(back.call.v_latent);
    if (!for_check) {
      EXPECT_EQ(adapters::contract_violation(back, every_format()), "");
    }
    const pav_decode_args v3 = adapters::abi::make_args(r, for_check, 3);
    EXPECT_EQ(v3.struct_size, PAV_DECODE_ARGS_V3_SIZE);
    EXPECT_FALSE(adapters::abi::request_from_abi(v3, &plan).call.v_latent);
  }
}

TEST(WorkerProtocol, TheCacheFormatTravelsAsNamedTensorsAndArgs) {
  props::HostCase c = props::build_case(every_field());
  adapters::DecodeRequest r;
  r.call = c.call();
  const nlohmann::json req = adapters::protocol::decode_request(1, "/x", r, false);
  const nlohmann::json& t = req.at("tensors");
  EXPECT_TRUE(t.contains("kv_cache"));
  EXPECT_FALSE(t.contains("k_cache"));
  EXPECT_FALSE(t.contains("v_cache"));
  EXPECT_FALSE(t.contains("block_tables"));
  for (const char* n : {"kv_indptr", "kv_indices", "kv_last_page_len", "k_scale", "v_scale"}) EXPECT_TRUE(t.contains(n)) << n;
  EXPECT_EQ(t.at("kv_cache").at("dtype"), "fp8_e5m2");
  const nlohmann::json& a = req.at("args");
  EXPECT_EQ(a.at("cache_layout"), "hnd");
  EXPECT_EQ(a.at("page_table"), "csr");
  EXPECT_EQ(a.at("kv_storage"), "combined");
  EXPECT_EQ(a.at("page_size"), 5);
  EXPECT_EQ(a.at("k_scale_kind"), "per_head");
  EXPECT_EQ(a.at("v_scale_kind"), "per_token");
  const nlohmann::json chk = adapters::protocol::check_request(1, r);
  EXPECT_EQ(chk.at("args").at("cache_layout"), "hnd");
  EXPECT_TRUE(chk.at("tensors").at("kv_indptr").contains("values"));
  // The description's fields round-trip through JSON.
  const adapters::KernelDescription d = every_format();
  EXPECT_EQ(adapters::description_from_json(adapters::to_json(d)), d);
  nlohmann::json j = adapters::to_json(d);
  j["cache_layouts"] = {"nhd"};
  EXPECT_THROW(adapters::description_from_json(j), adapters::KernelSpecError);  // v_layouts given without packed
  j.erase("v_layouts");
  EXPECT_EQ(adapters::description_from_json(j).cache_layouts, std::vector{CacheLayout::nhd});
  j["page_tables"] = {"tree"};
  EXPECT_THROW(adapters::description_from_json(j), adapters::KernelSpecError);
}

// pav kernel-worker's side (what --isolate runs): a decode request of every
// format field, served to a kernel that records what it was handed, comes back
// as the same call: its halves of the combined tensor, its CSR lists, its
// layout; the contract admits it and the reference reads it as the original.
class Recorder final : public adapters::KernelUnderTest {
 public:
  explicit Recorder(adapters::KernelDescription d) : d_(std::move(d)) {}
  const adapters::KernelDescription& description() const override { return d_; }
  std::string adapter() const override { return "test"; }
  std::string spec() const override { return "recorder"; }
  adapters::CallResult check(const adapters::DecodeRequest&) override { return {}; }
  adapters::CallResult decode(const adapters::DecodeRequest& r) override {
    ++calls_;
    violation = adapters::contract_violation(r, d_);
    if (violation.empty()) out = reference::decode(r.call, exact()).out;
    layout = r.call.layout;
    page_table = r.call.page_table;
    combined = r.call.kv_cache.present();
    latent = r.call.v_latent;
    k_stride = r.call.k_cache.stride;
    std::memset(r.call.out.data, 0, size_t(r.call.out.numel() * kernels::dtype_size(r.call.out.dtype)));
    return {};
  }
  int64_t decode_calls() const override { return calls_; }
  std::string violation = "(not called)";
  std::vector<float> out;
  CacheLayout layout = CacheLayout::packed;
  PageTable page_table = PageTable::block_table;
  bool combined = false;
  bool latent = false;
  std::array<int64_t, kernels::kMaxRank> k_stride{};

 private:
  adapters::KernelDescription d_;
  int64_t calls_ = 0;
};

TEST(WorkerServer, ServesEveryCacheFormatAsTheSameCall) {
  for (const int storage : {0, 1, 2}) {  // combined, separate, MLA
    const bool combined = storage == 0;
    CaseSpec s = every_field();
    s.kv_combined = combined;
    if (storage == 2) {
      s.head_dim = 48;
      s.v_head_dim = 32;
      s.v_scales.reset();
    }
    s.page_pad = 16;  // padded pages and rows: they go as their spans, strides kept
    s.row_pad = 8;
    s.block_size = 7;  // one of every_format()'s sizes
    props::HostCase c = props::build_case(s);
    adapters::DecodeRequest r;
    r.call = c.call();
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("pav-format-server-" + std::to_string(::getpid()) + "-" + std::to_string(storage));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (const auto& t : adapters::protocol::inputs_of(r))
      adapters::npy::write((dir / (std::string(t.name) + ".npy")).string(),
                           adapters::protocol::sent_as_span(t.view) ? adapters::protocol::span_view(t.view) : t.view);
    const std::string input = adapters::protocol::decode_request(1, dir.string(), r, false).dump() + "\n{\"op\":\"quit\"}\n";
    std::ofstream(dir / "in.jsonl", std::ios::binary) << input;
    const int in_fd = ::open((dir / "in.jsonl").c_str(), O_RDONLY);
    const int out_fd = ::open((dir / "out.jsonl").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(in_fd, 0);
    ASSERT_GE(out_fd, 0);
    Recorder k(every_format());
    EXPECT_EQ(adapters::serve_worker(k, in_fd, out_fd), 0);
    ::close(in_fd);
    ::close(out_fd);
    std::ifstream replies(dir / "out.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(replies, line));
    EXPECT_EQ(nlohmann::json::parse(line).at("ok"), true) << line;
    EXPECT_EQ(k.violation, "");
    EXPECT_EQ(k.layout, CacheLayout::hnd);
    EXPECT_EQ(k.page_table, PageTable::csr);
    EXPECT_EQ(k.combined, combined);
    EXPECT_EQ(k.latent, storage == 2);
    EXPECT_EQ(k.k_stride, r.call.k_cache.stride);  // the served cache has pav's padded strides
    EXPECT_EQ(k.out, reference::decode(r.call, exact()).out);
    std::filesystem::remove_all(dir);
  }
}

// ---- generation --------------------------------------------------------------------

TEST(KernelGeneration, ReachesEveryCacheFormat) {
  const adapters::KernelDescription d = every_format();
  const rc::Gen<CaseSpec> gen = props::gen_kernel_case(d);
  std::set<std::string> seen;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    const CaseSpec s = props::sample(gen, seed, props::fuzz::case_size(seed));
    ASSERT_TRUE(props::spec_within(s, d)) << "seed " << seed;
    ASSERT_EQ(violation(s, d), "") << "seed " << seed;
    seen.insert(std::string(kernels::to_string(s.layout)));
    seen.insert(std::string(kernels::to_string(s.cache_dtype)));
    seen.insert(std::string(kernels::to_string(s.page_table)));
    seen.insert("K " + std::string(kernels::to_string(s.scales)));
    if (s.kv_combined) seen.insert("combined");
    if (s.v_head_dim > 0) seen.insert("MLA");
    if (s.extreme_logits < 0) seen.insert("logits below -5e4");
    if (s.extreme_logits > 0) seen.insert("logits above 5e4");
    if (s.zero_q_head) seen.insert("zero q head");
    if (s.constant_q_head) seen.insert("constant q head");
    if (s.logit_ties == 1) seen.insert("tied logits");
    if (s.logit_ties == 2) seen.insert("near-tied logits");
    if (s.null_block) seen.insert("null block");
    if (s.page_pad || s.row_pad) seen.insert("padded");
    if (s.block_size == 1) seen.insert("page size 1");
    if (s.v_scales) seen.insert("mixed scales");
    if (s.layout != CacheLayout::packed && s.page_table == PageTable::csr) seen.insert("csr beside nhd/hnd");
  }
  for (const char* want : {"packed", "nhd", "hnd", "bf16", "f16", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2", "csr",
                           "block_table", "K per_head", "K per_token", "combined", "padded", "page size 1",
                           "mixed scales", "csr beside nhd/hnd", "MLA", "logits below -5e4", "logits above 5e4",
                           "zero q head", "constant q head", "tied logits", "near-tied logits", "null block"})
    EXPECT_TRUE(seen.count(want)) << "never drawn: " << want;
  // A kernel of the older formats is never sent another, nor a move into one.
  adapters::KernelDescription old = every_format();
  old.cache_dtypes = {DType::fp8_e4m3fn};
  old.cache_layouts = {CacheLayout::packed};
  old.kv_storage = {adapters::KvStorage::separate};
  old.mla_dims.clear();
  old.page_tables = {PageTable::block_table};
  old.strided_cache = old.mixed_scales = false;
  old.scale_kinds = {ScaleKind::none, ScaleKind::per_tensor};
  old.block_sizes = {16, 32};
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    const CaseSpec s = props::sample(props::gen_kernel_case(old), seed, props::fuzz::case_size(seed));
    EXPECT_TRUE(s.layout == CacheLayout::packed && s.page_table == PageTable::block_table && !s.kv_combined &&
                !s.v_scales && s.scales != ScaleKind::per_head)
        << "seed " << seed;
  }
  for (const std::string& m : props::outside_moves(old))
    EXPECT_TRUE(m != "cache_layout" && m != "page_table" && m != "kv_storage" && m != "mixed_scales") << m;
  // A kernel that knows the formats gets a move into each one it does not declare.
  adapters::KernelDescription nhd_only = old;
  nhd_only.cache_layouts = {CacheLayout::nhd};
  nhd_only.v_layouts.clear();
  nhd_only.block_sizes = {1, 16};
  const std::vector<std::string> moves = props::outside_moves(nhd_only);
  for (const char* f : {"cache_layout", "page_table", "kv_storage", "strided_cache", "mixed_scales"}) {
    EXPECT_NE(std::find(moves.begin(), moves.end(), f), moves.end()) << f;
    CaseSpec s = props::sample(props::gen_kernel_case(nhd_only), 3, 20);
    s.scales = ScaleKind::per_tensor;
    ASSERT_TRUE(props::move_outside(s, f, nhd_only)) << f;
    EXPECT_NE(violation(s, nhd_only), "") << f;
  }
}


// ---- MLA: one cache whose keys' first D_v dims are the values ----------------------

CaseSpec mla_spec() {
  CaseSpec s = base_spec();
  s.layout = CacheLayout::nhd;
  s.hkv = 1;
  s.group = 4;
  s.head_dim = 48;
  s.v_head_dim = 32;
  return s;
}

TEST(CacheFormat, TheContractChecksAnMlaCache) {
  const adapters::KernelDescription all = every_format();
  const CaseSpec s = mla_spec();
  ASSERT_EQ(violation(s, all), "");
  {
    props::HostCase c = props::build_case(s);
    const kernels::DecodeCall call = c.call();
    EXPECT_TRUE(call.v_latent);
    EXPECT_EQ(call.v_cache.data, call.k_cache.data);
    EXPECT_EQ(call.out.shape[2], 32);
    EXPECT_EQ(kernels::dims_of(call).v_head_dim, 32);
    EXPECT_EQ(c.v.size(), 0u);  // no V buffer: the values are the keys' first dims
  }
  struct Edit {
    const char* name;
    std::function<void(kernels::DecodeCall&)> edit;
    const char* why;
  };
  auto set_dv = [](kernels::DecodeCall& c, int64_t dv) {
    c.v_cache.shape[3] = dv;
    c.out = TensorView::contiguous_of(c.out.data, c.out.dtype, {c.out.shape[0], c.out.shape[1], dv});
  };
  const std::vector<Edit> edits = {
      {"out with D dims", [](auto& c) { c.out.shape[2] = 48; }, "out: shape [6, 4, 48] (expected [6, 4, 32]"},
      {"V one element on", [](auto& c) { c.v_cache.data = static_cast<uint8_t*>(c.v_cache.data) + 1; },
       "not k_cache's [..., :32] view"},
      {"V at other strides", [](auto& c) { c.v_cache.stride[1] += 1; }, "not k_cache's [..., :32] view"},
      // (out follows D_v, so it is edited with it: the cache's rule is what refuses.)
      {"D_v = D", [&](auto& c) { set_dv(c, 48); }, "D_v must be a multiple of 16 in 16..32"},
      {"D_v not a multiple of 16", [&](auto& c) { set_dv(c, 24); }, "D_v must be a multiple of 16"},
      {"D_v 0", [&](auto& c) { set_dv(c, 0); }, "v_cache: shape"},
      {"a V scale of its own", [](auto& c) {
         static float other = 0.5f;
         c.v_scale = TensorView::contiguous_of(&other, DType::f32, {1});
       }, "v_scale: differs from k_scale"},
      {"a combined tensor too", [](auto& c) { c.kv_cache = c.k_cache; }, "kv_cache: given with an MLA cache"},
      {"packed", [](auto& c) { c.layout = CacheLayout::packed; }, "an MLA cache is for the nhd and hnd layouts"},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(e.name);
    const std::string v = violation(s, all, e.edit);
    EXPECT_NE(v.find(e.why), std::string::npos) << "'" << v << "' (wanted " << e.why << ")";
  }
  // The smallest and largest D_v of a 64-dim head are admitted where declared.
  for (const int dv : {16, 48}) {
    CaseSpec e = s;
    e.head_dim = 64;
    e.v_head_dim = dv;
    adapters::KernelDescription d = all;
    d.mla_dims = {{dv, 64 - dv}};
    EXPECT_EQ(violation(e, d), "") << dv;
  }
  // Hkv 1: a [1] scale is per tensor and per head at once.
  adapters::KernelDescription per_head = all;
  per_head.scale_kinds = {ScaleKind::none, ScaleKind::per_head};
  per_head.mixed_scales = false;
  CaseSpec one = s;
  one.scales = ScaleKind::per_tensor;
  EXPECT_EQ(violation(one, per_head), "");
  one.hkv = 2;
  one.v_head_dim = 0;
  EXPECT_NE(violation(one, per_head).find("per_tensor (k_scale) not in scale_kinds"), std::string::npos);
  // The reference refuses what the contract refuses: a V that is not K's view.
  props::HostCase c = props::build_case(s);
  kernels::DecodeCall call = c.call();
  call.v_cache.stride[1] += 1;
  EXPECT_THROW(reference::decode(call, exact()), std::invalid_argument);
}

TEST(CacheFormat, TheDescriptionDeclaresMlaDims) {
  adapters::KernelDescription d = every_format();
  ASSERT_EQ(adapters::description_problem(d), "");
  struct Bad {
    std::function<void(adapters::KernelDescription&)> edit;
    const char* why;
  };
  const std::vector<Bad> bad = {
      {[](auto& d) { d.mla_dims.clear(); }, "mla_dims: empty, but kv_storage names latent"},
      {[](auto& d) { d.kv_storage = {adapters::KvStorage::separate}; }, "mla_dims: given, but kv_storage does not name latent"},
      {[](auto& d) { d.mla_dims = {{64, 16}}; }, "head_dims must list its q and K head dim 80"},
      {[](auto& d) { d.mla_dims = {{40, 8}}; }, "multiples of 16, each at least 16"},
      {[](auto& d) { d.mla_dims = {{48, 0}}; d.head_dims = {32, 48, 64}; }, "multiples of 16, each at least 16"},
      {[](auto& d) { d.mla_dims = {{32, 16}, {32, 16}}; }, "mla_dims: a pair is listed twice"},
      {[](auto& d) {
         d.cache_layouts = {CacheLayout::packed};
         d.kv_storage = {adapters::KvStorage::separate, adapters::KvStorage::latent};
       }, "latent (MLA) is for the nhd and hnd layouts"},
  };
  for (const Bad& b : bad) {
    adapters::KernelDescription e = d;
    b.edit(e);
    const std::string why = adapters::description_problem(e);
    EXPECT_NE(why.find(b.why), std::string::npos) << "'" << why << "' (wanted " << b.why << ")";
  }
  // JSON: [latent, rope] pairs, and nothing else.
  EXPECT_EQ(adapters::description_from_json(adapters::to_json(d)), d);
  EXPECT_EQ(adapters::to_json(d).at("mla_dims"), nlohmann::json::parse("[[32, 16]]"));
  for (const char* v : {"[[32]]", "[32, 16]", "[[32, 16, 0]]", "[[\"32\", 16]]", "\"32+16\""}) {
    nlohmann::json j = adapters::to_json(d);
    j["mla_dims"] = nlohmann::json::parse(v);
    EXPECT_THROW(adapters::description_from_json(j), adapters::KernelSpecError) << v;
  }
  EXPECT_NE(adapters::summary(d).find("MLA 32+16"), std::string::npos);
}

TEST(CacheFormat, TheCaseFileCarriesAnMlaCache) {
  CaseSpec s = mla_spec();
  s.layout = CacheLayout::hnd;
  s.page_table = PageTable::csr;
  s.scales = ScaleKind::per_token;
  const nlohmann::json j = props::case_to_json(s, {});
  EXPECT_EQ(j.at("cache").at("kv"), "latent");
  EXPECT_EQ(j.at("cache").at("v_head_dim"), 32);
  const CaseSpec back = props::case_from_json(j, "x.json");
  EXPECT_EQ(back.v_head_dim, 32);
  const props::HostCase a = props::build_case(s), b = props::build_case(back);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(reference::decode(props::HostCase(a).call(), exact()).out, reference::decode(props::HostCase(b).call(), exact()).out);
  // A single-sequence spec: inline K codes and K's scales only.
  const CaseSpec one = props::single_sequence_spec(a, 2);
  EXPECT_FALSE(one.v_codes);
  EXPECT_FALSE(one.v_scale_values);
  EXPECT_NO_THROW(props::build_case(one));
  // Refused: D_v at or past D, not a multiple of 16, packed, combined, V's own scale or codes.
  for (const auto& edit : std::vector<std::function<void(CaseSpec&)>>{
           [](CaseSpec& c) { c.v_head_dim = 48; }, [](CaseSpec& c) { c.v_head_dim = 20; },
           [](CaseSpec& c) { c.layout = CacheLayout::packed; }, [](CaseSpec& c) { c.kv_combined = true; },
           [](CaseSpec& c) { c.v_scales = ScaleKind::none; }, [](CaseSpec& c) { c.v_codes = std::vector<uint8_t>(4); }}) {
    CaseSpec e = mla_spec();
    edit(e);
    EXPECT_THROW(props::check_case_spec(e), std::invalid_argument);
  }
  nlohmann::json k = props::case_to_json(mla_spec(), {});
  k["cache"]["kv"] = "separate";
  EXPECT_THROW(props::case_from_json(k, "x.json"), props::CaseError);  // v_head_dim without latent
}

TEST(WorkerProtocol, AnMlaCacheTravelsAsItsKeysAlone) {
  CaseSpec s = mla_spec();
  s.scales = ScaleKind::per_tensor;
  props::HostCase c = props::build_case(s);
  adapters::DecodeRequest r;
  r.call = c.call();
  const nlohmann::json req = adapters::protocol::decode_request(1, "/x", r, false);
  const nlohmann::json& t = req.at("tensors");
  EXPECT_TRUE(t.contains("k_cache"));
  EXPECT_TRUE(t.contains("k_scale"));
  EXPECT_FALSE(t.contains("v_cache"));
  EXPECT_FALSE(t.contains("v_scale"));
  EXPECT_EQ(req.at("args").at("kv_storage"), "latent");
  EXPECT_EQ(req.at("args").at("v_head_dim"), 32);
  EXPECT_EQ(req.at("outputs").at("out").at("shape"), nlohmann::json::parse("[6, 4, 32]"));
  const nlohmann::json chk = adapters::protocol::check_request(1, r);
  EXPECT_EQ(chk.at("args").at("v_head_dim"), 32);
}


// ---- extreme logits ---------------------------------------------------------------

// Every scaled logit of an extreme case sits past 5e4 on its side (for -1 the
// lse, at least the largest logit, is below -5e4), in every cache dtype and
// scale kind, and the comparison standard adds its score term there.
TEST(ExtremeLogits, EveryScoreSitsPastFiveE4AndTheStandardFollows) {
  for (const int sign : {-1, 1})
    for (DType t : {DType::fp8_e4m3fn, DType::fp8_e5m2, DType::bf16})
      for (ScaleKind k : {ScaleKind::per_tensor, ScaleKind::none, ScaleKind::per_token})
        for (const int D : {64, 128}) {
          SCOPED_TRACE(fmt::format("sign {} {} {} D {}", sign, kernels::to_string(t), kernels::to_string(k), D));
          CaseSpec s = base_spec();
          s.layout = CacheLayout::nhd;
          s.cache_dtype = t;
          s.scales = k;
          s.head_dim = D;
          s.extreme_logits = sign;
          s.softmax_scale = props::extreme_logit_scale(D, k);
          props::HostCase c = props::build_case(s);
          const reference::ReferenceResult r = reference::decode(c.call(), exact());
          ASSERT_EQ(r.score_max.size(), r.lse.size());
          int64_t seen = 0;
          for (size_t row = 0; row < r.lse.size(); ++row) {
            if (!r.seen[row]) continue;
            ++seen;
            if (sign < 0) EXPECT_LT(r.lse[row], -5e4) << row;
            else EXPECT_GT(r.lse[row], 5e4) << row;
            EXPECT_GT(r.score_max[row], 5e4) << row;
            EXPECT_LT(r.score_max[row], 1e5) << row;  // extreme, not unbounded
          }
          EXPECT_GT(seen, 0);
          // The reference agrees with the long-double model there too.
          const std::vector<long double> want = model(c);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_LE(std::fabs((long double)r.out[i] - want[i]), 1e-4L * (1.0L + std::fabs(want[i]))) << i;
          reference::ReferenceResult no_term = r;
          no_term.score_max.clear();
          const int64_t i = 5;
          EXPECT_NEAR(reference::allowed_error(r, i, {}) - reference::allowed_error(no_term, i, {}),
                      reference::kScoreTerm * double(r.score_max[0]) * r.pq_l1[size_t(i)], 1e-12);
        }
  // Off by default, and on ordinary logits the term is far below the floor.
  props::HostCase c = props::build_case(base_spec());
  const reference::ReferenceResult r = reference::decode(c.call(), exact());
  for (size_t row = 0; row < r.score_max.size(); ++row) EXPECT_LT(r.score_max[row], 100.0f);
  EXPECT_LT(reference::kScoreTerm * 100.0, 1e-4);
  // A case file carries the field and refuses other values.
  CaseSpec s = base_spec();
  s.extreme_logits = -1;
  EXPECT_EQ(props::case_from_json(props::case_to_json(s, {}), "x.json").extreme_logits, -1);
  nlohmann::json j = props::case_to_json(s, {});
  j["extreme_logits"] = 2;
  EXPECT_THROW(props::case_from_json(j, "x.json"), props::CaseError);
}


// The largest |logit| of a row split into segments and chunks is the whole
// row's: a sentinel key late in a long context sets it.
TEST(ReferenceScoreMax, SegmentsMergeToTheWholeRowsLargestLogit) {
  CaseSpec s = base_spec();
  s.lens = {300, 0, 100};
  s.sentinels = {{0, 290}, {2, 10}};
  props::HostCase c = props::build_case(s);
  const reference::ReferenceResult whole = reference::decode(c.call(), exact());
  reference::ReferenceOptions split;
  split.chunk_tokens = 16;
  split.segment_tokens = 64;
  const reference::ReferenceResult parts = reference::decode(c.call(), exact(), split);
  ASSERT_EQ(whole.score_max.size(), parts.score_max.size());
  for (size_t row = 0; row < whole.score_max.size(); ++row)
    EXPECT_NEAR(parts.score_max[row], whole.score_max[row], 1e-3 * whole.score_max[row]) << row;
  // The sentinel's logit, 290 tokens in (sequence 0's rows: 2 positions x 4 heads).
  EXPECT_GT(*std::max_element(whole.score_max.begin(), whole.score_max.begin() + 8), 20.0f);
}


// ---- caches of 2^31 elements and more ------------------------------------------------

TEST(LargeCache, TheContractAdmitsOneOnlyWhereDeclared) {
  // view_span counts to one past the farthest element.
  TensorView v;
  v.rank = 1;
  v.dtype = DType::bf16;
  v.shape[0] = kernels::kLargeCacheElements - 1;
  v.stride[0] = 1;
  v.data = &v;
  EXPECT_EQ(kernels::view_span(v), kernels::kLargeCacheElements - 1);
  v.shape[0] += 1;
  EXPECT_EQ(kernels::view_span(v), kernels::kLargeCacheElements);
  // An nhd cache of 2^21 pages of 16 x 2 x 32 elements spans 2^31: refused
  // unless declared; one page fewer is admitted either way. (Only the views
  // grow: the contract reads no cache element.)
  const adapters::KernelDescription all = every_format();
  adapters::KernelDescription large = all;
  large.large_cache = true;
  CaseSpec s = base_spec();
  s.layout = CacheLayout::nhd;
  auto pages = [](int64_t n) {
    return [n](kernels::DecodeCall& c) {
      c.k_cache.shape[0] = c.v_cache.shape[0] = n;
    };
  };
  const int64_t edge = kernels::kLargeCacheElements / (16 * 2 * 32);
  EXPECT_EQ(violation(s, all, pages(edge - 1)), "");
  EXPECT_NE(violation(s, all, pages(edge)).find("spans 2147483648 elements, 2^31 or more"), std::string::npos);
  EXPECT_EQ(violation(s, large, pages(edge)), "");
  // A combined tensor counts whole.
  CaseSpec comb = s;
  comb.kv_combined = true;
  auto comb_pages = [](int64_t n) {
    return [n](kernels::DecodeCall& c) {
      c.kv_cache.shape[0] = c.k_cache.shape[0] = c.v_cache.shape[0] = n;
    };
  };
  EXPECT_EQ(violation(comb, all, comb_pages(edge / 2 - 1)), "");
  EXPECT_NE(violation(comb, all, comb_pages(edge / 2)).find("2^31 or more"), std::string::npos);
  // The description's field through JSON.
  EXPECT_EQ(adapters::description_from_json(adapters::to_json(large)), large);
  EXPECT_FALSE(adapters::to_json(all).contains("large_cache"));
}

// A case with low spare blocks puts every used page past element 2^31 and
// gives the reference the same answer as the same values at the cache's start.
TEST(LargeCache, UsedPagesSitPastTwoToTheThirtyOneAndTheReferenceIsUnmoved) {
  CaseSpec s = base_spec();
  s.layout = CacheLayout::nhd;
  s.kv_combined = true;  // one buffer
  s.hkv = 1;
  s.group = 2;
  s.head_dim = 32;
  s.block_size = 16;
  s.cache_dtype = DType::fp8_e4m3fn;
  s.lens = {40, 0, 17};
  const props::HostCase small = props::build_case(s);
  s.low_spare_blocks = props::large_cache_low_blocks(s);
  props::HostCase big = props::build_case(s, true, props::Poison::nan, /*large_cache=*/true);
  const kernels::DecodeCall call = big.call();
  ASSERT_GE(kernels::cache_span(call), kernels::kLargeCacheElements);
  const int64_t page_elems = 2 * 16 * 32;  // K and V halves of one page
  for (int32_t id : big.block_tables) EXPECT_GE(int64_t(id) * page_elems, kernels::kLargeCacheElements) << id;
  const reference::ReferenceResult a = reference::decode(props::HostCase(small).call(), exact());
  const reference::ReferenceResult b = reference::decode(call, exact());
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
  // The low blocks are poisoned at their edges: the first ones (the null
  // block among them) and those right before the used ones read NaN. Between,
  // they are zero and untouched: no page of them is in memory, so a large
  // cache costs what its used blocks do (it cost seconds of page clearing and
  // poisoning per call).
  const int64_t page_bytes = page_elems;  // fp8: a byte an element
  const int64_t low = s.low_spare_blocks;
  ASSERT_GT(low, 2 * props::kLowBlockPoisonBand);
  for (int64_t blk : {int64_t(0), props::kLowBlockPoisonBand - 1, low - props::kLowBlockPoisonBand, low - 1})
    for (int64_t at : {int64_t(0), page_bytes - 1})
      EXPECT_TRUE(std::isnan(double(kernels::fp8_to_f32(big.k[size_t(blk * page_bytes + at)], DType::fp8_e4m3fn))))
          << "block " << blk << " byte " << at;
  // Whole 2 MiB spans between the edges: the memory is advised huge pages, so a
  // write to an edge may bring in the whole 2 MiB around it.
  const uintptr_t page = sysconf(_SC_PAGESIZE), huge = uintptr_t(2) << 20;
  const auto mid_from = (uintptr_t(big.k.data()) + uintptr_t(props::kLowBlockPoisonBand * page_bytes) + huge - 1) /
                        huge * huge;
  const auto mid_to =
      (uintptr_t(big.k.data()) + uintptr_t((low - props::kLowBlockPoisonBand) * page_bytes)) / huge * huge;
  ASSERT_GT(mid_to, mid_from + (uintptr_t(1) << 30));
  std::vector<unsigned char> resident((mid_to - mid_from) / page);
  ASSERT_EQ(mincore(reinterpret_cast<void*>(mid_from), mid_to - mid_from, resident.data()), 0);
  EXPECT_EQ(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; }), 0)
      << "pages between the poisoned edges were touched";
  EXPECT_EQ(big.k[size_t(low / 2 * page_bytes)], 0);
  // Case files carry the field; a kernel that does not declare it is never drawn one.
  EXPECT_EQ(props::case_from_json(props::case_to_json(s, {}), "x.json").low_spare_blocks, s.low_spare_blocks);
  adapters::KernelDescription d = every_format();
  EXPECT_FALSE(props::spec_within(s, d));
  d.large_cache = true;
  EXPECT_TRUE(props::spec_within(s, d));
  int drawn = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const CaseSpec g = props::sample(props::gen_kernel_case(d), seed, props::fuzz::case_size(seed));
    if (g.low_spare_blocks == 0) continue;
    ++drawn;
    EXPECT_EQ(g.low_spare_blocks, props::large_cache_low_blocks(g));
    EXPECT_LE(g.lens.size(), 2u);
  }
  EXPECT_GT(drawn, 0);
  d.large_cache = false;
  for (uint64_t seed = 1; seed <= 100; ++seed)
    EXPECT_EQ(props::sample(props::gen_kernel_case(d), seed, props::fuzz::case_size(seed)).low_spare_blocks, 0);
}


// Every element of query head 0 of every row of c has the bits `head0`, and
// at least `share` of the other heads' elements have other bits.
void expect_head0_is(const props::HostCase& c, uint16_t head0, double share) {
  const CaseSpec& s = c.spec;
  const int64_t hq = int64_t(s.hkv) * s.group, D = s.head_dim, rows = int64_t(s.lens.size()) * s.q_len;
  int64_t other_values = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const uint16_t bits = c.q[size_t((r * hq + h) * D + d)];
        if (h == 0) EXPECT_EQ(bits, head0) << r << " " << d;
        else other_values += bits != head0;
      }
  EXPECT_GT(double(other_values), share * double(rows * (hq - 1) * D));
}

// zero_q_head: query head 0 of every row is all zeros (after the extreme
// shift too), the other heads are not; the field survives a case file.
TEST(CaseBuilder, ZeroQHeadZeroesHeadZeroOfEveryRow) {
  for (int extreme : {0, 1}) {
    CaseSpec s = base_spec();
    s.zero_q_head = true;
    s.extreme_logits = extreme;
    expect_head0_is(props::build_case(s), 0, 0.5);
    EXPECT_TRUE(props::case_from_json(props::case_to_json(s, {}), "x.json").zero_q_head);
  }
  EXPECT_FALSE(props::case_from_json(props::case_to_json(base_spec(), {}), "x.json").zero_q_head);
}

// build_case refuses the spec, naming the field first.
void expect_spec_refused(const CaseSpec& s, const std::string& field) {
  try {
    (void)props::build_case(s);
    ADD_FAILURE() << "accepted; expected " << field;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind(field, 0), 0u) << e.what();
  }
}

// constant_q_head: every element of query head 0 of every row is 1 (5 after
// the shift of extreme logits or near ties), the other heads are drawn; never
// with zero_q_head; the field survives a case file.
TEST(CaseBuilder, ConstantQHeadFillsHeadZeroOfEveryRow) {
  for (const auto& [extreme, ties, want] : {std::tuple{0, 0, 1.0f}, {1, 0, 5.0f}, {0, 2, 5.0f}, {0, 1, 1.0f}}) {
    SCOPED_TRACE(fmt::format("extreme {} ties {}", extreme, ties));
    CaseSpec s = base_spec();
    s.constant_q_head = true;
    s.extreme_logits = extreme;
    s.logit_ties = ties;
    expect_head0_is(props::build_case(s), kernels::f32_to_bf16(want), 0.9);
    EXPECT_TRUE(props::case_from_json(props::case_to_json(s, {}), "x.json").constant_q_head);
  }
  EXPECT_FALSE(props::case_from_json(props::case_to_json(base_spec(), {}), "x.json").constant_q_head);
  CaseSpec both = base_spec();
  both.constant_q_head = both.zero_q_head = true;
  expect_spec_refused(both, "constant_q_head: ");
}

// logit_ties 1: every row's logits tie exactly (one key per sequence and KV
// head, its scale too), in every cache dtype and scale kind. 2: they sit
// within a few units of each other (but not all equal) at an offset of at
// least 8 sqrt(D). Either way pav's reference agrees with the long-double
// model there, and the field survives a case file; 0 draws spread logits.
TEST(LogitTies, EveryRowsLogitsTieOrNearTieAndTheReferenceFollows) {
  for (const int ties : {0, 1, 2})
    for (DType t : {DType::fp8_e4m3fn, DType::fp8_e5m2, DType::bf16, DType::f16})
      for (ScaleKind k : {ScaleKind::per_tensor, ScaleKind::none, ScaleKind::per_head, ScaleKind::per_token}) {
        SCOPED_TRACE(fmt::format("ties {} {} {}", ties, kernels::to_string(t), kernels::to_string(k)));
        CaseSpec s = base_spec();
        s.layout = CacheLayout::nhd;
        s.cache_dtype = t;
        s.scales = k;
        s.lens = {300, 0, 33};
        s.logit_ties = ties;
        if (ties == 2) s.softmax_scale = props::near_tie_scale(s.head_dim, k);
        props::HostCase c = props::build_case(s);
        int64_t rows = 0;
        for (int64_t b = 0; b < int64_t(s.lens.size()); ++b)
          for (int64_t p = 0; p < s.q_len; ++p)
            for (int64_t head = 0; head < int64_t(s.hkv) * s.group; ++head) {
              const std::vector<long double> x = row_logits(c, b, p, head);
              if (x.size() < 30) continue;
              ++rows;
              const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
              const long double spread = *hi - *lo;
              if (ties == 1) {
                EXPECT_EQ(spread, 0.0L) << b << " " << p << " " << head;
              }
              if (ties == 2) {
                EXPECT_GT(spread, 0.0L) << b << " " << p << " " << head;
                EXPECT_LT(spread, 16.0L) << b << " " << p << " " << head;
                EXPECT_GT(*lo, 8.0L * std::sqrt((long double)s.head_dim)) << b << " " << p << " " << head;
              }
              if (ties == 0) {
                EXPECT_GT(spread, 1.0L) << b << " " << p << " " << head;
              }
            }
        EXPECT_GT(rows, 0);
        const reference::ReferenceResult r = reference::decode(c.call(), exact());
        const std::vector<long double> want = model(c);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_LE(std::fabs((long double)r.out[i] - want[i]), 1e-4L * (1.0L + std::fabs(want[i]))) << i;
        EXPECT_EQ(props::case_from_json(props::case_to_json(s, {}), "x.json").logit_ties, ties);
      }
  CaseSpec both = base_spec();
  both.logit_ties = 2;
  both.extreme_logits = 1;
  expect_spec_refused(both, "logit_ties: ");
}

// A large case's low blocks follow its page size through every edit: a reject
// move or a shrink to a larger page keeps the used pages just past 2^31 (with
// the old count they would ask for many times the memory: a false FAIL of the
// reject property, seen on the H200), a smaller page keeps them past it.
TEST(LargeCache, LowBlocksFollowThePageThroughMovesAndShrinks) {
  CaseSpec s = base_spec();
  s.layout = CacheLayout::nhd;
  s.hkv = 1;
  s.group = 3;
  s.head_dim = 256;
  s.block_size = 2;
  s.row_pad = 64;
  s.page_pad = 16;
  s.cache_dtype = DType::fp8_e4m3fn;
  s.lens = {1};
  s.low_spare_blocks = props::large_cache_low_blocks(s);
  EXPECT_NO_THROW(props::check_case_spec(s, true, /*large_cache=*/true));
  for (int block : {18, 1, 256}) {
    CaseSpec m = s;
    m.block_size = block;
    props::fit_derived_fields(m);
    EXPECT_EQ(m.low_spare_blocks, props::large_cache_low_blocks(m)) << block;
    EXPECT_NO_THROW(props::check_case_spec(m, true, /*large_cache=*/true)) << block;
  }
  adapters::KernelDescription d = every_format();
  d.large_cache = true;
  int large = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    const props::RejectCase r = props::sample(props::gen_reject_case(d), seed, props::fuzz::case_size(seed));
    if (r.spec.low_spare_blocks == 0) continue;
    ++large;
    EXPECT_EQ(r.spec.low_spare_blocks, props::large_cache_low_blocks(r.spec)) << "seed " << seed << " moved " << r.moved;
    EXPECT_NO_THROW(props::check_case_spec(r.spec, true, /*large_cache=*/true)) << "seed " << seed << " moved " << r.moved;
  }
  EXPECT_GT(large, 0);
}

// The reject property reaches an MLA kernel's own move: calls of an undeclared
// split of its head dim, which the contract refuses.
TEST(KernelGeneration, RejectCasesReachAnUndeclaredMlaSplit) {
  const adapters::KernelDescription d = every_format();
  int reached = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const props::RejectCase r = props::sample(props::gen_reject_case(d), seed, props::fuzz::case_size(seed));
    if (r.moved != "mla_dims") continue;
    ++reached;
    EXPECT_NE(violation(r.spec, d).find("not in mla_dims"), std::string::npos) << "seed " << seed;
  }
  // These 300 draws reach it 20 times; left to the uniform choice of a move, 5.
  EXPECT_GE(reached, 12);
}

}  // namespace

// null_block: block 0 is poisoned and no sequence's page; every table entry
// past a sequence's pages (and an empty CSR list's one page) is 0; the used
// blocks are those after it, each once. Without it the used blocks start at 0
// (block 0 is live) and the padding points past them. The field survives a
// case file, and the reference is the same either way.
TEST(CaseBuilder, TheNullBlockIsPoisonedAndPadsTheTables) {
  for (const PageTable table : {PageTable::block_table, PageTable::csr}) {
    for (const bool null_block : {false, true}) {
      CaseSpec s = base_spec();
      s.layout = CacheLayout::nhd;
      s.cache_dtype = DType::bf16;
      s.page_table = table;
      s.null_block = null_block;
      const props::HostCase c = props::build_case(s);
      SCOPED_TRACE(std::string(kernels::to_string(table)) + (null_block ? ", null block" : ", no null block"));
      const int64_t B = int64_t(s.lens.size()), per_block = int64_t(s.block_size) * s.hkv * s.head_dim;
      std::multiset<int32_t> used;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t pages = (int64_t(s.lens[size_t(b)]) + s.block_size - 1) / s.block_size;
        for (int64_t i = 0; i < c.max_blocks; ++i) {
          const int32_t id = c.block_tables[size_t(b * c.max_blocks + i)];
          if (i < pages) {
            used.insert(id);
          } else if (null_block) {
            EXPECT_EQ(id, 0) << "seq " << b << " entry " << i;
          } else {
            EXPECT_NE(id, 0) << "seq " << b << " entry " << i;
          }
        }
      }
      EXPECT_EQ(used.count(0), null_block ? 0u : 1u);  // block 0 live exactly when there is no null block
      EXPECT_EQ(int64_t(std::set<int32_t>(used.begin(), used.end()).size()), int64_t(used.size()));
      EXPECT_EQ(*used.rbegin(), int32_t(used.size()) - (null_block ? 0 : 1));
      int64_t finite_in_block0 = 0;
      for (int64_t i = 0; i < per_block; ++i)
        for (const props::CacheBytes* buf : {&c.k, &c.v})
          finite_in_block0 += !std::isnan(element(DType::bf16, &(*buf)[size_t(2 * i)]));
      if (null_block) {
        EXPECT_EQ(finite_in_block0, 0);
      } else {
        EXPECT_GT(finite_in_block0, 0);
      }
      if (table == PageTable::csr) {  // the lists are the tables' pages: block 0 among them only when it is live
        ASSERT_EQ(c.kv_indptr.size(), size_t(B + 1));
        EXPECT_EQ(std::count(c.kv_indices.begin(), c.kv_indices.end(), 0), null_block ? 0 : 1);
      }
      EXPECT_EQ(props::case_from_json(props::case_to_json(s, {}), "x.json").null_block, null_block);
      EXPECT_EQ(props::case_to_json(s, {}).contains("null_block"), null_block);  // written only when set
    }
  }
  // The same call with and without the null block: the same reference.
  CaseSpec s = base_spec();
  s.layout = CacheLayout::hnd;
  props::HostCase plain = props::build_case(s);
  s.null_block = true;
  props::HostCase with_null = props::build_case(s);
  EXPECT_EQ(reference::decode(plain.call()).out, reference::decode(with_null.call()).out);
  // Inline block tables place the blocks themselves.
  s.block_tables = plain.block_tables;
  EXPECT_THROW((void)props::build_case(s), std::invalid_argument);
}

// The GQA ratios rare in engines' tilings (above 16, not a power of two) are
// drawn often when declared, in cheap runs too; a kernel that declares none
// is never sent one.
TEST(KernelGeneration, RareGqaRatiosAreWeightedUp) {
  adapters::KernelDescription d = every_format();
  d.gqa_ratios = {1, 2, 4, 8, 16, 20, 48};
  adapters::canonicalize(d);
  EXPECT_EQ(props::rare_gqa_ratios(d), (std::vector<int64_t>{20, 48}));
  for (const bool tiny : {false, true}) {
    props::DecodeGenLimits lim;
    if (tiny) lim.max_total_tokens = 2000;
    const rc::Gen<CaseSpec> gen = props::gen_kernel_case(d, lim);
    std::map<int, int> drawn;
    constexpr int kDraws = 300;
    for (uint64_t seed = 1; seed <= kDraws; ++seed) ++drawn[props::sample(gen, seed, props::fuzz::case_size(seed)).group];
    const int rare = drawn[20] + drawn[48];
    std::string seen;
    for (const auto& [g, n] : drawn) seen += " G" + std::to_string(g) + ":" + std::to_string(n);
    // Weight 2 of 7 (of 6 in tiny runs): about 86 (100) of 300; at least 1 in 6.
    EXPECT_GE(rare, kDraws / 6) << (tiny ? "tiny:" : "default:") << seen;
    EXPECT_GT(drawn[20], 0) << seen;
    EXPECT_GT(drawn[48], 0) << seen;
  }
  d.gqa_ratios = {1, 2, 4, 8, 16};
  adapters::canonicalize(d);
  EXPECT_TRUE(props::rare_gqa_ratios(d).empty());
  for (uint64_t seed = 1; seed <= 60; ++seed)
    EXPECT_LE(props::sample(props::gen_kernel_case(d), seed, props::fuzz::case_size(seed)).group, 16);
}
