# SPDX-License-Identifier: Apache-2.0
"""A second backend style under pav.lifecycle: a plan/run decode wrapper, as
FlashInfer's batch decode wrappers are used. plan() takes the page table in CSR
form (indptr, indices, last page's length), decides the split count from the
lengths and writes the work items; run() launches over them. A wrapper made
for graphs has fixed buffers and a split count fixed at capture; the engine
keeps one per captured batch size and plans it again before every replay.

Defects: `wrapper-not-replanned` (a replay without plan(): the graph runs the
previous step's items and lengths), `wrapper-split-at-replay` (the graph's
wrapper decides its split count again at each plan, so a replay's items no
longer have the layout the graph was captured with).
"""
import numpy as np

from pav.lifecycle import Adapter

import engine_kernel as x

WRAPPER_DEFECTS = ("wrapper-not-replanned", "wrapper-split-at-replay")
Q_MAX = 4


class _Items:
    """Work items in the shape engine_kernel's planned route reads (tile = 1 token)."""
    tile = 1

    def __init__(self, work, reduce):
        self.work, self.reduce = work, reduce
        self.capacity = len(work)


class PagedDecodeWrapper:
    def __init__(self, rows, width, page_size, max_splits=4, fixed_splits=None):
        self.page_size, self.max_splits, self.fixed_splits = page_size, max_splits, fixed_splits
        self.lens = np.zeros(rows, dtype=np.int32)
        self.tables = np.zeros((rows, width), dtype=np.int32)
        self.work = np.zeros((rows * max_splits, 4), dtype=np.int32)
        self.reduce = np.zeros((rows, 2), dtype=np.int32)
        self.rows, self.splits = 0, 1

    def plan(self, indptr, indices, last_page_len):
        n = len(indptr) - 1
        pages = np.diff(indptr)
        lens = np.where(pages > 0, (pages - 1) * self.page_size + last_page_len, 0)
        self.lens[:n] = lens
        self.tables[:n] = 0
        for b in range(n):
            self.tables[b, :pages[b]] = indices[indptr[b]:indptr[b + 1]]
        self.splits = self.fixed_splits or (1 if lens.max(initial=0) <= 32 else self.max_splits)
        self.work[...] = 0
        for b in range(n):
            part = max(-(-int(lens[b]) // self.splits), 1)
            for p in range(self.splits):
                self.work[b * self.splits + p] = (b, p * part, (p + 1) * part, lens[b])
        self.reduce[:n, 0] = np.arange(n) * self.splits
        self.reduce[:n, 1] = self.splits
        self.rows = n

    def route(self):
        return f"split-kv x{self.splits}"

    def launcher(self, pool, io, q_len, ws):
        """What run() launches, bound to this plan's shape: the item count is fixed here, as a
        captured graph fixes it; the items and lengths are read when it runs."""
        n, count = self.rows, self.rows * self.splits
        items = _Items(self.work[:count], self.reduce[:n])
        bufs = dict(io, lens=self.lens[:n], tables=self.tables[:n])

        def launch():
            x.write_kv(pool, bufs["slots"], bufs["k_new"], bufs["v_new"])
            x.attend(pool, bufs, q_len, items, 1, ws)
            x.merge(ws, items, bufs["lens"], 1, q_len, bufs["out"])
        return launch

    def buffers(self):
        return {"wrapper.lens": self.lens, "wrapper.tables": self.tables, "wrapper.work": self.work,
                "wrapper.reduce": self.reduce}


def csr(tables, lens, page_size):
    """(indptr, indices, last_page_len) of page-table rows and lengths."""
    pages = -(-np.asarray(lens, dtype=np.int64) // page_size)
    indptr = np.concatenate([[0], np.cumsum(pages)]).astype(np.int32)
    indices = np.concatenate([tables[b, :pages[b]] for b in range(len(lens))] + [np.zeros(0, np.int32)])
    last = np.where(pages > 0, np.asarray(lens) - (pages - 1) * page_size, 0).astype(np.int32)
    return indptr, indices.astype(np.int32), last


class WrapperEngine(Adapter):
    def __init__(self, hooks, pool, shape, defect=None, ladder_sizes=(1, 2, 4), max_batch=16):
        if defect is not None and defect not in WRAPPER_DEFECTS:
            raise ValueError(f"unknown defect {defect!r}; known: {', '.join(WRAPPER_DEFECTS)}")
        self.hooks, self.pool, self.shape, self.defect = hooks, pool, shape, defect
        self.ladder_sizes, self.max_batch = ladder_sizes, max_batch
        s = shape
        self.ws = np.zeros((max_batch * 4, Q_MAX, s.q_heads, 2 + s.head_dim), dtype=np.float32)
        self.graphs = {}        # (bs, q_len) -> (graph, wrapper, io buffers)

    def _io(self, rows):
        s = self.shape
        m = rows * Q_MAX
        return dict(slots=np.full(m, -1, np.int64), q=np.zeros((m, s.q_heads, s.head_dim), np.float32),
                    k_new=np.zeros((m, s.kv_heads, s.head_dim), np.float32),
                    v_new=np.zeros((m, s.kv_heads, s.head_dim), np.float32),
                    out=np.zeros((m, s.q_heads, s.head_dim), np.float32))

    def _wrapper(self, rows, fixed_splits=None):
        return PagedDecodeWrapper(rows, self.shape.max_pages_per_request, self.shape.page_size,
                                  fixed_splits=fixed_splits)

    def ladder(self):
        return [(bs, 1) for bs in self.ladder_sizes]

    def ops(self):
        return {"dummy"}

    def capture(self, bs, q_len):
        w = self._wrapper(bs)
        w.plan(*csr(np.zeros((bs, 1), np.int32), np.ones(bs, np.int32), self.shape.page_size))   # synthetic
        if self.defect != "wrapper-split-at-replay":
            w.fixed_splits = w.splits           # the graph keeps the split count it was captured with
        io = {k: v[:bs * q_len] for k, v in self._io(bs).items()}
        graph = self.hooks.capture_graph((bs, q_len), w.launcher(self.pool, io, q_len, self.ws),
                                         dict(w.buffers(), workspace=self.ws, **io), w.route())
        self.graphs[(bs, q_len)] = (graph, w, io)

    def prepare(self, batch):
        n, q = batch.size, batch.q_len
        m = n * q
        if not batch.eager:
            for bs in sorted(self.ladder_sizes):
                if bs >= n and (bs, q) in self.graphs:
                    graph, w, io = self.graphs[(bs, q)]
                    for k, src in (("slots", batch.slots), ("q", batch.q), ("k_new", batch.k_new),
                                   ("v_new", batch.v_new)):
                        io[k][:m] = src
                        io[k][m:] = -1 if k == "slots" else 0
                    lens = np.concatenate([batch.lens, np.zeros(bs - n, np.int32)])
                    tables = np.concatenate([batch.tables, np.zeros((bs - n, batch.tables.shape[1]), np.int32)])
                    if self.defect != "wrapper-not-replanned":
                        w.plan(*csr(tables, lens, self.shape.page_size))
                    return ("graph", graph, w, io, m)
        w = self._wrapper(n)
        w.plan(*csr(batch.tables, batch.lens, self.shape.page_size))
        io = dict(slots=batch.slots, q=batch.q, k_new=batch.k_new, v_new=batch.v_new,
                  out=np.zeros_like(batch.q))
        return ("eager", w.launcher(self.pool, io, q, self.ws), io, m)

    def execute(self, h):
        if h[0] == "graph":
            _, graph, w, io, m = h
            self.hooks.replay_graph(graph, w.route(), w.buffers())
            return io["out"][:m].copy()
        _, launch, io, m = h
        launch()
        return io["out"][:m].copy()

    def dummy(self, bs, q_len):
        w = self._wrapper(bs)
        w.plan(*csr(np.zeros((bs, 1), np.int32), np.full(bs, 3, np.int32), self.shape.page_size))
        w.launcher(self.pool, {k: v[:bs * q_len] for k, v in self._io(bs).items()}, q_len,
                   np.zeros_like(self.ws))()

    def live_buffers(self):
        return {"workspace": self.ws}

    def scratch(self):
        return {"workspace": self.ws}


def factory(defect=None):
    return lambda hooks, pool, shape: WrapperEngine(hooks, pool, shape, defect)
