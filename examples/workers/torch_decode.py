#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A PyTorch paged-attention decode, run by pav as a worker, on the CPU or a
CUDA device:

    pav verify --kernel exec:'python3 examples/workers/torch_decode.py --device cuda'

Each sequence's pages are gathered through its block table, the fp8 codes
decoded with a 256-entry table on the device, and attention computed in
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
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pav_worker  # noqa: E402

DEFECTS = {
    "no-max-subtract": "softmax as exp(s) / sum exp(s) without subtracting the max: large logits overflow to inf",
    "block-table-stride": "block table read flat with the sequence's own page count as row stride, not max_blocks",
    "trans-v-swapped": "trans V read as [bs/16, 16, D] instead of [bs/16, D, 16]",
}

DESCRIPTION = {
    "name": "torch_decode",
    "version": "1.0",
    "memory": "host",
    "q_dtypes": ["bf16", "f16"],
    "out_dtype": "same",
    "cache_dtypes": ["fp8_e4m3fn", "fp8_e4m3fnuz"],
    "v_layouts": ["plain", "trans"],
    "scale_kinds": ["none", "per_tensor", "per_token"],
    "block_sizes": [16, 32, 64, 128, 256],
    "head_dims": [64, 128, 256, 512],
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
    "variants": ["window", "soft_cap", "sinks", "alibi"],
}

CHUNK_TOKENS = 32768  # tokens attended at once per sequence


class TorchDecode:
    def __init__(self, device, defect=None):
        self.device = torch.device(device)
        self.defect = defect
        self.tables = {}

    def table(self, flavour):
        if flavour not in self.tables:
            self.tables[flavour] = torch.from_numpy(pav_worker.fp8_table(flavour)).to(self.device)
        return self.tables[flavour]

    def tensor(self, a):
        """An input array on the device. The inputs are read-only maps of pav's
        files; torch warns about that, and nothing here writes to them."""
        if a is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(a).to(self.device)

    def page_ids(self, bt, s, pages):
        if self.defect == "block-table-stride":
            return bt.reshape(-1)[s * pages:s * pages + pages]
        return bt[s, :pages]

    def keys_values(self, kc, vc, ks, vs, ids, lut):
        """Dequantized K and V of the pages `ids`: float32 [Hkv, tokens, D]."""
        n = ids.shape[0]
        _, hkv, groups, bs, _ = kc.shape
        d = groups * 16
        k = lut[kc[ids].long()].permute(1, 0, 3, 2, 4).reshape(hkv, n * bs, d)
        if vc.dim() == 4:  # plain [n, Hkv, D, bs]
            v = lut[vc[ids].long()].permute(1, 0, 3, 2).reshape(hkv, n * bs, d)
        elif self.defect == "trans-v-swapped":  # misread as [n, Hkv, bs/16, 16, D]
            v = lut[vc[ids].long()].reshape(n, hkv, bs // 16, 16, d).permute(1, 0, 2, 3, 4).reshape(hkv, n * bs, d)
        else:  # trans [n, Hkv, bs/16, D, 16]
            v = lut[vc[ids].long()].permute(1, 0, 2, 4, 3).reshape(hkv, n * bs, d)
        if ks is not None:
            if ks.numel() == 1:
                k = k * ks.reshape(())
                v = v * vs.reshape(())
            else:  # per token [nb, Hkv, bs]
                k = k * ks[ids].permute(1, 0, 2).reshape(hkv, n * bs, 1)
                v = v * vs[ids].permute(1, 0, 2).reshape(hkv, n * bs, 1)
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
        kc, vc = self.tensor(call.k_cache), self.tensor(call.v_cache)
        ks, vs = self.tensor(call.k_scale), self.tensor(call.v_scale)
        bt = self.tensor(call.block_tables).long()
        lens = call.context_lens.tolist()
        lut = self.table(call.cache_dtype)
        rows, hq, d = q.shape
        hkv, bs = kc.shape[1], kc.shape[3]
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
        out = torch.zeros((rows, hq, d), dtype=torch.float32, device=dev)
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
            o_acc = torch.zeros((hkv, ql * g, d), dtype=torch.float32, device=dev)
            lse_acc = torch.full((hkv, ql * g), float("-inf"), dtype=torch.float32, device=dev)
            ids_all = self.page_ids(bt, s, -(-length // bs)) if length > 0 else bt[s, :0]
            for t0 in range(start, max(length, 0), chunk):
                ids = ids_all[t0 // bs:(t0 + chunk) // bs]
                k, v = self.keys_values(kc, vc, ks, vs, ids, lut)
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
            out[s * ql:(s + 1) * ql] = o_acc.reshape(hkv, ql, g, d).permute(1, 0, 2, 3).reshape(ql, hq, d)
            lse_out[s * ql:(s + 1) * ql] = lse_acc.reshape(hkv, ql, g).permute(1, 0, 2).reshape(ql, hq)
        return out.cpu().numpy(), lse_out.cpu().numpy()


def main():
    parser = pav_worker.defect_parser("torch_decode.py", DEFECTS)
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1, ... (default cpu)")
    opts = parser.parse_args()
    if opts.list_defects:
        pav_worker.list_defects(DEFECTS)
        return
    try:  # a device that cannot run stops the worker before it describes itself
        torch.zeros(1, device=opts.device)
    except (AssertionError, RuntimeError) as e:
        sys.exit("torch_decode.py: --device %s cannot be used: %s" % (opts.device, e))
    kernel = TorchDecode(opts.device, opts.defect)
    desc = dict(DESCRIPTION)
    desc["version"] = "1.0 torch %s %s" % (torch.__version__, opts.device)
    if opts.defect:
        desc["version"] += " +defect." + opts.defect
    pav_worker.serve(pav_worker.Kernel(desc, kernel.decode))


if __name__ == "__main__":
    main()
