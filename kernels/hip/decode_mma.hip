// SPDX-License-Identifier: Apache-2.0
// The matrix-unit attention body (decode_common.hpp lists the decode files).
// Per partition (tiles [tile0, tile1) of one sequence, KV head h), query row r, visible token t:
//   S^T[t, r] = K8[t, :] . Q8[r, :]   on the tensor cores, then s = S * q_scale_r * softmax_scale * k_scale_t
//   per 256-token tile: m' = max(m, max_t s), a = exp(m - m'), p_t = exp(s_t - m'), l' = a l + sum_t p_t
//   O^T[:, r] = a O^T[:, r] + V8^T[:, t] . P8^T[t, r]   on the tensor cores, P8 = fp8(p * FP8_MAX)
//   stores m, l and O * v_scale / (FP8_MAX * l), the partial (or the output when one partition covers it)
// NVIDIA builds only: the body is written for its tensor cores.
#include "kernels/hip/decode_common.hpp"
#include <atomic>
#include <type_traits>
#if defined(PAV_HIP_NVIDIA)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif
#if !defined(PAV_HIP_NVIDIA)
#error "decode_mma.hip is built for NVIDIA only"
#endif

namespace pav::kernels::gpu {
namespace {

// ---- attention: matrix-unit body (NVIDIA) -------------------------------------------------
// fp8 e4m3fn compute over an e4m3fn cache, head_dim kD in {64, 128, 256}, K and
// V 16-byte aligned, per-tensor (or no) V scale. The numerics are the other
// bodies' (the same tiles, Q and P quantization, masking, running max, partial
// store); the two products run on the tensor cores with the KV tokens on M and
// the query rows of one KV head on N ("swap AB": 8 * kNT rows per pass, so
// G 8 x q_len 4 is one pass over the KV):
//   scores^T[token, row] = K[token, :] . Q[row, :]     (M = 16 tokens, K = 16 dims)
//   out^T[dim, row]     += V^T[dim, :] . P^T[:, row]   (M = 16 dims,   K = 16 tokens)
// Operands are the fp8 codes converted to f16 in registers (every e4m3 value is
// an f16, so the products stay exact) and each instruction starts from a zero
// accumulator: its 16 exact products are summed by the unit and the result is
// added to the fp32 accumulator by an ordinary add. The k order inside an
// instruction is permuted (a sum does not depend on it) so that a lane's four
// k slots {2t, 2t+1, 2t+8, 2t+9} are four consecutive bytes of the cache.
//
// Data movement: whole 256-token tiles of K and of V are copied with cp.async
// into a ring of kSlots tile slots (K of tile 0, V of tile 0, K of tile 1, ...),
// kSlots - 1 tiles' worth in flight while one is consumed. A copy request is
// served at full width only when the eight 16-byte pieces of each quarter warp
// come from one 128-byte run of the cache and land in one 128-byte row of
// shared memory (in any order): the slot layouts below keep the cache's own
// 128-byte runs together as rows and permute 16-byte pieces only inside a
// row. The page of every 16-token chunk is looked up once per tile, two tiles
// ahead, into a small shared table. Bytes past the context are never read: the
// copy fills them with zeros (cp.async's source size), so masked V tokens are
// +0 in shared memory (0 * NaN would poison a masked product).
namespace mma {

constexpr int kChunks = kTileTokens / 16;                  // 16-token chunks per tile (pages hold whole chunks)
constexpr int kChunkRing = 3;                              // tiles whose chunk table is kept (this one, two ahead)
constexpr int kPStride = kTileTokens + 8;                  // f16 per P row: conflict-free B loads

__device__ inline uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
// Copies `bytes` (0..16) from src and fills the rest of the 16 with zeros.
__device__ inline void cp_async16(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes)
               : "memory");
}
// Copies 16 bytes (all of them in the context).
__device__ inline void cp_async16_all(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending committed groups are still in flight.
template <int kPending>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory"); }

// Two e4m3 codes (the low byte first) as one f16x2 register (the low half
// first), exactly.
__device__ inline uint32_t e4m3x2_to_f16x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}

// d += A(16x16 f16, row) * B(16x8 f16, col): the unit sums the accumulator and
// the 16 exact products (pav_mma_probe: an addend down to 2^-23 of the
// accumulator is kept, as in an fp32 add).
__device__ inline void mma_add(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ inline uint32_t word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The 16 head dims (a K group) lane t feeds in pass j of the score product.
template <int kD>
__device__ inline int k_group(int t, int j) {
  if constexpr (kD == 64) return t;
  else return 2 * t + (j & 1) + 8 * (j >> 1);
}
// K slot layout: a 128-byte row per (8-token octet, group) -- the cache's own
// 128-byte runs (8 consecutive tokens of one group) -- at row (token / 8) *
// groups + group; token i of the octet at 16-byte piece i ^ k_swizzle(group).
// A quarter warp of the score reads takes tokens {2q, 2q + 1} of four groups
// whose swizzles are {0, 2, 4, 6}: eight distinct pieces, no bank conflict.
template <int kD>
__device__ inline int k_swizzle(int grp) {
  if constexpr (kD == 64) return 2 * (grp & 3);
  else return 2 * ((grp >> 1) & 3);
}
template <int kD>
__device__ inline int k_offset(int tok, int grp) {
  return (((tok >> 3) * (kD / 16) + grp) << 7) + 16 * ((tok & 7) ^ k_swizzle<kD>(grp));
}
// V slot layout: a 128-byte row per (16-token chunk, 8 dims) -- the cache's
// 128-byte runs in either V layout hold 16 tokens of 8 consecutive dims -- at
// row chunk * (kD / 8) + dim / 8; dim d's 16 tokens at piece (d & 7) ^ 2 (chunk & 3).
template <int kD>
__device__ inline int v_offset(int c, int d) {
  return ((c * (kD / 8) + (d >> 3)) << 7) + 16 * ((d & 7) ^ (2 * (c & 3)));
}

template <int kD>
constexpr int tile_bytes() { return kTileTokens * kD; }

// Ring slots per block: three tiles in flight where two blocks per SM (one at
// head_dim 256) still fit the shared memory, else two.
template <int kD, int kNT>
constexpr int ring_slots() { return kNT >= 3 ? 2 : 3; }

// Chunk c of tile `tile`: its page (block-table entry) and offset in it, or
// not `in` the context.
struct ChunkPage {
  int64_t blk;
  uint32_t off;
  bool in;
};
__device__ inline ChunkPage chunk_page(const Params& p, const int32_t* table, int64_t len, int64_t tile, int c) {
  const int64_t t = tile * kTileTokens + 16 * c;
  ChunkPage cp{0, 0, t < len};
  if (cp.in) {
    uint32_t col;
    page_of(p, uint32_t(t), col, cp.off);
    cp.blk = table[col];
  }
  return cp;
}
// The byte offsets of the chunk's first token in the K and V caches into the
// chunk table, -1 past the context.
template <int kD>
__device__ void write_chunk(const Params& p, int h, const ChunkPage& cp, int c, int64_t* kofs, int64_t* vofs) {
  int64_t ko = -1, vo = -1;
  if (cp.in) {
    const int64_t page = (cp.blk * p.hkv + h) * int64_t(kD) * p.block_size;
    ko = page + int64_t(cp.off) * 16;
    vo = page + (p.v_trans ? int64_t(cp.off) * kD : int64_t(cp.off));
  }
  kofs[c] = ko;
  vofs[c] = vo;
}

// Enqueues the K codes of a tile holding n tokens of the context into a slot:
// piece i of the 16-token chunk c of group grp; tokens past the context are
// zero-filled, never read. Consecutive threads take consecutive tokens of one
// group of one chunk. A thread's token in its chunk and its group are the same
// in every iteration (the block is a multiple of one chunk's 16 x groups
// pieces), so only the chunk's page offset changes from one copy to the next.
template <int kD>
__device__ void issue_k(const Params& p, const int64_t* kofs, int n, uint8_t* slot) {
  constexpr int kNG = kD / 16;
  constexpr int kStep = kThreads / (16 * kNG);  // chunks per round of the block
  static_assert(kStep >= 1 && kThreads % (16 * kNG) == 0, "a round of the block covers whole chunks");
  const int i = threadIdx.x & 15, grp = (threadIdx.x >> 4) % kNG, c0 = (threadIdx.x >> 4) / kNG;
  const uint8_t* const src0 = p.k + int64_t(grp) * p.block_size * 16 + i * 16;
  uint8_t* dst = slot + k_offset<kD>(16 * c0 + i, grp);
  if (n == kTileTokens) {  // a whole tile: no bounds
    uint32_t sdst = smem_addr(dst);
#pragma unroll 2
    for (int c = c0; c < kChunks; c += kStep, sdst += kStep * 2 * kNG * 128) cp_async16_all(sdst, src0 + kofs[c]);
    return;
  }
  // Not unrolled: an unrolled copy loop keeps every iteration's addresses in
  // registers across the whole tile loop. No branch: a copy past the context
  // reads nothing from its (valid) address.
#pragma unroll 1
  for (int c = c0; c < kChunks; c += kStep, dst += kStep * 2 * kNG * 128) {
    const bool in = 16 * c + i < n;
    const int64_t ofs = kofs[c];
    cp_async16(dst, src0 + (in ? ofs : 0), in ? 16u : 0u);
  }
}

// Enqueues the V codes of a tile holding n tokens of the context: dim d of
// chunk c (16 tokens, 16 contiguous bytes in either layout); the bytes of
// tokens past the context are zero-filled. Consecutive threads take
// consecutive dims of one chunk; a thread's dim is the same in every iteration.
template <int kD>
__device__ void issue_v(const Params& p, const int64_t* vofs, int n, uint8_t* slot) {
  constexpr int kStep = kThreads / kD;  // chunks per round of the block
  static_assert(kStep >= 1 && kThreads % kD == 0, "a round of the block covers whole chunks");
  const int d = threadIdx.x % kD, c0 = threadIdx.x / kD;
  const uint8_t* const src0 = p.v + int64_t(d) * (p.v_trans ? 16 : p.block_size);
  if (n == kTileTokens) {  // a whole tile: no bounds
    const uint32_t sslot = smem_addr(slot);
#pragma unroll 2
    for (int c = c0; c < kChunks; c += kStep) cp_async16_all(sslot + v_offset<kD>(c, d), src0 + vofs[c]);
    return;
  }
#pragma unroll 1
  for (int c = c0; c < kChunks; c += kStep) {
    const int rest = n - 16 * c;
    const uint32_t bytes = rest <= 0 ? 0u : rest >= 16 ? 16u : uint32_t(rest);
    const int64_t ofs = vofs[c];
    cp_async16(slot + v_offset<kD>(c, d), src0 + (bytes ? ofs : 0), bytes);
  }
}

// Dynamic shared memory of one block: the ring, P as f16 [rows][kPStride], and
// Q as B fragments [kNT][passes][2][32 lanes] x 16 bytes.
template <int kD, int kNT>
constexpr int smem_bytes() {
  return ring_slots<kD, kNT>() * tile_bytes<kD>() + 8 * kNT * kPStride * 2 + 8 * kNT * kD * 2;
}

template <int kD, int kNT>
__global__ void __launch_bounds__(kThreads, kD <= 128 ? 2 : 1) attend_mma_kernel(const Params p) {
  constexpr int kR = 8 * kNT;                      // query rows per pass
  constexpr int kNJ = kD / 64;                     // 16-byte K reads per token per lane
  constexpr int kMT = kD / 16;                     // 16-dim m tiles of the PV product
  constexpr int kMTw = kMT >= kWarps ? kMT / kWarps : 1;   // m tiles per warp
  constexpr int kSplit = kMT >= kWarps ? 1 : kWarps / kMT; // warps sharing an m tile (by chunk quarters)
  constexpr int kSlots = ring_slots<kD, kNT>();
  static_assert(kWarpSize == 32 && kWarps == 8, "fragment layouts assume 8 warps of 32 lanes");
  static_assert(kNJ >= 1 && kMTw * kWarps == kMT * kSplit, "head_dim 64, 128 or 256");
  static_assert(kSlots >= 2 && kSlots <= kChunkRing, "the chunk table runs kSlots - 1 tiles ahead at most");
  extern __shared__ uint4 smem_raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem_raw);
  uint16_t* p16 = reinterpret_cast<uint16_t*>(ring + kSlots * tile_bytes<kD>());
  uint4* qfrag = reinterpret_cast<uint4*>(p16 + kR * kPStride);
  __shared__ float qscale[kR], row_m[kR], row_l[kR];
  __shared__ int row_end[kR];  // a row sees the tokens t < row_end (causality); 0 past the pass's rows
  __shared__ float redmax[kWarps][kR], redsum[kWarps][kR];
  __shared__ float kscale[kTileTokens];
  __shared__ int64_t chunk_k[kChunkRing][kChunks], chunk_v[kChunkRing][kChunks];
  __shared__ int flag;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane >> 2, t = lane & 3;
  const int64_t slot = blockIdx.x;
  int seq, h;
  int64_t tile0, tile1;
  if (!resolve_work(p, slot, seq, h, tile0, tile1, &flag)) return;
  const int64_t len = p.lens[seq];
  const float epi = epilogue_scale(p);
  const int32_t* table = p.tables + int64_t(seq) * p.tables_s0;
  const bool token_kscale = p.k_scale_kind == kScaleToken;
  const float kscale_all = token_kscale ? 1.0f : scale_at(p.k_scale, p.k_scale_kind, 0, h, 0, p);
  // Tiles of this task that hold tokens: local tiles 0 .. ntl - 1.
  // (int: a context holds fewer than 2^31 tokens.)
  const int ntl = int(max64(0, min64(tile1, ceil_div64(max64(len, 0), kTileTokens)) - tile0));

  // Item j of the ring: K (even j) or V (odd j) of local tile j / 2, in slot j % kSlots.
  auto issue_item = [&](int j) {
    const int lt = j >> 1;
    if (lt < ntl) {
      const int n = int(min64(kTileTokens, len - (tile0 + lt) * kTileTokens));
      uint8_t* dst = ring + (j % kSlots) * tile_bytes<kD>();
      const int e = lt % kChunkRing;
      if (j & 1) issue_v<kD>(p, chunk_v[e], n, dst);
      else issue_k<kD>(p, chunk_k[e], n, dst);
    }
    cp_async_commit();  // empty past the last tile: the wait counts stay uniform
  };

  for (int r0 = 0; r0 < p.rows; r0 += kR) {
    const int nr = min(kR, p.rows - r0);
    __syncthreads();  // the previous pass is done with shared memory
    if (tid < 2 * kChunks && tid / kChunks < ntl)
      write_chunk<kD>(p, h, chunk_page(p, table, len, tile0 + tid / kChunks, tid % kChunks), tid % kChunks,
                      chunk_k[tid / kChunks], chunk_v[tid / kChunks]);
    // Q: padding rows of the last n tile stay zero, their scale too (their
    // scores are 0 and never reach a stored value).
    for (int i = tid; i < kR * kD / 8; i += kThreads) qfrag[i] = make_uint4(0, 0, 0, 0);
    if (tid < kR) {
      row_end[tid] = tid < nr ? int(max64(0, len - p.q_len + 1 + (r0 + tid) / p.group)) : 0;
      if (tid >= nr) qscale[tid] = 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kSlots; ++j) issue_item(j);
    quantize_q_rows(p, seq, h, r0, nr, qscale, row_m, row_l, [&](int r, int d, float v) {
      const int grp = d / 16, low = grp & 7;
      const int tq = kD == 64 ? grp : low >> 1;
      const int jq = kD == 64 ? 0 : (low & 1) + 2 * (grp >> 3);
      const int at = ((((r / 8) * kNJ + jq) * 2 + (d % 16) / 8) * 32 + (r % 8) * 4 + tq) * 8 + d % 8;
      reinterpret_cast<__half*>(qfrag)[at] = __float2half_rn(v);  // exact: v is an e4m3 value
    });

    float o[kMTw][kNT][4];
#pragma unroll
    for (int mi = 0; mi < kMTw; ++mi)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mi][nt][e] = 0.0f;

    for (int lt = 0; lt < ntl; ++lt) {
      const int64_t t0 = (tile0 + lt) * kTileTokens;
      const int n = int(min64(kTileTokens, len - t0));
      // The chunk table two tiles ahead: the block-table entries are loaded
      // here and written after this tile's V barrier (the load's latency hides
      // behind the scores); their first reader issues copies after this
      // tile's last barrier. The ring entry was last read for tile lt - 1.
      const bool ahead = tid < kChunks && lt + 2 < ntl;
      const ChunkPage ahead_page = ahead ? chunk_page(p, table, len, tile0 + lt + 2, tid) : ChunkPage{0, 0, false};
      if (token_kscale && tid < n) {
        uint32_t col, off;
        page_of(p, uint32_t(t0 + tid), col, off);
        kscale[tid] = scale_at(p.k_scale, p.k_scale_kind, table[col], h, off, p);
      }
      // This lane's rows 8nt + 2t + c: their scales, and their visible counts
      // read from shared memory where used (t0 < len < 2^31; no registers held
      // across the tile). A full tile (every row sees every token: row 0 sees
      // the fewest) needs no token mask.
      float qs_r[kNT][2];
      const auto vis_r = [&](int nt, int c) { return min(n, row_end[8 * nt + 2 * t + c] - int(t0)); };
      const bool full = n == kTileTokens && row_end[0] - int(t0) >= kTileTokens;
      cp_async_wait<kSlots - 1>();  // this tile's K
      __syncthreads();
      const uint8_t* kst = ring + ((2 * lt) % kSlots) * tile_bytes<kD>();
      const uint8_t* vst = ring + ((2 * lt + 1) % kSlots) * tile_bytes<kD>();

      // Scores: warp w takes tokens 32w .. 32w + 31.
      float s[2][kNT][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
      {
        // One pass over a lane's groups at a time: unrolling the passes would
        // hold every pass's K and Q fragments in registers at once.
#pragma unroll 1
        for (int j = 0; j < kNJ; ++j) {
          const int grp = k_group<kD>(t, j);
          uint4 ka[2][2];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
              ka[mt][hf] = *reinterpret_cast<const uint4*>(kst + k_offset<kD>(32 * warp + 16 * mt + 8 * hf + g, grp));
          // Q fragments half a pass at a time (s4 = 2hf, 2hf + 1).
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            uint4 qb[kNT];
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) qb[nt] = qfrag[((nt * kNJ + j) * 2 + hf) * 32 + lane];
#pragma unroll
            for (int s4 = 2 * hf; s4 < 2 * hf + 2; ++s4)
#pragma unroll
              for (int mt = 0; mt < 2; ++mt) {
                const uint32_t wlo = word_of(ka[mt][0], s4), whi = word_of(ka[mt][1], s4);
                const uint32_t a0 = e4m3x2_to_f16x2(wlo), a1 = e4m3x2_to_f16x2(whi);
                const uint32_t a2 = e4m3x2_to_f16x2(wlo >> 16), a3 = e4m3x2_to_f16x2(whi >> 16);
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt)
                  mma_add(s[mt][nt], a0, a1, a2, a3, word_of(qb[nt], 2 * (s4 & 1)), word_of(qb[nt], 2 * (s4 & 1) + 1));
              }
          }
        }
      }

