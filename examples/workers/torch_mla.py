#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A PyTorch MLA (DeepSeek multi-head latent attention) paged decode, run by
pav as a worker, on the CPU or a CUDA device:

    pav verify --kernel exec:'python3 examples/workers/torch_mla.py --device cuda'

It reads calls with kv_storage "latent": one cache tensor of one latent KV
head shared by every query head (the GQA ratio is Hq, 16 to 128), laid out nhd
[pages, page_size, 1, D] or hnd [pages, 1, page_size, D], each row D = D_qk =
latent + rope dims (512 + 64 or 128 + 64). The values are the first D_v =
latent dims of the same rows: the worker reads the one cache tensor only, as an
MLA kernel does, and never a separate V. Pages come through block tables or
CSR lists, page sizes down to 1; the cache is bf16, f16 or fp8 e4m3fn (codes
decoded with a 256-entry table on the device), with no scale, a per-tensor (or,
with its one head, per-head) scale or per-token scales.

The attention is computed in the absorbed form of FlashMLA-style kernels: each
sequence's rows are gathered and widened to float32, split into the latent part
c (dims [0, D_v)) and the rope part r (dims [D_v, D_qk)); q splits the same way
into q_nope and q_pe; the logits are (q_nope . c + q_pe . r) * softmax_scale
(the call's scale), masked causally (row p of a sequence of length L sits at
position L - q_len + p and sees keys t <= that position), and out = softmax .
c, streamed over chunks of tokens with an online softmax (running max and
sum). The slots of a last page past the sequence's length are zeroed before
any product. Numerics profile none / none / none: Q is used as given (widened
to float32), the softmax weights are kept in float32, no row is split into
stored partials. lse is the natural-log log-sum-exp of the scaled logits; a
row that sees no token gives 0 and -inf.

