#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A PyTorch paged-attention decode, run by pav as a worker, on the CPU or a
CUDA device:

    pav verify --kernel exec:'python3 examples/workers/torch_decode.py --device cuda'

The cache is moved to the device as pav sends it and read there in its own
format: every layout (packed with plain or trans V, nhd, hnd), K and V apart,
combined or (MLA) one latent cache whose keys' first dims are the values,
pages through block tables or CSR lists, page sizes down to 1, every cache dtype (bf16 and f16 widened, the fp8 flavours e4m3fn, e4m3fnuz and e5m2
decoded with a 256-entry table on the device) and K and V scales of any kind,
each its own. Each sequence's pages are gathered, and attention computed in
float32 chunk by chunk, the chunks merged through their log-sum-exp. Q is not
quantized and the softmax weights are not rounded (numerics profile `none`).
Every attention variant is declared (docs/verify-your-kernel.md, "Attention
variants"): soft cap and ALiBi bias on the scaled logits before the mask, the
sliding window in the mask (chunks wholly before every row's window skipped),
and the sinks merged into the log-sum-exp after the last chunk.

--defect NAME injects one realistic bug (--list-defects prints them).
"""
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pav_torch  # noqa: E402
import pav_worker  # noqa: E402

DEFECTS = {
    "no-max-subtract": "softmax as exp(s) / sum exp(s) without subtracting the max: large logits overflow to inf",
    "block-table-stride": "block table read flat with the sequence's own page count as row stride, not max_blocks",
    "trans-v-swapped": "trans V read as [bs/16, 16, D] instead of [bs/16, D, 16]",
}

DESCRIPTION = pav_worker.description(
    "torch_decode",
    **pav_worker.EVERY_CACHE_FORMAT,
    head_dims=[64, 128, 192, 256, 512, 576],
    gqa_ratios=list(range(1, 33)),
    q_len=[1, 8],
    variants=["window", "soft_cap", "sinks", "alibi"],
)

CHUNK_TOKENS = 32768  # tokens attended at once per sequence


class TorchDecode(pav_torch.Device):
    def __init__(self, device, defect=None):
        super().__init__(device)
        self.defect = defect

    def device_cache(self, call):
        """The call's cache on the device, as stored: K and V (the halves of
        a combined tensor are views of it), their scales, the page table."""
        c = types.SimpleNamespace()
        if call.kv_cache is not None:
            kv = self.tensor(call.kv_cache, call.cache_dtype)
            c.k, c.v = kv[:, 0], kv[:, 1]
        elif call.kv_storage == "latent":  # MLA: V is a view of K's first dims
            c.k = self.tensor(call.k_cache, call.cache_dtype)
            c.v = c.k[..., :call.v_head_dim]
        else:
            c.k, c.v = self.tensor(call.k_cache, call.cache_dtype), self.tensor(call.v_cache, call.cache_dtype)
        c.ks, c.vs = self.tensor(call.k_scale), self.tensor(call.v_scale)
        c.heads = torch.arange(call.num_kv_heads, device=self.device)
        self.page_table(call, c)
        return c

    def page_ids(self, call, c, s, pages):
        if self.defect == "block-table-stride" and call.page_table == "block_table":
            return c.bt.reshape(-1)[s * pages:s * pages + pages]
        return super().page_ids(call, c, s, pages)

    def keys_values(self, call, c, ids):
        """Dequantized K and V of the pages `ids`: float32 [Hkv, tokens, D]."""
        k = self.widen(pav_worker.gather(c.k, call.k_form, ids, c.heads), call.cache_dtype)
        if self.defect == "trans-v-swapped" and call.v_form == "trans":  # misread as [n, Hkv, bs/16, 16, D]
            n, hkv, bs, d = ids.shape[0], call.num_kv_heads, call.page_size, call.head_dim
            v = c.v[ids].reshape(n, hkv, bs // 16, 16, d).permute(1, 0, 2, 3, 4).reshape(hkv, n * bs, d)
        else:
            v = pav_worker.gather(c.v, call.v_form, ids, c.heads)
        v = self.widen(v, call.cache_dtype)
        ks = pav_worker.gather_scale(c.ks, call.k_scale_kind, ids, c.heads)  # [Hkv or 1, tokens or 1]
        vs = pav_worker.gather_scale(c.vs, call.v_scale_kind, ids, c.heads)
        if ks is not None:
            k = k * ks.unsqueeze(-1)
        if vs is not None:
            v = v * vs.unsqueeze(-1)
        return k, v

    def attend(self, logits, v):
        """softmax(logits) @ v and the log-sum-exp of each row; rows that see
        nothing give 0 and -inf."""
        if self.defect == "no-max-subtract":
            e = torch.exp(logits)
            total = e.sum(dim=-1)
            o = torch.matmul(e, v) / total.unsqueeze(-1)
            lse = torch.log(total)
        else:
            lse = torch.logsumexp(logits, dim=-1)
            w = torch.exp(logits - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse)).unsqueeze(-1))
            o = torch.matmul(w, v)
        empty = torch.isneginf(lse)
        o = torch.where(empty.unsqueeze(-1), torch.zeros_like(o), o)
        return o, lse

    def decode(self, call):
        dev = self.device
        q = self.tensor(call.q)
        cache = self.device_cache(call)
        lens = [call.seq_len(s) for s in range(call.num_seqs)]
        rows, hq, d = q.shape
        dv = call.v_head_dim  # d but for MLA: V and out take the keys' first dv dims
        hkv, bs = call.num_kv_heads, call.page_size
        g = hq // hkv
        ql = call.q_len
        cap = call.soft_cap if call.soft_cap > 0 else None
        window = call.window_left  # -1: no window
        # Each row's sink and ALiBi slope, [Hkv, q_len*G] in the row order below.
        row_heads = (torch.arange(hkv, device=dev)[:, None] * g + torch.arange(g, device=dev)[None, :]).repeat(1, ql)
        sinks = self.tensor(call.sinks)
        sink_rows = None if sinks is None else sinks[row_heads]
        slopes = self.tensor(call.alibi_slopes)
        slope_rows = None if slopes is None else slopes[row_heads].unsqueeze(-1)
        out = torch.zeros((rows, hq, dv), dtype=torch.float32, device=dev)
        lse_out = torch.full((rows, hq), float("-inf"), dtype=torch.float32, device=dev)
        chunk = max(1, CHUNK_TOKENS // bs) * bs
        for s, length in enumerate(lens):
            # [q_len, Hq, D] -> [Hkv, q_len*G, D], row r = p*G + j for head kv*G + j
            qs = q[s * ql:(s + 1) * ql].reshape(ql, hkv, g, d).permute(1, 0, 2, 3).reshape(hkv, ql * g, d)
            # Row r sits at position pos[r] and sees keys first[r] <= t < limit[r].
            pos = (length - ql + torch.arange(ql, device=dev)).repeat_interleave(g)
            limit = pos + 1
            first = pos - window if window >= 0 else torch.zeros_like(pos)
            start = (max(0, int(first.min())) // bs) * bs  # pages before every row's window: not read
            o_acc = torch.zeros((hkv, ql * g, dv), dtype=torch.float32, device=dev)
            lse_acc = torch.full((hkv, ql * g), float("-inf"), dtype=torch.float32, device=dev)
            ids_all = self.page_ids(call, cache, s, -(-max(length, 0) // bs))
            for t0 in range(start, max(length, 0), chunk):
                ids = ids_all[t0 // bs:(t0 + chunk) // bs]
                k, v = self.keys_values(call, cache, ids)
                tok = t0 + torch.arange(k.shape[1], device=dev)
                inside = tok < length
                k = torch.where(inside[None, :, None], k, torch.zeros_like(k))  # NaN tail of the last page
                v = torch.where(inside[None, :, None], v, torch.zeros_like(v))
                logits = torch.matmul(qs, k.transpose(1, 2)) * call.softmax_scale
                if cap is not None:  # before the bias and the mask
                    logits = cap * torch.tanh(logits / cap)
                if slope_rows is not None:
                    logits = logits - slope_rows * (pos[:, None] - tok[None, :]).to(torch.float32)[None]
                seen = (tok[None, :] < limit[:, None]) & (tok[None, :] >= first[:, None])
                logits = logits.masked_fill(~seen[None], float("-inf"))
                o_c, lse_c = self.attend(logits, v)
                lse_new = torch.logaddexp(lse_acc, lse_c)
                base = torch.where(torch.isfinite(lse_new), lse_new, torch.zeros_like(lse_new))
                o_acc = (o_acc * torch.exp(lse_acc - base).unsqueeze(-1) +
                         o_c * torch.exp(lse_c - base).unsqueeze(-1))
                lse_acc = lse_new
            if sink_rows is not None:  # exp(sink) joins the denominator (and lse) only
                lse_new = torch.logaddexp(lse_acc, sink_rows)
                base = torch.where(torch.isfinite(lse_new), lse_new, torch.zeros_like(lse_new))
                o_acc = o_acc * torch.exp(lse_acc - base).unsqueeze(-1)
                lse_acc = lse_new
            out[s * ql:(s + 1) * ql] = o_acc.reshape(hkv, ql, g, dv).permute(1, 0, 2, 3).reshape(ql, hq, dv)
            lse_out[s * ql:(s + 1) * ql] = lse_acc.reshape(hkv, ql, g).permute(1, 0, 2).reshape(ql, hq)
        if pav_worker.is_torch(call.out):  # in pav's process on device memory: pav takes device tensors
            return out, lse_out
        return out.cpu().numpy(), lse_out.cpu().numpy()


def main():
    pav_torch.serve("torch_decode.py", DEFECTS, DESCRIPTION, TorchDecode)


if __name__ == "__main__":
    main()