      // Online softmax of the tile on the fragments: element e of (mt, nt) is
      // token 32w + 16mt + g + 8(e >> 1), row 8nt + 2t + (e & 1).
      float rmax[kNT][2];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          qs_r[nt][c] = qscale[8 * nt + 2 * t + c];
          rmax[nt][c] = neg_inf();
        }
      // The two loops over the fragments below, once with the token mask and
      // once without (full tiles).
      const auto scale_max = [&](auto masked) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int tok = 32 * warp + 16 * mt + g + 8 * (e >> 1);
              const float v = s[mt][nt][e] * qs_r[nt][e & 1] * (token_kscale ? kscale[tok] : kscale_all);
              s[mt][nt][e] = v;
              if (!decltype(masked)::value || tok < vis_r(nt, e & 1)) rmax[nt][e & 1] = fmaxf(rmax[nt][e & 1], v);
            }
      };
      if (full) scale_max(std::false_type{});
      else scale_max(std::true_type{});
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float v = rmax[nt][c];
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
          if (g == 0) redmax[warp][8 * nt + 2 * t + c] = v;
        }
      __syncthreads();  // every warp is done with this tile's K slot; the maxima are in
      issue_item(2 * lt + kSlots);
      // Every lane derives its own rows' new max and rescale factor (the same
      // values in every lane: no further barrier). A row that sees no token of
      // this tile keeps its max and sum.
      float mnew_r[kNT][2], alpha_r[kNT][2], lsum[kNT][2];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int r = 8 * nt + 2 * t + c;
          mnew_r[nt][c] = 0.0f;
          alpha_r[nt][c] = 1.0f;
          lsum[nt][c] = 0.0f;
          if (vis_r(nt, c) > 0) {
            const float m_old = row_m[r];
            float tmax = redmax[0][r];
#pragma unroll
            for (int w2 = 1; w2 < kWarps; ++w2) tmax = fmaxf(tmax, redmax[w2][r]);
            const float m_new = fmaxf(m_old, tmax);
            mnew_r[nt][c] = m_new;
            alpha_r[nt][c] = m_old == neg_inf() ? 0.0f : expf(m_old - m_new);
          }
        }
      const auto weights = [&](auto masked) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int tok = 32 * warp + 16 * mt + g + 8 * (e >> 1), row = 8 * nt + 2 * t + (e & 1);
              uint16_t w = 0;
              if (!decltype(masked)::value || tok < vis_r(nt, e & 1)) {
                const float pt = expf(s[mt][nt][e] - mnew_r[nt][e & 1]);
                lsum[nt][e & 1] += pt;
                w = __nv_cvt_fp8_to_halfraw(__nv_cvt_float_to_fp8(pt * p.fp8_max, __NV_SATFINITE, __NV_E4M3), __NV_E4M3).x;
              }
              p16[row * kPStride + tok] = w;
            }
      };
      if (full) weights(std::false_type{});
      else weights(std::true_type{});
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float v = lsum[nt][c];
          v += __shfl_xor_sync(0xffffffffu, v, 4);
          v += __shfl_xor_sync(0xffffffffu, v, 8);
          v += __shfl_xor_sync(0xffffffffu, v, 16);
          if (g == 0) redsum[warp][8 * nt + 2 * t + c] = v;
        }
      cp_async_wait<kSlots - 1>();  // this tile's V (later tiles may still fly)
      __syncthreads();
      if (ahead) write_chunk<kD>(p, h, ahead_page, tid, chunk_k[(lt + 2) % kChunkRing], chunk_v[(lt + 2) % kChunkRing]);
      // The running max and sum, written once per row (warp 0 holds every row
      // in its lanes g == 0); every lane has read row_m above.
      if (warp == 0 && g == 0) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int r = 8 * nt + 2 * t + c;
            if (vis_r(nt, c) > 0) {
              float sum = 0.0f;
              for (int w2 = 0; w2 < kWarps; ++w2) sum += redsum[w2][r];
              row_l[r] = row_l[r] * alpha_r[nt][c] + sum;
              row_m[r] = mnew_r[nt][c];
            }
          }
      }

      // PV: warp w owns dim m tiles (and, at D 64, half of the chunks).
