#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A plain NumPy paged-attention decode, run by pav as a worker:

    pav verify --kernel exec:'python3 examples/workers/numpy_decode.py'

It reads the K/V cache in the format pav sends it, without converting it:
every layout (packed with plain or trans V, nhd, hnd), K and V apart, in one
combined tensor or (MLA) as one latent cache whose keys' first dims are the
values (512 + 64 and 128 + 64), pages through block tables or CSR lists (kv_indptr,
kv_indices, kv_last_page_len), any page size it lists down to 1 (token-level
pages), every cache dtype (bf16, f16 and the fp8 flavours e4m3fn, e4m3fnuz and
e5m2, decoded through pav_worker's tables), and K and V scales of any kind
(none, per tensor, per KV head, per token), each its own. It computes exact
softmax attention in float32: Q is not quantized and the softmax weights are
not rounded (numerics profile `none`). Long contexts are streamed in chunks of
pages with an online softmax.

It declares every attention variant (docs/verify-your-kernel.md, "Attention
variants"): the soft cap and the ALiBi bias transform the scaled logits before
masking, the sliding window narrows each row's visible keys (pages before every
row's window are not read), and a sink joins the softmax denominator after the
last chunk. --lse-base 2 writes lse in log2 and describes it so. --p-round fp8
rounds the softmax weights to the cache's e4m3 flavour as they are, without the
FP8_MAX scale, as some Triton decodes do, and declares that profile
(the defect p-fp8-undeclared rounds so while declaring none: pav must fail it).
--q-quant fp8_per_row quantizes each query head vector to the cache's e4m3
flavour with a per-row scale (profile q_quant fp8_per_row; the defect
q-scale-unguarded drops the scale's 1e-20 floor). --partial DTYPE splits each row's context into partitions of --split-tokens
tokens (rounded up to whole pages), stores each partition's normalized output
in DTYPE (f32, bf16, f16 or an fp8 flavour) and merges them by log-sum-exp,
as a split-KV kernel does, and declares that partial dtype. Partitions keep
their slots in scratch between calls, as a split-KV kernel keeps its
partials buffer; the worker declares that scratch (`"scratch": true`) and
fills it with NaN when pav asks before each call (--no-scratch-poison: it
does not declare it, and a read of a stale slot shows only after the call
that left it).

--defect NAME injects one realistic bug (--list-defects prints them), so pav's
fuzzing can be seen to find, shrink and save it. Each format defect changes
the output only on calls in that format.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pav_worker  # noqa: E402

DEFECTS = {
    "causal-off-by-one": "MTP mask uses <= instead of <: at q_len > 1 a row also sees the next position's token",
    "drop-last-partial-page": "pages counted as len // block_size: the tokens of a last, partly filled page are skipped",
    "scale-wrong-head": "per-token K/V scales read for KV head 0 whatever the head",
    "gqa-interleaved": "query head h read against KV head h % Hkv instead of h // G",
    "window-edge-off-by-one": "sliding window admits key pos - window_left - 1 too: one key past the window's left edge",
    "soft-cap-after-mask": "soft cap applied after masking: masked logits (-1e30) come out at -soft_cap and get weight",
    "sink-not-in-denominator": "attention sinks ignored: exp(sink) left out of the softmax denominator and the lse",
    "csr-last-page-full": "CSR lists: the last page read whole, kv_last_page_len ignored (len = pages * page_size)",
    "hnd-read-as-nhd": "an hnd cache indexed as nhd: each page read as [page_size, Hkv, D], head and slot swapped",
    "e5m2-as-e4m3": "fp8 e5m2 codes decoded with the e4m3fn table",
    "combined-v-from-k": "combined K/V tensor: V read from the K half ([:, 0]) instead of [:, 1]",
    "per-head-scale-head-0": "per-head K/V scales read for KV head 0 whatever the head",
    "p-fp8-undeclared": "softmax weights rounded to fp8 e4m3 without the FP8_MAX scale while the profile says p_round none",
    "mla-rope-dropped": "MLA: logits from the latent dims only, the rope dims of q and K left out",
    "max-starts-at-minus-1e4": "the running max starts at -1e4 instead of -inf: rows whose every logit is below -1e4 sum to 0",
    "partial-e4m3-undeclared": "rows split into 32-token partitions whose outputs are stored in fp8 e4m3fn while the profile says partial none",
    "q-scale-unguarded": "with --q-quant fp8_per_row, the row scale absmax/FP8_MAX without its 1e-20 floor: an all-zero q row divides 0 by 0",
    "page-stride-from-shape": "strided caches: the page stride taken from the shape (page_size*Hkv*D elements), as if pages were packed",
    "softmax-scale-ignored": "the softmax scale taken as 1/sqrt(head_dim) whatever the call's softmax_scale says",
    "alibi-slope-per-kv-head": "ALiBi slopes indexed by KV head instead of query head: query head h gets slope h // G",
    "masked-lanes-read-block-0": "a 64-token tile's lanes past the context's last page read page 0 (the page id masked to 0), "
                                 "their values left to the zero softmax weight",
    "logits-rounded-to-f16": "scaled logits stored in float16 before the softmax (as a kernel keeping scores in its "
                             "input dtype): near each other at a large offset, their differences are lost",
    "tile-max-tie-dropped": "a three-way branch on each 64-token tile's max against the running max with no case for "
                            "equal: a tile whose max ties the running max is never added",
    "stale-empty-split": "rows split into 32-token partitions counted batch-wide from the longest request; a shorter "
                         "request's empty partitions are never written, and the merge reads their slots from scratch "
                         "an earlier call left",
    "scratch-pool-exhausted": "the same merge of empty partitions, but each call takes a fresh zeroed partials "
                              "buffer from a pool of 100 (--pool-calls); once the pool is used up, buffers come "
                              "back uncleared and the empty partitions are read from what an earlier call left",
}

POOL_CALLS = 100  # scratch-pool-exhausted: calls served from fresh buffers before they are reused (--pool-calls)
TILE_TOKENS = 64  # the tile of the masked-lanes-read-block-0 and tile-max-tie-dropped defects

DESCRIPTION = pav_worker.description(
    "numpy_decode",
    **pav_worker.EVERY_CACHE_FORMAT,
    head_dims=[64, 80, 96, 128, 192, 256, 512, 576],
    gqa_ratios=list(range(1, 33)),
    q_len=[1, 8],
    variants=["window", "soft_cap", "sinks", "alibi"],
)

CHUNK_TOKENS = 16384  # tokens decoded at once per (sequence, chunk): bounds memory


class NumpyDecode:
    def __init__(self, defect=None, lse_base="e", p_round="none", partial=None, split_tokens=256, q_quant="none",
                 pool_calls=POOL_CALLS):
        self.defect = defect
        self.q_quant = q_quant
        self.lse_base = lse_base
        self.p_round = p_round
        self.partial = partial  # None: no partitions (online softmax over chunks)
        self.split_tokens = split_tokens
        if defect == "partial-e4m3-undeclared":
            self.partial, self.split_tokens = "fp8_e4m3fn", 32
        if defect in ("stale-empty-split", "scratch-pool-exhausted"):
            self.partial, self.split_tokens = "f32", 32
        self.calls = 0  # decode calls served
        self.pool_calls = pool_calls
        # Partition scratch kept across calls, as a split-KV kernel keeps its
        # partials buffer: slot (sequence, partition) -> (m, l, o). Once pav
        # has poisoned it, every slot a call did not write holds NaN, as a
        # preallocated buffer filled with NaN would.
        self.scratch = {}
        self.poisoned = False

    def poison_scratch(self):
        """pav's request before a call: every scratch slot NaN."""
        self.scratch = {key: tuple(np.full_like(a, np.nan) for a in slot) for key, slot in self.scratch.items()}
        self.poisoned = True

    def seq_len(self, call, s):
        if self.defect == "csr-last-page-full" and call.page_table == "csr":
            return len(call.pages(s)) * call.page_size
        return call.seq_len(s)

    def pages_of(self, length, bs):
        if self.defect == "drop-last-partial-page":
            return length // bs
        return -(-length // bs)

    def codes(self, call, pages, heads):
        """K and V of the given pages as stored: [Hkv, pages*bs, D] raw elements."""
        if self.defect == "hnd-read-as-nhd" and call.cache_layout == "hnd":
            # Each page's [Hkv, bs, D] elements read at nhd offsets, [bs, Hkv, D].
            n, hkv, bs, d = len(pages), call.num_kv_heads, call.page_size, call.head_dim
            k = call.k_cache[pages].reshape(n, bs, hkv, d)
            v = call.v_cache[pages].reshape(n, bs, hkv, d)
            return (pav_worker.gather(k, "nhd", np.arange(n), heads),
                    pav_worker.gather(v, "nhd", np.arange(n), heads))
        k_cache, v_cache = call.k_cache, call.v_cache
        if self.defect == "page-stride-from-shape" and call.cache_layout != "packed":
            k_cache, v_cache = packed_pages(k_cache), packed_pages(v_cache)
        k = pav_worker.gather(k_cache, call.k_form, pages, heads)
        if self.defect == "combined-v-from-k" and call.kv_storage == "combined":
            return k, k  # V's pointer left at the K half
        return k, pav_worker.gather(v_cache, call.v_form, pages, heads)

    def gather(self, call, pages):
        """K and V of the given pages as float32 [Hkv, pages*bs, D], scaled."""
        heads = np.arange(call.num_kv_heads)
        kc, vc = self.codes(call, pages, heads)
        dtype = call.cache_dtype
        if self.defect == "e5m2-as-e4m3" and dtype == "fp8_e5m2":
            dtype = "fp8_e4m3fn"
        k = pav_worker.cache_to_f32(kc, dtype)
        v = pav_worker.cache_to_f32(vc, dtype)
        for cache, scale, kind in ((k, call.k_scale, call.k_scale_kind), (v, call.v_scale, call.v_scale_kind)):
            scale_heads = heads
            if (self.defect == "scale-wrong-head" and kind == "per_token") or \
               (self.defect == "per-head-scale-head-0" and kind == "per_head"):
                scale_heads = np.zeros_like(heads)
            s = pav_worker.gather_scale(scale, kind, pages, scale_heads)  # [Hkv or 1, tokens or 1]
            if s is not None:
                cache *= s[..., None]
        return k, v

    def decode(self, call):
        self.calls += 1
        # stale-empty-split: empty partitions merged from scratch; scratch-pool-exhausted: only once the pool is used up
        stale_merge = self.defect == "stale-empty-split" or (
            self.defect == "scratch-pool-exhausted" and self.calls > self.pool_calls)
        q = call.q
        if self.q_quant == "fp8_per_row":
            q = quantize_q_rows(q, call.cache_dtype, self.defect == "q-scale-unguarded")
        rows_total, hq, d = q.shape
        dv = call.v_head_dim  # d but for MLA: V and out take the keys' first dv dims
        q_len = call.q_len
        num_seqs = call.num_seqs
        hkv = call.num_kv_heads
        bs = call.page_size
        g = hq // hkv
        scale = np.float32(call.softmax_scale)
        if self.defect == "softmax-scale-ignored":
            scale = np.float32(1.0 / np.sqrt(d))
        cap = np.float32(call.soft_cap) if call.soft_cap > 0 else None
        out = np.zeros((rows_total, hq, dv), dtype=np.float32)
        lse = np.full((rows_total, hq), -np.inf, dtype=np.float32)
        # Query head h = kv*G + j; rows of one KV head ordered r = p*G + j.
        if self.defect == "gqa-interleaved":
            heads = np.array([[j * hkv + kv for j in range(g)] for kv in range(hkv)])
        else:
            heads = np.arange(hq).reshape(hkv, g)
        # Each row's sink and ALiBi slope, [Hkv, q_len*G] in the same row order.
        row_heads = np.tile(heads, (1, q_len))
        sink = None
        if call.sinks is not None and self.defect != "sink-not-in-denominator":
            sink = call.sinks[row_heads]
        slope_heads = row_heads
        if self.defect == "alibi-slope-per-kv-head":
            slope_heads = np.broadcast_to(np.arange(hkv)[:, None], row_heads.shape)
        slope = None if call.alibi_slopes is None else call.alibi_slopes[slope_heads][..., None]
        chunk_pages = max(1, CHUNK_TOKENS // bs)
        if self.partial:  # one chunk per partition
            chunk_pages = max(1, -(-self.split_tokens // bs))
        # stale-empty-split: the partition count of the longest request, for every request
        batch_parts = max((-(-self.pages_of(self.seq_len(call, s), bs) // chunk_pages) for s in range(num_seqs)),
                          default=0)
        if self.defect == "tile-max-tie-dropped":
            chunk_pages = max(1, TILE_TOKENS // bs)
        for s in range(num_seqs):
            length = self.seq_len(call, s)
            seq_pages = call.pages(s)
            qs = q[s * q_len:(s + 1) * q_len]                          # [q_len, Hq, D]
            qg = qs[:, heads, :].transpose(1, 0, 2, 3).reshape(hkv, q_len * g, d)
            # Row r (query position p = r // G) sits at position pos and sees
            # keys first_key[r] <= t < visible[r] (and t < length).
            pos = length - q_len + np.repeat(np.arange(q_len), g)
            visible = pos + 1
            if self.defect == "causal-off-by-one":
                visible = np.minimum(visible + 1, length)
            first_key = np.zeros_like(pos)
            if call.window_left >= 0:
                first_key = pos - call.window_left
                if self.defect == "window-edge-off-by-one":
                    first_key = first_key - 1
            m = np.full((hkv, q_len * g), -1e4 if self.defect == "max-starts-at-minus-1e4" else -np.inf,
                        dtype=np.float32)
            l = np.zeros((hkv, q_len * g), dtype=np.float32)
            acc = np.zeros((hkv, q_len * g, dv), dtype=np.float32)
            parts = []  # with --partial: each partition's (m, l, stored normalized output)
            pages_total = self.pages_of(length, bs)
            # Pages wholly before every row's window are never read.
            start_page = max(0, int(first_key.min())) // bs
            for first in range(start_page, pages_total, chunk_pages):
                pages = seq_pages[first:min(first + chunk_pages, pages_total)]
                real_end = (first + len(pages)) * bs  # tokens of the context's pages
                if self.defect == "masked-lanes-read-block-0":
                    tile_end = -(-real_end // TILE_TOKENS) * TILE_TOKENS
                    pad = -(-(tile_end - real_end) // bs)
                    pages = np.concatenate([pages, np.zeros(pad, dtype=np.asarray(pages).dtype)])
                k, v = self.gather(call, pages)
                t0 = first * bs
                t = t0 + np.arange(k.shape[1])
                inside = t < length
                seen_by = (t[None, :] < visible[:, None]) & (t[None, :] >= first_key[:, None])  # [rows, tokens]
                clear = ~inside  # the poisoned tail never enters
                if self.defect == "masked-lanes-read-block-0":
                    clear &= t < real_end  # the lanes past the last page keep what they read
                k = np.where(clear[None, :, None], 0, k)
                v = np.where(clear[None, :, None], 0, v)
                if self.defect == "mla-rope-dropped" and call.kv_storage == "latent":
                    x = np.matmul(qg[..., :dv], k[..., :dv].transpose(0, 2, 1)) * scale
                else:
                    x = np.matmul(qg, k.transpose(0, 2, 1)) * scale
                if self.defect == "logits-rounded-to-f16":
                    x = x.astype(np.float16).astype(np.float32)
                if cap is not None and self.defect == "soft-cap-after-mask":
                    # Masked with a large negative, then capped: masked keys come out at -cap.
                    x = np.where(seen_by[None], x, np.float32(-1e30))
                    x = cap * np.tanh(x / cap)
                    keep = inside[None, :]
                else:
                    if cap is not None:
                        x = cap * np.tanh(x / cap)
                    keep = seen_by & inside[None, :]
                if slope is not None:
                    x = x - slope * (pos[:, None] - t[None, :]).astype(np.float32)[None]
                logits = np.where(keep[None], x, -np.inf)
                if self.partial:
                    parts.append(self.partition(logits, v, call.cache_dtype))
                    self.scratch[(s, len(parts) - 1)] = parts[-1]
                    continue
                if self.defect == "tile-max-tie-dropped":  # the equal case missing: such a tile is not added
                    tied = logits.max(axis=2) == m
                    logits = np.where(tied[..., None], -np.inf, logits)
                m_new = np.maximum(m, logits.max(axis=2))
                safe = np.where(np.isfinite(m_new), m_new, 0)
                alpha = np.where(np.isfinite(m), np.exp(m - safe), 0)
                p = np.exp(logits - safe[..., None])
                l = l * alpha + p.sum(axis=2)
                if self.p_round == "fp8":  # P.V with p rounded to fp8 as it is; l keeps the unrounded p
                    p = round_to_fp8(p, call.cache_dtype)
                elif self.defect == "p-fp8-undeclared":
                    p = round_to_fp8(p, "fp8_e4m3fn")
                acc = acc * alpha[..., None] + np.matmul(p, v)
                m = m_new
            if stale_merge and parts:
                for j in range(len(parts), batch_parts):   # this request's empty partitions: never written
                    slot = self.scratch.get((s, j))
                    if slot is None or slot[2].shape != parts[0][2].shape:
                        slot = tuple(np.full_like(a, np.nan) for a in parts[0]) if self.poisoned else None
                    if slot is not None:
                        parts.append(slot)
            if parts:
                m, l, acc = merge(parts)
            if sink is not None:  # exp(sink) joins the denominator only
                m_new = np.maximum(m, sink)
                safe = np.where(np.isfinite(m_new), m_new, 0)
                alpha = np.where(np.isfinite(m), np.exp(m - safe), 0)
                l = l * alpha + np.exp(sink - safe)
                acc = acc * alpha[..., None]
                m = m_new
            seen = l > 0
            o = np.where(seen[..., None], acc / np.where(seen, l, 1)[..., None], 0)
            row_lse = np.where(seen, m + np.log(np.where(seen, l, 1)), -np.inf)
            if self.lse_base == "2":
                row_lse = row_lse * np.float32(1 / np.log(2))
            # [Hkv, q_len*G, D] -> rows of this sequence, heads in place
            o = o.reshape(hkv, q_len, g, dv).transpose(1, 0, 2, 3)
            row_lse = row_lse.reshape(hkv, q_len, g).transpose(1, 0, 2)
            out[s * q_len:(s + 1) * q_len][:, heads.reshape(-1), :] = o.reshape(q_len, hq, dv)
            lse[s * q_len:(s + 1) * q_len][:, heads.reshape(-1)] = row_lse.reshape(q_len, hq)
        return out, lse


    def partition(self, logits, v, cache_dtype):
        """One partition of a split row: its max, its sum and its normalized
        output stored in the partial dtype (0 where it sees no token)."""
        m = logits.max(axis=2)
        safe = np.where(np.isfinite(m), m, 0)
        p = np.exp(logits - safe[..., None])
        l = p.sum(axis=2)
        if self.p_round == "fp8":
            p = round_to_fp8(p, cache_dtype)
        o = np.where((l > 0)[..., None], np.matmul(p, v) / np.where(l > 0, l, 1)[..., None], 0)
        return m, l, round_to(o.astype(np.float32), self.partial)


def quantize_q_rows(q, flavour, unguarded=False):
    """Each query head vector (a row of D values) quantized to the cache's e4m3
    flavour with q_scale = max(absmax / FP8_MAX, 1e-20), then scaled back
    (profile q_quant fp8_per_row)."""
    fp8_max = np.float32(448.0 if flavour == "fp8_e4m3fn" else 240.0)
    amax = np.abs(q).max(axis=-1, keepdims=True).astype(np.float32)
    scale = amax / fp8_max if unguarded else np.maximum(amax / fp8_max, np.float32(1e-20))
    return round_to_fp8(q / scale, flavour) * scale


def merge(parts):
    """The log-sum-exp merge of partitions (m, l, o): the running state (m, l,
    acc) of the whole row, acc = sum of l_i exp(m_i - M) o_i."""
    m = np.max(np.stack([p[0] for p in parts]), axis=0)
    safe = np.where(np.isfinite(m), m, 0)
    l = np.zeros_like(parts[0][1])
    acc = np.zeros_like(parts[0][2])
    for m_i, l_i, o_i in parts:
        w = np.where(np.isfinite(m_i), l_i * np.exp(m_i - safe), 0).astype(np.float32)
        l = l + w
        acc = acc + w[..., None] * o_i
    return m, l, acc


def packed_pages(cache):
    """The defect page-stride-from-shape: the cache's memory read with the page
    stride of a packed page (its other strides kept)."""
    if cache.strides[0] == cache[0].size * cache.itemsize:
        return cache
    strides = (cache[0].size * cache.itemsize,) + cache.strides[1:]
    return np.lib.stride_tricks.as_strided(cache, cache.shape, strides, writeable=False)


# The positive finite codes of each fp8 flavour, 0 up to its largest finite value.
FP8_POSITIVE_CODES = {"fp8_e4m3fn": 0x7f, "fp8_e4m3fnuz": 0x80, "fp8_e5m2": 0x7c}


def round_to_fp8(x, flavour):
    """x rounded to the nearest value of an fp8 flavour, ties to the even code,
    with no scale: below half the smallest subnormal it is 0, beyond the largest
    finite value that value (saturated, as pav's codecs do)."""
    table = pav_worker.fp8_table(flavour)
    codes = np.arange(FP8_POSITIVE_CODES[flavour])
    values = table[codes].astype(np.float64)  # 0 .. the largest finite, ascending
    x64 = np.abs(x.astype(np.float64))
    hi = np.clip(np.searchsorted(values, x64), 1, len(values) - 1)
    lo = hi - 1
    dlo, dhi = x64 - values[lo], values[hi] - x64
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(codes[lo] % 2 == 0, lo, hi)))
    return (np.sign(x) * values[pick]).astype(np.float32)


def round_to(x, dtype):
    """float32 x stored in dtype and read back (bf16 and f16 round to nearest even)."""
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        u = x.astype(np.float32).view(np.uint32)
        u = ((u + np.uint32(0x7fff) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xffff0000))
        return u.view(np.float32)
    return round_to_fp8(x, dtype)


def main():
    parser = pav_worker.defect_parser("numpy_decode.py", DEFECTS)
    parser.add_argument("--lse-base", choices=["e", "2"], default="e",
                        help="write lse in natural log (e, the default) or in log2, and describe it so")
    parser.add_argument("--large-cache", action="store_true",
                        help="declare large_cache: pav then also draws caches of 2^31 elements and more "
                             "(host buffers of several GiB per call; NumPy indexes them in int64)")
    parser.add_argument("--partial", choices=["f32", "bf16", "f16", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2"],
                        help="split each row into partitions of --split-tokens tokens, store their normalized "
                             "outputs in this dtype and merge them, and describe it so (profile partial)")
    parser.add_argument("--q-quant", choices=["none", "fp8_per_row"], default="none",
                        help="quantize each query head vector to the cache's e4m3 flavour with a per-row scale "
                             "before Q.K (profile q_quant fp8_per_row), and describe it so; the worker then "
                             "declares e4m3 caches only")
    parser.add_argument("--split-tokens", type=int, default=256,
                        help="tokens per partition with --partial (rounded up to whole pages; default 256)")
    parser.add_argument("--no-scratch-poison", action="store_true",
                        help="with partitions (--partial, stale-empty-split, scratch-pool-exhausted), do not declare the scratch they keep "
                             "between calls: pav then cannot poison it before each call")
    parser.add_argument("--pool-calls", type=int, default=POOL_CALLS,
                        help="scratch-pool-exhausted: the calls served from fresh buffers before they are "
                             f"reused (default {POOL_CALLS})")
    parser.add_argument("--p-round", choices=["none", "fp8"], default="none",
                        help="round the softmax weights to the cache's e4m3 flavour before P.V, without "
                             "the FP8_MAX scale (profile p_round fp8), and describe it so; the worker then "
                             "declares e4m3 caches only")
    opts = parser.parse_args()
    if opts.list_defects:
        pav_worker.list_defects(DEFECTS)
        return
    if opts.split_tokens < 1:
        parser.error("--split-tokens must be at least 1")
    if opts.pool_calls < 0:
        parser.error("--pool-calls must be at least 0")
    kernel = NumpyDecode(opts.defect, opts.lse_base, opts.p_round, opts.partial, opts.split_tokens, opts.q_quant,
                         opts.pool_calls)
    desc = dict(DESCRIPTION)
    if opts.q_quant == "fp8_per_row":
        desc["cache_dtypes"] = ["fp8_e4m3fn", "fp8_e4m3fnuz"]
        desc["profile"] = dict(desc["profile"], q_quant="fp8_per_row")
    if opts.partial:
        desc["profile"] = dict(desc["profile"], partial=opts.partial)
    if opts.p_round == "fp8":
        desc["cache_dtypes"] = ["fp8_e4m3fn", "fp8_e4m3fnuz"]
        desc["profile"] = dict(desc["profile"], p_round="fp8")
    if opts.large_cache:
        desc["large_cache"] = True
    if opts.lse_base == "2":
        desc["lse_base"] = "2"
    poison = None
    if kernel.partial and not opts.no_scratch_poison:  # the partitions' scratch, poisoned by pav before each call
        desc["scratch"] = True
        poison = kernel.poison_scratch
    if opts.defect:
        desc["version"] += "+defect." + opts.defect
    np.seterr(all="ignore")  # -inf - -inf in masked rows is handled explicitly
    pav_worker.serve(pav_worker.Kernel(desc, kernel.decode, poison))


if __name__ == "__main__":
    main()
