# SPDX-License-Identifier: Apache-2.0
"""A small reference engine's attention backend, shaped like the backends of
serving engines: per-step forward metadata, a work planner whose plans are
minted at graph capture (one per batch size and micro-batch slot) and refreshed
in place, a capture ladder over (batch size, q_len) with persistent graph-bound
buffers that replays refresh in place, padding to the next captured size, an
eager path, a speculative draft loop that advances lengths in place, dummy
runs, and two micro-batches in flight with an overlapped schedule.

Correct by default. `defect=NAME` (or `--defect NAME` in run.py) switches in
one of the lifecycle bugs in DEFECTS. `kernel=` picks the array library: the
NumPy kernel (engine_kernel.py, the default) or the torch one (engine_kernel_torch.py, on a
device or the CPU); the backend's code is the same for both.
"""
from dataclasses import dataclass, replace

import numpy as np

import engine_kernel as numpy_kernel

DEFECTS = {
    "draft-stale-plan": "the draft loop attends over the target step's plan, never refreshed as the draft "
                        "advances the lengths, and the plan check compares shapes only, so it accepts it",
    "microbatch-shared-plan": "plan and workspace are shared by the two micro-batches (keyed by batch size "
                              "alone): the second one's prepare rewrites what the first one still merges from",
    "dummy-refreshes-plan": "a dummy run refreshes the live plan of its batch size from synthetic lengths",
    "capture-unplanned": "the capture builder attaches no plan, so the graph records the uniform route while "
                         "replays refresh a plan nothing reads",
    "replay-refreshes-eager-buffer": "the refresh before a replay writes the eager buffers, not the "
                                     "graph-bound ones the captured graph reads",
    "warmup-advances-lengths": "a warm-up / dummy forward advances the persistent lengths buffer in place",
    "padding-stale-rows": "a padded replay leaves the padding rows' metadata (lengths, page table, slots) "
                          "from an earlier, larger batch",
    "graph-key-batch-only": "graphs are keyed by batch size alone, so graphs of two q_lens collide",
    "workspace-realloc": "the workspace is reallocated when an eager batch outgrows it, after graphs "
                         "captured the old one",
    "plan-per-runtime-batch": "an eager batch with no plan mints one (and compiles the planner for it)",
}

Q_MAX = 4           # the largest q_len the backend serves


class _Buffers:
    """Persistent inputs of `rows` requests: lengths, page tables, new-token slots, q, new K/V, out."""

    def __init__(self, x, rows, shape):
        s = shape
        self.lens = x.zeros((rows,), "i32")
        self.tables = x.zeros((rows, s.max_pages_per_request), "i32")
        self.slots = x.zeros((rows * Q_MAX,), "i64")
        x.put(self.slots, -1)
        self.q = x.zeros((rows * Q_MAX, s.q_heads, s.head_dim), "f32")
        self.k_new = x.zeros((rows * Q_MAX, s.kv_heads, s.head_dim), "f32")
        self.v_new = x.zeros((rows * Q_MAX, s.kv_heads, s.head_dim), "f32")
        self.out = x.zeros((rows * Q_MAX, s.q_heads, s.head_dim), "f32")

    def views(self, bs, q_len):
        n = bs * q_len
        return dict(lens=self.lens[:bs], tables=self.tables[:bs], slots=self.slots[:n], q=self.q[:n],
                    k_new=self.k_new[:n], v_new=self.v_new[:n], out=self.out[:n])


@dataclass
class ForwardMetadata:
    mode: str                 # "graph" or "eager"
    batch_size: int           # real rows
    q_len: int
    bufs: dict                # the views the kernel reads
    plan: object = None
    route: str = "uniform"
    graph: object = None
    wrote: dict = None
    slot: int = 0