#pragma unroll
      for (int mi = 0; mi < kMTw; ++mi)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[mi][nt][e] *= alpha_r[nt][e & 1];
      constexpr int kQuartersPerWarp = 4 / kSplit;  // 64-token quarters of the tile
#pragma unroll
      for (int qs = 0; qs < kQuartersPerWarp; ++qs) {
        const int q = (warp / (kWarps / kSplit)) * kQuartersPerWarp + qs;
        const int c = 4 * q + t;  // this lane's chunk: tokens 16c .. 16c + 15
        uint4 pb[kNT][2];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
            pb[nt][hf] = *reinterpret_cast<const uint4*>(p16 + (8 * nt + g) * kPStride + 16 * c + 8 * hf);
#pragma unroll
        for (int mi = 0; mi < kMTw; ++mi) {
          const int mtile = kSplit == 1 ? warp * kMTw + mi : warp % kMT;
          const int d0 = 16 * mtile + g, d1 = d0 + 8;
          const uint4 va = *reinterpret_cast<const uint4*>(vst + v_offset<kD>(c, d0));
          const uint4 vb = *reinterpret_cast<const uint4*>(vst + v_offset<kD>(c, d1));
#pragma unroll
          for (int s4 = 0; s4 < 4; ++s4) {
            const uint32_t wa = word_of(va, s4), wb = word_of(vb, s4);
            const uint32_t a0 = e4m3x2_to_f16x2(wa), a1 = e4m3x2_to_f16x2(wb);
            const uint32_t a2 = e4m3x2_to_f16x2(wa >> 16), a3 = e4m3x2_to_f16x2(wb >> 16);
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
              mma_add(o[mi][nt], a0, a1, a2, a3, word_of(pb[nt][s4 >> 1], 2 * (s4 & 1)),
                      word_of(pb[nt][s4 >> 1], 2 * (s4 & 1) + 1));
          }
        }
      }
      __syncthreads();  // the V slot and P are consumed
      issue_item(2 * lt + 1 + kSlots);
    }
    cp_async_wait<0>();
    __syncthreads();

    // Warps that shared an m tile by chunk quarters add their sums (D 64).
    if constexpr (kSplit > 1) {
      float* part = reinterpret_cast<float*>(ring);
      if (warp >= kWarps / kSplit) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) part[(((warp - kWarps / kSplit) * kNT + nt) * 4 + e) * 32 + lane] = o[0][nt][e];
      }
      __syncthreads();
      if (warp < kWarps / kSplit) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[0][nt][e] += part[((warp * kNT + nt) * 4 + e) * 32 + lane];
      }
    }
    if (kSplit == 1 || warp < kWarps / kSplit) {
#pragma unroll
      for (int mi = 0; mi < kMTw; ++mi)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = 8 * nt + 2 * t + (e & 1);
            const int mtile = kSplit == 1 ? warp * kMTw + mi : warp % kMT;
            const int d = 16 * mtile + g + 8 * (e >> 1);
            if (row < nr) store_row_value(p, seq, h, slot, r0 + row, d, o[mi][nt][e], row_l[row], epi);
          }
    }
    if (!p.direct && tid < nr) {
      p.m[slot * p.rows + r0 + tid] = row_m[tid];
      p.l[slot * p.rows + r0 + tid] = row_l[tid];
    }
  }
}

}  // namespace mma

