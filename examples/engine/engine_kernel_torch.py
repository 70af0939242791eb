# SPDX-License-Identifier: Apache-2.0
"""The reference engine's decode kernel in torch, for a device (or the CPU).

Same surface as engine_kernel.py. Every launch reads its inputs from device buffers
of shapes fixed when the graph is captured (the work items of the plan's
capacity, or `splits` per row), and no host value decides anything inside
write_kv, attend or merge, so torch.cuda.graph can record them; a plan is
refreshed on the host from host lengths and copied into its device buffers,
outside any graph, as a replay's metadata refresh is."""
import math
import warnings

import numpy as np
import torch

import engine_kernel as numpy_kernel

warnings.filterwarnings("ignore", message="scatter_reduce")   # beta in torch 1.13; its meaning is settled
_DT = {"i32": torch.int32, "i64": torch.int64, "f32": torch.float32}


class TorchPlan:
    """engine_kernel.Plan's arithmetic on the host; its work and reduce rows in device buffers."""

    def __init__(self, num_seqs, tile, max_partitions, budget, device):
        self.host_plan = numpy_kernel.Plan(num_seqs, tile, max_partitions, budget)
        self.num_seqs, self.tile, self.capacity = num_seqs, tile, self.host_plan.capacity
        self.work = torch.zeros((self.capacity, 4), dtype=torch.int32, device=device)
        self.reduce = torch.zeros((num_seqs, 2), dtype=torch.int32, device=device)

    @property
    def lens(self):
        return self.host_plan.lens

    def refresh(self, lens):
        self.host_plan.refresh(_host(lens))
        self.work.copy_(torch.from_numpy(self.host_plan.work))
        self.reduce.copy_(torch.from_numpy(self.host_plan.reduce))

    def matches(self, lens, by_lengths=True):
        return self.host_plan.matches(_host(lens), by_lengths)


def _host(x):
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()


class TorchKernel:
    def __init__(self, device="cuda"):
        self.device = torch.device(device)

    # ---- buffers

    def zeros(self, shape, dtype):
        return torch.zeros(shape, dtype=_DT[dtype], device=self.device)

    def put(self, dst, src):
        if isinstance(src, (int, float)):
            dst.fill_(src)
        else:
            dst.copy_(torch.as_tensor(np.ascontiguousarray(src)).to(dst.dtype))

    def host(self, x):
        return x.detach().cpu().numpy().copy()

    def make_plan(self, num_seqs, tile, max_partitions, budget):
        return TorchPlan(num_seqs, tile, max_partitions, budget, self.device)

    rows_needed = staticmethod(numpy_kernel.rows_needed)

    # ---- launches

    def write_kv(self, pool, slots, k_new, v_new):
        """Each row's K/V to its slot; a negative slot writes nothing (no data-dependent shapes)."""
        valid = slots >= 0
        sel = torch.where(valid, slots, torch.zeros_like(slots))
        for cache, new in ((pool.k, k_new), (pool.v, v_new)):
            flat = cache.view(-1, cache.shape[2], cache.shape[3])
            hit = torch.zeros(flat.shape[0], dtype=torch.float32, device=flat.device)
            hit.index_add_(0, sel, valid.to(torch.float32))
            rows = torch.where(valid[:, None, None], new, torch.zeros_like(new))
            written = torch.zeros_like(flat).index_add_(0, sel, rows)
            flat.copy_(torch.where(hit[:, None, None] > 0, written, flat))

    def _items(self, plan, lens, splits):
        """(row, first token, end token) of every work item, as device tensors."""
        if plan is not None:
            w = plan.work.long()
            return w[:, 0], w[:, 1] * plan.tile, w[:, 2] * plan.tile
        n = lens.shape[0]
        i = torch.arange(n * splits, device=lens.device)   # no repeat_interleave: it may ask the device for
        b, p = i // splits, i % splits                       # its output size, which a graph cannot record
        part = ((lens.long()[b].clamp(min=0) + splits - 1) // splits).clamp(min=1)
        return b, p * part, (p + 1) * part

    def attend(self, pool, bufs, q_len, plan, splits, ws):
        q, lens, tables = bufs["q"], bufs["lens"], bufs["tables"]
        ps, hkv, d = pool.k.shape[1], pool.k.shape[2], pool.k.shape[3]
        hq = q.shape[1]
        b, t0, t1 = self._items(plan, lens, splits)
        n_items = b.shape[0]
        L = lens.long()[b]
        t1 = torch.minimum(t1, L)
        tok = t0[:, None] + torch.arange(tables.shape[1] * ps, device=q.device)[None, :]   # [I, T]
        valid = tok < t1[:, None]
        tokc = torch.where(valid, tok, torch.zeros_like(tok))
        pages = tables.long()[b[:, None], tokc // ps]
        k = pool.k[pages, tokc % ps]                                         # [I, T, Hkv, D]
        v = pool.v[pages, tokc % ps]
        v = torch.where(valid[:, :, None, None], v, torch.zeros_like(v))
        qb = q.view(lens.shape[0], q_len, hkv, hq // hkv, d)[b]              # [I, q_len, Hkv, G, D]
        s = torch.einsum("ijhgd,ithd->ijhgt", qb, k) / math.sqrt(d)
        limit = L[:, None] - q_len + torch.arange(q_len, device=q.device)[None, :] + 1
        mask = valid[:, None, :] & (tok[:, None, :] < limit[:, :, None])     # [I, q_len, T]
        s = s.masked_fill(~mask[:, :, None, None, :], float("-inf"))
        m = s.amax(-1)
        safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        p = torch.exp(s - safe[..., None])
        ws[:n_items, :q_len, :, 0] = m.reshape(n_items, q_len, hq)
        ws[:n_items, :q_len, :, 1] = p.sum(-1).reshape(n_items, q_len, hq)
        ws[:n_items, :q_len, :, 2:] = torch.einsum("ijhgt,ithd->ijhgd", p, v).reshape(n_items, q_len, hq, d)

    def merge(self, ws, plan, lens, splits, q_len, out):
        n = lens.shape[0]
        b = self._items(plan, lens, splits)[0]
        rows = ws[:b.shape[0], :q_len]                                       # [I, q_len, Hq, 2 + D]
        m = rows[..., 0]
        top = torch.full((n,) + m.shape[1:], float("-inf"), device=ws.device)
        top = top.scatter_reduce(0, b[:, None, None].expand_as(m), m, "amax", include_self=True)
        safe = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        w = torch.where(m == float("-inf"), torch.zeros_like(m), torch.exp(m - safe[b]))   # NaN stays NaN
        l = torch.zeros_like(top).index_add_(0, b, w * rows[..., 1])
        acc = torch.zeros((n,) + rows.shape[1:3] + (rows.shape[3] - 2,), device=ws.device)
        acc.index_add_(0, b, w[..., None] * rows[..., 2:])
        o = torch.where(l[..., None] > 0, acc / torch.where(l > 0, l, torch.ones_like(l))[..., None],
                        torch.zeros_like(acc))
        out[:n * q_len] = o.reshape(n * q_len, out.shape[1], out.shape[2])