class Backend:
    def __init__(self, hooks, pool, shape, *, ladder_sizes=(1, 2, 4, 8), ladder_q_lens=(1, 2), tile=8,
                 max_partitions=8, budget=24, splits=4, max_batch=64, defect=None, kernel=numpy_kernel):
        if defect is not None and defect not in DEFECTS:
            raise ValueError(f"unknown defect {defect!r}; known: {', '.join(DEFECTS)}")
        self.hooks, self.pool, self.shape, self.x = hooks, pool, shape, kernel
        self.defect = defect
        self.ladder_sizes, self.ladder_q_lens = tuple(ladder_sizes), tuple(ladder_q_lens)
        self.tile, self.max_partitions, self.budget, self.splits = tile, max_partitions, budget, splits
        self.max_batch = max_batch
        top = max(self.ladder_sizes)
        self.graph_bufs = _Buffers(kernel, top, shape)            # bound into captured graphs
        self.eager_bufs = [_Buffers(kernel, max_batch, shape) for _ in range(2)]   # eager inputs, per slot
        self.draft_bufs = _Buffers(kernel, max_batch, shape)
        rows = max(budget, (top if defect == "workspace-realloc" else max_batch) * splits)
        self.workspace = [self._workspace(rows), self._workspace(rows)]   # one per micro-batch slot
        if defect == "microbatch-shared-plan":
            self.workspace[1] = self.workspace[0]
        self.plans = {}           # (num_seqs, slot) -> Plan, minted at capture only
        self.graphs = {}          # (batch size, q_len) -> (Graph, Plan or None)

    # ---- helpers

    def _workspace(self, rows):
        s = self.shape
        return self.x.zeros((rows, Q_MAX, s.q_heads, 2 + s.head_dim), "f32")

    def _ensure_workspace(self, slot, rows):
        if rows > len(self.workspace[slot]):
            if self.defect != "workspace-realloc":
                raise ValueError(f"{rows} work items past the workspace's {len(self.workspace[slot])}")
            self.workspace[slot] = self._workspace(rows)
        return self.workspace[slot]

    def _plan_key(self, n, slot):
        return n if self.defect == "microbatch-shared-plan" else (n, slot)

    def _mint(self, n, slot):
        key = self._plan_key(n, slot)
        if key not in self.plans:
            self.plans[key] = self.x.make_plan(n, self.tile, self.max_partitions, self.budget)
            self.hooks.specialised(f"planner for batch {n}")
            self.hooks.plan_minted(f"num_seqs={n} slot={slot}", cache_size=len(self.plans))
        return self.plans[key]

    def _graph_key(self, bs, q_len):
        return bs if self.defect == "graph-key-batch-only" else (bs, q_len)

    def _find_graph(self, n, q_len):
        for bs in sorted(self.ladder_sizes):
            if bs >= n and self._graph_key(bs, q_len) in self.graphs:
                entry = self.graphs[self._graph_key(bs, q_len)]
                return bs, entry
        return None, None

    def _attend(self, bufs, q_len, plan, slot):
        """Write the new K/V, then phase 1 (partials into the slot's workspace); returns the workspace."""
        self.x.write_kv(self.pool, bufs["slots"], bufs["k_new"], bufs["v_new"])
        n = bufs["lens"].shape[0]
        ws = self.workspace[slot] if plan is not None else \
            self._ensure_workspace(slot, self.x.rows_needed(n, None, self.splits))
        self.x.attend(self.pool, bufs, q_len, plan, self.splits, ws)
        return ws

    def _run(self, bufs, q_len, plan, slot):
        ws = self._attend(bufs, q_len, plan, slot)
        self.x.merge(ws, plan, bufs["lens"], self.splits, q_len, bufs["out"])

    # ---- capture

    def capture(self, bs, q_len):
        x = self.x
        bufs = self.graph_bufs.views(bs, q_len)
        x.put(bufs["lens"], 1)                  # the capture's synthetic inputs
        x.put(bufs["tables"], 0)
        x.put(bufs["slots"], -1)
        plan = self._mint(bs, 0)
        self._mint(bs, 1)
        if self.defect == "capture-unplanned":
            plan = None
        if plan is not None:
            plan.refresh(bufs["lens"])
        route = "planned" if plan is not None else "uniform"
        ws = self.workspace[0]

        def fn():                               # what the graph records: launches over these buffers
            x.write_kv(self.pool, bufs["slots"], bufs["k_new"], bufs["v_new"])
            x.attend(self.pool, bufs, q_len, plan, self.splits, ws)
            x.merge(ws, plan, bufs["lens"], self.splits, q_len, bufs["out"])

        reads = {"graph." + k: v for k, v in bufs.items()}
        reads["workspace"] = ws
        if plan is not None:
            reads["plan.work"], reads["plan.reduce"] = plan.work, plan.reduce
        graph = self.hooks.capture_graph((bs, q_len), fn, reads, route)
        self.graphs[self._graph_key(bs, q_len)] = (graph, plan)

    # ---- per-step metadata

    def init_forward_metadata(self, batch, slot=0):
        n, q_len = batch.size, batch.q_len
        if q_len > Q_MAX:
            raise ValueError(f"q_len {q_len} past the backend's {Q_MAX}")
        bs, entry = (None, None) if batch.eager else self._find_graph(n, q_len)
        if entry is not None:
            return self._refresh_for_replay(batch, bs, entry)
        bufs = self.eager_bufs[slot].views(n, q_len)
        self._fill(bufs, batch, n, q_len)
        plan = self.plans.get(self._plan_key(n, slot))
        if plan is None and self.defect == "plan-per-runtime-batch":
            plan = self._mint(n, slot)
        route = "uniform"
        if plan is not None:
            plan.refresh(batch.lens)
            if plan.matches(batch.lens, by_lengths=self.defect != "draft-stale-plan"):
                route = "planned"
        return ForwardMetadata("eager", n, q_len, bufs, plan if route == "planned" else None, route, slot=slot)

    def _fill(self, bufs, batch, n, q_len, pad=True):
        x, m = self.x, n * q_len
        x.put(bufs["lens"][:n], batch.lens)
        x.put(bufs["tables"][:n], batch.tables)
        x.put(bufs["slots"][:m], batch.slots)
        x.put(bufs["q"][:m], batch.q)
        x.put(bufs["k_new"][:m], batch.k_new)
        x.put(bufs["v_new"][:m], batch.v_new)
        x.put(bufs["q"][m:], 0.0)                 # padding rows' inputs
        x.put(bufs["k_new"][m:], 0.0)
        x.put(bufs["v_new"][m:], 0.0)
        if pad:                                   # padding rows' metadata: empty, writing nothing
            x.put(bufs["lens"][n:], 0)
            x.put(bufs["tables"][n:], 0)
            x.put(bufs["slots"][m:], -1)

    def _refresh_for_replay(self, batch, bs, entry):
        graph, plan = entry
        n, q_len = batch.size, batch.q_len
        target = self.eager_bufs[0] if self.defect == "replay-refreshes-eager-buffer" else self.graph_bufs
        bufs = target.views(bs, q_len)
        self._fill(bufs, batch, n, q_len, pad=self.defect != "padding-stale-rows")
        # the builder attaches this batch size's plan and refreshes it in place
        plan = self.plans.get(self._plan_key(bs, 0))
        if plan is not None:
            plan.refresh(np.concatenate([batch.lens, np.zeros(bs - n, dtype=np.int32)]))
        route = "planned" if plan is not None else "uniform"
        wrote = {"lens": bufs["lens"], "tables": bufs["tables"], "slots": bufs["slots"], "q": bufs["q"]}
        return ForwardMetadata("graph", n, q_len, self.graph_bufs.views(bs, q_len), plan, route, graph, wrote)

    # ---- forwards

    def forward(self, md):
        if md.mode == "graph":
            self.hooks.replay_graph(md.graph, md.route, md.wrote)
        else:
            self._run(md.bufs, md.q_len, md.plan, md.slot)
        return self.x.host(md.bufs["out"][:md.batch_size * md.q_len])

    def draft_forward(self, batch):
        """The draft loop: lengths advance in place; each step refreshes its plan before attending."""
        x = self.x
        n, k = batch.size, batch.steps
        bufs = self.draft_bufs.views(n, 1)
        x.put(bufs["lens"], batch.lens)
        x.put(bufs["tables"], batch.tables)
        lens = batch.lens.copy()                  # the host's copy of the lengths
        plan = self.plans.get(self._plan_key(n, 0))
        if plan is not None and self.defect == "draft-stale-plan":
            plan.refresh(lens)                    # refreshed once, for the target's lengths
        outs = []
        for i in range(k):
            bufs["lens"] += 1
            lens += 1
            x.put(bufs["slots"], batch.slots[i])
            x.put(bufs["q"], batch.q[i])
            x.put(bufs["k_new"], batch.k_new[i])
            x.put(bufs["v_new"], batch.v_new[i])
            if plan is not None and self.defect != "draft-stale-plan":
                plan.refresh(lens)
            use = plan if plan is not None and plan.matches(lens, by_lengths=self.defect != "draft-stale-plan") \
                else None
            self._run(bufs, 1, use, 0)
            outs.append(x.host(bufs["out"][:n]))
        return np.stack(outs)

    def dummy_forward(self, bs, q_len):
        """A dummy forward: synthetic lengths, nothing written to the pool, the live state untouched."""
        s = self.shape
        synthetic = np.full(bs, 3 * s.page_size + 1, dtype=np.int32)
        if self.defect == "dummy-refreshes-plan" and self._plan_key(bs, 0) in self.plans:
            self.plans[self._plan_key(bs, 0)].refresh(synthetic)
        if self.defect == "warmup-advances-lengths":
            self.graph_bufs.lens[:bs] += 1
        bufs = _Buffers(self.x, bs, s).views(bs, q_len)
        self.x.put(bufs["lens"], synthetic)
        # tables stay 0 and slots -1: a dummy reads page 0 and writes nothing
        ws = self._workspace(self.x.rows_needed(bs, None, self.splits))
        self.x.attend(self.pool, bufs, q_len, None, self.splits, ws)
        self.x.merge(ws, None, bufs["lens"], self.splits, q_len, bufs["out"])

    def two_micro_batches(self, batches):
        """Overlapped: micro-batch 1 is prepared while micro-batch 0 is in flight (attended, not yet
        merged), as a two-batch overlap schedule does."""
        in_flight = []
        for slot, b in enumerate(batches):
            md = self.init_forward_metadata(replace(b, eager=True), slot=slot)   # micro-batches run eager
            in_flight.append((md, self._attend(md.bufs, md.q_len, md.plan, slot)))
        outs = []
        for md, ws in in_flight:                 # the merge reads the plan as it is now
            self.x.merge(ws, md.plan, md.bufs["lens"], self.splits, md.q_len, md.bufs["out"])
            outs.append(self.x.host(md.bufs["out"][:md.batch_size]))
        return outs