template <int kD, int kNT>
void launch_mma_shape(const Params& p, unsigned grid, hipStream_t s) {
  constexpr int bytes = mma::smem_bytes<kD, kNT>();
  // The dynamic shared-memory limit is raised once per device.
  static std::atomic<uint64_t> raised{0};
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const uint64_t bit = uint64_t(1) << (dev & 63);
  if (!(raised.load() & bit)) {
    check(cudaFuncSetAttribute(mma::attend_mma_kernel<kD, kNT>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "matrix-unit attention: shared-memory limit");
    // All of the unified L1/shared storage as shared memory: two blocks of a
    // three-tile ring need nearly all of it.
    check(cudaFuncSetAttribute(mma::attend_mma_kernel<kD, kNT>, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared)),
          "matrix-unit attention: shared-memory carveout");
    raised.fetch_or(bit);
  }
  mma::attend_mma_kernel<kD, kNT><<<grid, kThreads, bytes, s>>>(p);
}

}  // namespace

template <int kNT>
void launch_mma_rows(const Params& p, unsigned grid, hipStream_t s) {
  switch (p.head_dim) {
    case 64: launch_mma_shape<64, kNT>(p, grid, s); break;
    case 128: launch_mma_shape<128, kNT>(p, grid, s); break;
    default: launch_mma_shape<256, kNT>(p, grid, s); break;
  }
}

template void launch_mma_rows<1>(const Params& p, unsigned grid, hipStream_t s);
template void launch_mma_rows<2>(const Params& p, unsigned grid, hipStream_t s);
template void launch_mma_rows<3>(const Params& p, unsigned grid, hipStream_t s);
template void launch_mma_rows<4>(const Params& p, unsigned grid, hipStream_t s);

}  // namespace pav::kernels::gpu
