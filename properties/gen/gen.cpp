// SPDX-License-Identifier: Apache-2.0
#include "properties/gen/gen.hpp"

#include <algorithm>

namespace pav::props {

using namespace pav::kernels;

const std::vector<int32_t>& boundary_lengths() {
  static const std::vector<int32_t> v = {0,   1,   2,   3,   4,    255,  256,  257,  258,  259,   511,   512,
                                         513, 514, 515, 2303, 2304, 2305, 2306, 2307, 4099, 65537, 200003};
  return v;
}

rc::Gen<int32_t> gen_plan_length() {
  return rc::gen::weightedOneOf<int32_t>({
      {4, rc::gen::elementOf(boundary_lengths())},
      {4, rc::gen::inRange<int32_t>(1, 8193)},
      {3, rc::gen::mapcat(rc::gen::inRange(0, 31), [](int bits) {
         // log-uniform: a random value in [2^bits, 2^(bits+1)), capped at INT32_MAX
         const int64_t lo = int64_t(1) << bits;
         const int64_t hi = std::min<int64_t>(2 * lo, INT32_MAX);
         return rc::gen::inRange<int32_t>(int32_t(lo), int32_t(std::max(hi, lo + 1)));
       })},
      {1, rc::gen::element<int32_t>(INT32_MAX, INT32_MAX - 1, 1 << 30)},
      {1, rc::gen::element<int32_t>(0, -1, -256, INT32_MIN)},
  });
}

rc::Gen<std::vector<int32_t>> gen_plan_lengths(int max_batch) {
  return rc::gen::mapcat(rc::gen::weightedOneOf<int>({{6, rc::gen::inRange(1, std::min(max_batch, 64) + 1)},
                                                      {1, rc::gen::inRange(1, max_batch + 1)}}),
                         [](int n) { return rc::gen::container<std::vector<int32_t>>(n, gen_plan_length()); });
}

rc::Gen<int32_t> gen_decode_length(bool allow_long) {
  std::vector<int32_t> b;
  for (int32_t x : boundary_lengths())
    if (allow_long || x <= 4099) b.push_back(x);
  return rc::gen::weightedOneOf<int32_t>({
      {5, rc::gen::elementOf(b)},
      {3, rc::gen::inRange<int32_t>(1, 1200)},
      {1, rc::gen::inRange<int32_t>(1200, 6000)},
      {1, rc::gen::element<int32_t>(0, -5)},
  });
}

std::vector<Sentinel> boundary_sentinels(const std::vector<int32_t>& lens) {
  std::vector<Sentinel> s;
  for (int64_t b = 0; b < int64_t(lens.size()); ++b) {
    const int64_t len = lens[b];
    if (len <= 0) continue;
    s.push_back({b, len - 1});
    for (int64_t t = kTileTokens; t < len && s.size() < 64; t += kTileTokens * 3) s.push_back({b, t - 1});
  }
  return s;
}

rc::Gen<CaseSpec> gen_decode_case(DecodeGenLimits lim) {
  return rc::gen::exec([lim]() {
    CaseSpec s;
    const int batch = *rc::gen::inRange(1, lim.max_batch + 1);
    int64_t total = 0;
    bool had_long = false;
    for (int i = 0; i < batch; ++i) {
      int32_t len = *gen_decode_length(lim.allow_long && !had_long);
      if (len > 6000) had_long = true;
      if (total + std::max<int32_t>(len, 0) > lim.max_total_tokens && len > 6000) len = 4099;
      total += std::max<int32_t>(len, 0);
      s.lens.push_back(len);
    }
    s.q_len = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(1)}, {1, rc::gen::inRange(2, 5)}});
    s.hkv = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(1)}, {1, rc::gen::inRange(2, 4)}});
    s.group = *rc::gen::weightedOneOf<int>({{2, rc::gen::inRange(1, 9)}, {1, rc::gen::inRange(9, 18)}});
    s.head_dim = *rc::gen::weightedOneOf<int>({{2, rc::gen::just(64)}, {4, rc::gen::just(128)}, {1, rc::gen::just(256)}});
    s.block_size = *rc::gen::element(16, 64, 128);
    s.v_layout = *rc::gen::element(VLayout::plain, VLayout::trans);
    s.q_dtype = *rc::gen::element(DType::bf16, DType::f16);
    s.opt.arch = *rc::gen::weightedOneOf<Arch>({{3, rc::gen::just(Arch::sm90)}, {1, rc::gen::just(Arch::gfx942)},
                                                {1, rc::gen::just(Arch::gfx950)}});
    s.cache_dtype = arch_fp8(s.opt.arch);
    s.opt.compute = s.cache_dtype;
    s.opt.partial = *rc::gen::element(DType::bf16, DType::f32);
    s.scales = *rc::gen::element(ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_token);
    s.opt.cu = *rc::gen::element(8, 32, 132, 256);
    s.path = *rc::gen::element(Path::planned, Path::uniform);
    s.max_partitions = *rc::gen::weightedOneOf<int64_t>({{3, rc::gen::just<int64_t>(0)},
                                                          {1, rc::gen::inRange<int64_t>(1, s.opt.cu + 1)}});
    if (s.path == Path::uniform)
      s.opt.uniform_partitions = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(0)}, {1, rc::gen::inRange(1, 65)}});
    s.q_row_pad = *rc::gen::weightedOneOf<int64_t>({{4, rc::gen::just<int64_t>(0)}, {1, rc::gen::just<int64_t>(64)}});
    s.spare_blocks = *rc::gen::inRange<int64_t>(1, 3);
    s.seed = *rc::gen::arbitrary<uint32_t>();
    if (*rc::gen::weightedOneOf<bool>({{2, rc::gen::just(true)}, {1, rc::gen::just(false)}}))
      s.sentinels = boundary_sentinels(s.lens);
    return s;
  });
}

}  // namespace pav::props
