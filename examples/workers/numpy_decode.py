#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A plain NumPy paged-attention decode, run by pav as a worker:

    pav verify --kernel exec:'python3 examples/workers/numpy_decode.py'

It reads the fp8 K/V cache through the block tables, dequantizes with its own
fp8 table and the K/V scales, and computes exact softmax attention in float32:
Q is not quantized and the softmax weights are not rounded (numerics profile
`none`). Long contexts are streamed in chunks of pages with an online softmax.

--defect NAME injects one realistic bug (--list-defects prints them), so pav's
fuzzing can be seen to find, shrink and save it.
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
}

DESCRIPTION = {
    "name": "numpy_decode",
    "version": "1.0",
    "memory": "host",
    "q_dtypes": ["bf16", "f16"],
    "out_dtype": "same",
    "cache_dtypes": ["fp8_e4m3fn", "fp8_e4m3fnuz"],
    "v_layouts": ["plain", "trans"],
    "scale_kinds": ["none", "per_tensor", "per_token"],
    "block_sizes": [16, 32, 64, 128, 256],
    "head_dims": [64, 80, 96, 128, 256, 512],
    "gqa_ratios": list(range(1, 33)),
    "q_len": [1, 8],
    "max_num_seqs": 0,
    "max_kv_heads": 0,
    "max_context_len": 0,
    "strided_q": True,  # files always arrive compacted
    "split": "self",
    "split_ceiling": False,
    "max_split_ceiling": 0,
    "writes_lse": True,
    "check": True,
    "profile": {"q_quant": "none", "p_round": "none", "partial": "none"},
}

CHUNK_TOKENS = 16384  # tokens decoded at once per (sequence, chunk): bounds memory


class NumpyDecode:
    def __init__(self, defect=None):
        self.defect = defect
        self.tables = {}

    def table(self, flavour):
        if flavour not in self.tables:
            self.tables[flavour] = pav_worker.fp8_table(flavour)
        return self.tables[flavour]

    def pages_of(self, length, bs):
        if self.defect == "drop-last-partial-page":
            return length // bs
        return -(-length // bs)

    def gather(self, call, pages, lut):
        """K and V of the given pages as float32 [Hkv, pages*bs, D], scaled."""
        kc, vc = call.k_cache[pages], call.v_cache[pages]
        n, hkv, _, bs, _ = kc.shape
        d = call.q.shape[2]
        # K [n, Hkv, D/16, bs, 16] -> [Hkv, n, bs, D/16, 16] -> [Hkv, n*bs, D]
        k = lut[kc.transpose(1, 0, 3, 2, 4).reshape(hkv, n * bs, d)]
        if call.v_layout == "plain":  # [n, Hkv, D, bs] -> [Hkv, n, bs, D]
            v = lut[vc.transpose(1, 0, 3, 2).reshape(hkv, n * bs, d)]
        else:  # [n, Hkv, bs/16, D, 16] -> [Hkv, n, bs/16, 16, D]
            v = lut[vc.transpose(1, 0, 2, 4, 3).reshape(hkv, n * bs, d)]
        for cache, scale in ((k, call.k_scale), (v, call.v_scale)):
            if scale is None:
                continue
            if scale.size == 1:
                cache *= scale.reshape(())
            else:  # per token [nb, Hkv, bs] -> [Hkv, n*bs, 1]
                s = scale[pages]
                if self.defect == "scale-wrong-head":
                    s = np.repeat(s[:, :1, :], hkv, axis=1)
                cache *= s.transpose(1, 0, 2).reshape(hkv, n * bs, 1)
        return k, v

    def decode(self, call):
        q = call.q
        rows_total, hq, d = q.shape
        q_len = call.q_len
        num_seqs = call.context_lens.shape[0]
        hkv = call.k_cache.shape[1]
        bs = call.k_cache.shape[3]
        g = hq // hkv
        lut = self.table(call.cache_dtype)
        out = np.zeros((rows_total, hq, d), dtype=np.float32)
        lse = np.full((rows_total, hq), -np.inf, dtype=np.float32)
        # Query head h = kv*G + j; rows of one KV head ordered r = p*G + j.
        if self.defect == "gqa-interleaved":
            heads = np.array([[j * hkv + kv for j in range(g)] for kv in range(hkv)])
        else:
            heads = np.arange(hq).reshape(hkv, g)
        chunk_pages = max(1, CHUNK_TOKENS // bs)
        for s in range(num_seqs):
            length = int(call.context_lens[s])
            qs = q[s * q_len:(s + 1) * q_len]                          # [q_len, Hq, D]
            qg = qs[:, heads, :].transpose(1, 0, 2, 3).reshape(hkv, q_len * g, d)
            # Row r (position p = r // G) sees tokens t < visible[r].
            pos = np.repeat(np.arange(q_len), g)
            visible = length - q_len + 1 + pos
            if self.defect == "causal-off-by-one":
                visible = np.minimum(visible + 1, length)
            m = np.full((hkv, q_len * g), -np.inf, dtype=np.float32)
            l = np.zeros((hkv, q_len * g), dtype=np.float32)
            acc = np.zeros((hkv, q_len * g, d), dtype=np.float32)
            pages_total = self.pages_of(length, bs)
            for first in range(0, pages_total, chunk_pages):
                pages = call.block_tables[s, first:min(first + chunk_pages, pages_total)]
                k, v = self.gather(call, pages, lut)
                t0 = first * bs
                t = t0 + np.arange(k.shape[1])
                keep = (t[None, :] < visible[:, None]) & (t[None, :] < length)   # [rows, tokens]
                k = np.where((t < length)[None, :, None], k, 0)   # poisoned tail never enters
                v = np.where((t < length)[None, :, None], v, 0)
                logits = np.matmul(qg, k.transpose(0, 2, 1)) * np.float32(call.softmax_scale)
                logits = np.where(keep[None], logits, -np.inf)
                m_new = np.maximum(m, logits.max(axis=2))
                safe = np.where(np.isfinite(m_new), m_new, 0)
                alpha = np.where(np.isfinite(m), np.exp(m - safe), 0)
                p = np.exp(logits - safe[..., None])
                l = l * alpha + p.sum(axis=2)
                acc = acc * alpha[..., None] + np.matmul(p, v)
                m = m_new
            seen = l > 0
            o = np.where(seen[..., None], acc / np.where(seen, l, 1)[..., None], 0)
            row_lse = np.where(seen, m + np.log(np.where(seen, l, 1)), -np.inf)
            # [Hkv, q_len*G, D] -> rows of this sequence, heads in place
            o = o.reshape(hkv, q_len, g, d).transpose(1, 0, 2, 3)
            row_lse = row_lse.reshape(hkv, q_len, g).transpose(1, 0, 2)
            out[s * q_len:(s + 1) * q_len][:, heads.reshape(-1), :] = o.reshape(q_len, hq, d)
            lse[s * q_len:(s + 1) * q_len][:, heads.reshape(-1)] = row_lse.reshape(q_len, hq)
        return out, lse


def main():
    parser = pav_worker.defect_parser("numpy_decode.py", DEFECTS)
    opts = parser.parse_args()
    if opts.list_defects:
        pav_worker.list_defects(DEFECTS)
        return
    kernel = NumpyDecode(opts.defect)
    desc = dict(DESCRIPTION)
    if opts.defect:
        desc["version"] += "+defect." + opts.defect
    np.seterr(all="ignore")  # -inf - -inf in masked rows is handled explicitly
    pav_worker.serve(pav_worker.Kernel(desc, kernel.decode))


if __name__ == "__main__":
    main()