--defect NAME injects one realistic bug (--list-defects prints them).
"""
import math
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pav_torch  # noqa: E402
import pav_worker  # noqa: E402

DEFECTS = {
    "rope-dropped": "logits from the latent part only: the rope term q_pe . r is left out",
    "v-includes-rope-offset": "values read from dims [D_qk - D_v, D_qk) of each cached row instead of [0, D_v)",
    "scale-from-latent-dim": "softmax scale 1/sqrt(D_v) used instead of the call's softmax_scale",
}

DESCRIPTION = pav_worker.description(
    "torch_mla",
    cache_dtypes=["bf16", "f16", "fp8_e4m3fn"],
    cache_layouts=["nhd", "hnd"],
    kv_storage=["latent"],
    mla_dims=[[512, 64], [128, 64]],  # (latent, rope): D_qk = latent + rope, D_v = latent
    page_tables=["block_table", "csr"],
    strided_cache=True,  # the latent cache is indexed through its own strides
    scale_kinds=["none", "per_tensor", "per_head", "per_token"],
    mixed_scales=False,
    block_sizes=[1, 2, 8, 16, 32, 64, 128, 256],
    head_dims=[576, 192],
    gqa_ratios=[16, 20, 32, 48, 64, 100, 128],
    q_len=[1, 8],
    max_kv_heads=1,
    variants=[],
)

CHUNK_TOKENS = 4096  # tokens attended at once per sequence (rounded down to whole pages)


class TorchMLA(pav_torch.Device):
    def __init__(self, device, defect=None):
        super().__init__(device)
        self.defect = defect

    def latent_cache(self, call):
        """The call's one latent cache on the device as stored, its scale and
        its page table."""
        if call.kv_storage != "latent":
            raise ValueError("kv_storage %r: this worker reads latent MLA caches only" % (call.kv_storage,))
        if call.cache_layout not in ("nhd", "hnd"):
            raise ValueError("cache layout %r: a latent cache is nhd or hnd" % (call.cache_layout,))
        if call.k_cache.ndim != 4 or call.num_kv_heads != 1:
            raise ValueError("latent cache %s: expected one KV head of rank 4" % (list(call.k_cache.shape),))
        c = types.SimpleNamespace()
        c.rows = self.tensor(call.k_cache, call.cache_dtype)
        c.scale = self.tensor(call.k_scale)
        c.heads = torch.arange(1, device=self.device)
        self.page_table(call, c)
        return c

    def latent_rows(self, call, c, ids):
        """The cached rows of the pages `ids`, dequantized: float32 [tokens,
        D_qk], token t = i * page_size + slot of page i."""
        x = c.rows[ids]  # nhd [n, page_size, 1, D], hnd [n, 1, page_size, D]
        x = x[:, :, 0] if call.cache_layout == "nhd" else x[:, 0]
        x = x.reshape(-1, x.shape[-1])
        x = self.widen(x, call.cache_dtype)
        scale = pav_worker.gather_scale(c.scale, call.k_scale_kind, ids, c.heads)  # [1, tokens or 1]
        if scale is not None:
            x = x * scale.reshape(-1, 1)
        return x

    def decode(self, call):
        dev = self.device
        q = self.tensor(call.q)  # float32 [rows, Hq, D_qk]
        rows, hq, dqk = q.shape
        dv = call.v_head_dim
        bs, ql = call.page_size, call.q_len
        if not 0 < dv < dqk or call.k_cache.shape[-1] != dqk:
            raise ValueError("latent cache rows of %d dims, q of %d, values of %d: expected D_v < D_qk = rows" % (
                call.k_cache.shape[-1], dqk, dv))
        cache = self.latent_cache(call)
        scale = 1.0 / math.sqrt(dv) if self.defect == "scale-from-latent-dim" else call.softmax_scale
        out = torch.zeros((rows, hq, dv), dtype=torch.float32, device=dev)
        lse_out = torch.full((rows, hq), float("-inf"), dtype=torch.float32, device=dev)
        chunk = max(1, CHUNK_TOKENS // bs) * bs
        n = ql * hq
        for s in range(call.num_seqs):
            length = max(call.seq_len(s), 0)
            if length == 0:  # nothing to see: its rows stay 0 and -inf
                continue
            # [q_len, Hq, D_qk] -> [q_len*Hq, D_qk], row r = p*Hq + h
            qs = q[s * ql:(s + 1) * ql].reshape(n, dqk)
            q_nope, q_pe = qs[:, :dv], qs[:, dv:]
            pos = (length - ql + torch.arange(ql, device=dev)).repeat_interleave(hq)  # row r sees t <= pos[r]
            m = torch.full((n,), float("-inf"), dtype=torch.float32, device=dev)  # running max
            l = torch.zeros((n,), dtype=torch.float32, device=dev)  # running sum of exp(logit - m)
            acc = torch.zeros((n, dv), dtype=torch.float32, device=dev)
            ids_all = self.page_ids(call, cache, s, -(-length // bs))
            for t0 in range(0, length, chunk):
                ids = ids_all[t0 // bs:(t0 + chunk) // bs]
                kv = self.latent_rows(call, cache, ids)
                tok = t0 + torch.arange(kv.shape[0], device=dev)
                kv = torch.where((tok < length)[:, None], kv, torch.zeros_like(kv))  # NaN tail of the last page
                c, r = kv[:, :dv], kv[:, dv:]
                logits = torch.matmul(q_nope, c.t())
                if self.defect != "rope-dropped":
                    logits = logits + torch.matmul(q_pe, r.t())
                logits = logits * scale
                logits = logits.masked_fill(tok[None, :] > pos[:, None], float("-inf"))
                values = kv[:, dqk - dv:] if self.defect == "v-includes-rope-offset" else c
                m_new = torch.maximum(m, logits.amax(dim=-1))
                base = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
                p = torch.exp(logits - base[:, None])
                alpha = torch.exp(m - base)
                l = l * alpha + p.sum(dim=-1)
                acc = acc * alpha[:, None] + torch.matmul(p, values)
                m = m_new
            seen = l > 0
            l_safe = torch.where(seen, l, torch.ones_like(l))
            o = torch.where(seen[:, None], acc / l_safe[:, None], torch.zeros_like(acc))
            lse = torch.where(seen, m + torch.log(l_safe), torch.full_like(l, float("-inf")))
            out[s * ql:(s + 1) * ql] = o.reshape(ql, hq, dv)
            lse_out[s * ql:(s + 1) * ql] = lse.reshape(ql, hq)
        return out.cpu().numpy(), lse_out.cpu().numpy()


def main():
    pav_torch.serve("torch_mla.py", DEFECTS, DESCRIPTION, TorchMLA)


if __name__ == "__main__":
    main()
