# SPDX-License-Identifier: Apache-2.0
"""The reference engine's decode kernel, in NumPy: split-KV paged decode in two
phases (partials per work item into a workspace, then a merge per request),
with a work planner giving each request a partition count proportional to its
length, under a budget of work items. The uniform route gives every request
the same number of splits instead."""
import numpy as np


class Plan:
    """A work plan for `num_seqs` rows: work [capacity, 4] = (row, first tile, end tile, length the
    plan was built from); reduce [num_seqs, 2] = (first item, item count). Allocated once; refresh
    rewrites it in place."""

    def __init__(self, num_seqs, tile, max_partitions, budget):
        self.num_seqs = num_seqs
        self.tile = tile
        self.max_partitions = max_partitions
        self.capacity = min(num_seqs * max_partitions, max(num_seqs, budget))
        self.work = np.zeros((self.capacity, 4), dtype=np.int32)
        self.reduce = np.zeros((num_seqs, 2), dtype=np.int32)
        self.lens = np.zeros(num_seqs, dtype=np.int32)     # the lengths of the last refresh

    def refresh(self, lens):
        lens = np.asarray(lens, dtype=np.int64)
        assert len(lens) == self.num_seqs
        tiles = -(-np.maximum(lens, 0) // self.tile)
        nonempty = (tiles > 0).astype(np.int64)
        total = max(int(tiles.sum()), 1)
        remaining = self.capacity - int(nonempty.sum())
        cum = np.cumsum(tiles)
        count = np.minimum(np.minimum(nonempty + cum * remaining // total - (cum - tiles) * remaining // total, tiles),
                           self.max_partitions)
        first = np.concatenate([[0], np.cumsum(count)[:-1]])
        self.work[...] = 0
        for b in range(self.num_seqs):
            c = int(count[b])
            for p in range(c):
                self.work[first[b] + p] = (b, p * tiles[b] // c, (p + 1) * tiles[b] // c, lens[b])
        self.reduce[:, 0] = first
        self.reduce[:, 1] = count
        self.lens[...] = lens

    def matches(self, lens, by_lengths=True):
        """Whether this plan may serve a call over `lens`: its row count, and (unless told to look
        at shapes only) the lengths it was refreshed from."""
        if len(lens) != self.num_seqs:
            return False
        return not by_lengths or bool(np.array_equal(self.lens, lens))


def uniform_items(lens, splits):
    """(row, first token, end token) per work item, `splits` per request; and (first, count) per row."""
    items, reduce = [], []
    for b, n in enumerate(np.asarray(lens, dtype=np.int64)):
        part = max(-(-int(max(n, 0)) // splits), 1)
        reduce.append((len(items), splits))
        for p in range(splits):
            items.append((b, p * part, (p + 1) * part))
    return items, reduce


def planned_items(plan):
    items = []
    for i in range(plan.capacity):
        b, t0, t1, _ = (int(x) for x in plan.work[i])
        items.append((b, t0 * plan.tile, t1 * plan.tile))
    return items, [tuple(int(x) for x in r) for r in plan.reduce]


# ---- the array-library surface the backend uses (kernel_torch.py gives the same names)

def zeros(shape, dtype):
    return np.zeros(shape, dtype={"i32": np.int32, "i64": np.int64, "f32": np.float32}[dtype])


def put(dst, src):
    """dst[...] = src, src a NumPy array or a number."""
    dst[...] = src


def host(x):
    """A NumPy copy."""
    return np.array(x, copy=True)


def make_plan(num_seqs, tile, max_partitions, budget):
    return Plan(num_seqs, tile, max_partitions, budget)


def rows_needed(num_seqs, plan, splits):
    return plan.capacity if plan is not None else num_seqs * splits


def write_kv(pool, slots, k_new, v_new):
    ps = pool.k.shape[1]
    for i, s in enumerate(np.asarray(slots)):
        if s >= 0:
            p, o = divmod(int(s), ps)
            pool.k[p, o] = k_new[i]
            pool.v[p, o] = v_new[i]


def attend(pool, bufs, q_len, plan, splits, ws):
    """Phase 1: the partial (max, sum, weighted values) of each work item (the plan's, or `splits`
    per request) into workspace row i. Query row j of a request of length L attends tokens below
    L - q_len + j + 1."""
    items = planned_items(plan)[0] if plan is not None else uniform_items(bufs["lens"], splits)[0]
    q, lens, tables = bufs["q"], bufs["lens"], bufs["tables"]
    ps = pool.k.shape[1]
    hkv, d = pool.k.shape[2], pool.k.shape[3]
    hq = q.shape[1]
    g = hq // hkv
    scale = np.float32(1.0 / np.sqrt(d))
    for i, (b, t0, t1) in enumerate(items):
        L = int(lens[b])
        t1 = min(t1, L)
        row = ws[i]
        row[..., 0] = -np.inf
        row[..., 1] = 0.0
        row[..., 2:] = 0.0
        if t1 <= t0:
            continue
        toks = np.arange(t0, t1)
        pages = tables[b, toks // ps]
        k = pool.k[pages, toks % ps]            # [n, Hkv, D]
        v = pool.v[pages, toks % ps]
        qb = q[b * q_len:(b + 1) * q_len].reshape(q_len, hkv, g, d)
        s = np.einsum("jhgd,nhd->jhgn", qb, k) * scale
        limit = L - q_len + np.arange(q_len) + 1
        s = np.where(toks[None, None, None, :] < limit[:, None, None, None], s, -np.inf)
        m = s.max(axis=-1)
        safe = np.where(np.isfinite(m), m, 0.0)
        p = np.exp(s - safe[..., None])
        row[:q_len, :, 0] = m.reshape(q_len, hq)
        row[:q_len, :, 1] = p.sum(axis=-1).reshape(q_len, hq)
        row[:q_len, :, 2:] = np.einsum("jhgn,nhd->jhgd", p, v).reshape(q_len, hq, d)


def merge(ws, plan, lens, splits, q_len, out):
    """Phase 2: each request's items (as the plan says NOW, or `splits` per request) merged into its
    q_len output rows; a request without tokens gives 0."""
    reduce = planned_items(plan)[1] if plan is not None else uniform_items(lens, splits)[1]
    for b, (first, count) in enumerate(reduce):
        rows = ws[first:first + count, :q_len]              # [count, q_len, Hq, 2 + D]
        if count == 0:
            out[b * q_len:(b + 1) * q_len] = 0.0
            continue
        m = rows[..., 0]
        top = m.max(axis=0)
        safe = np.where(np.isfinite(top), top, 0.0)
        w = np.where(m == -np.inf, 0.0, np.exp(m - safe))   # NaN (poisoned scratch) stays NaN
        l = (w * rows[..., 1]).sum(axis=0)
        acc = (w[..., None] * rows[..., 2:]).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            o = np.where(l[..., None] > 0, acc / np.where(l > 0, l, 1)[..., None], 0.0)
        out[b * q_len:(b + 1) * q_len] = o
