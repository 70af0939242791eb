# SPDX-License-Identifier: Apache-2.0
"""Running a step sequence through an engine, checking every attention call
and every hook call; drawing sequences from the lifecycle's state machine.

A sequence is a list of steps (JSON objects); `OPS` says what each does. Steps
name requests by position among the live ones, so a step that no longer fits
(its requests finished, or none left) does what it still can or nothing: any
sublist of a sequence is a sequence, which is what shrinking needs.
"""
import time

import numpy as np

from pav.lifecycle.adapter import DraftBatch, Finding, Hooks, StepBatch, poison
from pav.lifecycle.world import PoolFull, Shape, World, reference

# op -> {field: (minimum, maximum)}; `eager` is a boolean and, with `dummy`, optional (0: no dummy run)
OPS = {
    "admit": {"len": (1, 100000)},
    "finish": {"req": (0, 100000)},
    "capture": {"bs": (1, 4096), "q_len": (1, 64)},
    "decode": {"n": (1, 4096), "q_len": (1, 64), "eager": (0, 1), "dummy": (0, 4096)},
    "draft": {"n": (1, 4096), "k": (1, 16)},
    "micro": {"n": (2, 4096)},
    "dummy": {"bs": (1, 4096), "q_len": (1, 64)},
}


class Outcome:
    def __init__(self, findings, steps, seconds, counts=None):
        self.findings = findings
        self.steps = steps
        self.seconds = seconds
        self.counts = counts or {}      # steps run per op, graph replays, plans minted

    @property
    def passed(self):
        return not self.findings

    @property
    def first(self):
        return self.findings[0] if self.findings else None


class Runner:
    """One fresh world, hooks and engine (from `factory(hooks, pool, shape)`), and the sequence."""

    def __init__(self, factory, shape, seed, graphs=None):
        self.shape = shape
        self.hooks = Hooks(graphs)
        self.world = World(shape, np.random.default_rng(seed), self.hooks.graphs.pool_device)
        self.hooks.phase = "startup"
        self.engine = factory(self.hooks, self.world.pool, shape)
        self.hooks.phase = "idle"
        self.hooks.live_buffers = self.engine.live_buffers
        self.hooks.plan_bound = self.engine.plan_cache_bound()
        self.world.precision = self.engine.precision()
        self.atol, self.rtol = self.engine.tolerance()
        self.findings = self.hooks.findings      # one list, in the order things happened

    # ---- checks

    def _check_pool(self, what):
        bad = self.world.pool_differences()
        if bad:
            p, o, name, how = bad[0]
            self.findings.append(Finding(
                "pool", f"{what} left the KV pool's {name.upper()} at page {p} offset {o} ({self.world.owner_of(p, o)}) "
                        f"different from pav's copy: {how}"))
            # repair, so one stray write is reported once
            self.world.pool.load(*self.world.expected.host())

    def _check_out(self, what, reqs, lens, q, q_len, out):
        """`out`: [B * q_len, Hq, D], or [layers, B * q_len, Hq, D] from an engine whose forward runs
        several attention layers (each with its own metadata or wrapper) over the same pool and q."""
        s = self.shape
        want = (len(reqs) * q_len, s.q_heads, s.head_dim)
        out = np.asarray(out.detach().cpu() if hasattr(out, "detach") else out)
        layers = out[None] if out.ndim == 3 else out
        if layers.ndim != 4 or layers.shape[1:] != want:
            self.findings.append(Finding("output", f"{what}: output shape {out.shape}, expected {want} "
                                                   f"or (layers, *{want})"))
            return
        ref = reference(self.world, reqs, q, q_len)
        for li, o in enumerate(layers):
            err = np.abs(o.astype(np.float64) - ref)
            bad = ~(err <= self.atol + self.rtol * np.abs(ref))
            if not bad.any():
                continue
            row = int(np.argwhere(bad)[0][0])
            b, j = divmod(row, q_len)
            worst = float(np.where(np.isnan(err[row]), np.inf, err[row]).max())
            layer = f"layer {li}: " if out.ndim == 4 else ""
            self.findings.append(Finding(
                "output", f"{what}: {layer}request {reqs[b].rid} (live length {lens[b]}, query row {j} of {q_len}) "
                          f"differs from the reference over its true live context: max error {worst:.3g}"
                          + (" (NaN: a read past a live context or of poisoned scratch)" if np.isnan(o[row]).any()
                             else "")))
            return

    # ---- batches

    def _pick(self, n, extra):
        return [r for r in self.world.requests if self.world.room(r, extra)][:n]

    def _step_batch(self, reqs, q_len, eager=False, micro_batch=0):
        w, s = self.world, self.shape
        slots = []
        try:
            for r in reqs:
                slots += w.grow(r, q_len)
        except PoolFull:
            return None
        q, k, v = w.new_tokens(len(reqs) * q_len)
        return StepBatch(rids=[r.rid for r in reqs], q_len=q_len,
                         lens=np.array([r.length + q_len for r in reqs], dtype=np.int32),
                         tables=w.page_table(reqs), slots=np.array(slots, dtype=np.int64),
                         q=q, k_new=k, v_new=v, eager=eager, micro_batch=micro_batch)

    def _commit(self, reqs, batch):
        for i, r in enumerate(reqs):
            sl = slice(i * batch.q_len, (i + 1) * batch.q_len)
            self.world.commit(r, batch.k_new[sl], batch.v_new[sl])

    def _phase(self, phase, expect=(), eager=False):
        self.hooks.phase = phase
        self.hooks.expect = list(expect)
        self.hooks.expect_eager = eager

    def _poison_scratch(self):
        for a in self.engine.scratch().values():
            poison(a)

    # ---- ops

    def op_admit(self, st):
        try:
            r = self.world.admit(min(st["len"], self.shape.max_len))
        except PoolFull:
            return
        self.engine.admitted(r.rid, r.length)

    def op_finish(self, st):
        if self.world.requests:
            r = self.world.requests[st["req"] % len(self.world.requests)]
            self.world.finish(r)
            self.engine.finished(r.rid)

    def op_capture(self, st):
        self._phase("capture", [(st["bs"], st["q_len"])])
        self.hooks.captured.append((st["bs"], st["q_len"]))
        self.engine.capture(st["bs"], st["q_len"])
        self._check_pool(f"capture of batch {st['bs']} q_len {st['q_len']}")

    def op_dummy(self, st):
        self._phase("dummy", [(st["bs"], st["q_len"])])
        self.engine.dummy(st["bs"], st["q_len"])
        self._check_pool(f"dummy run of batch {st['bs']} q_len {st['q_len']}")

    def op_decode(self, st):
        q_len = st["q_len"]
        reqs = self._pick(st["n"], q_len)
        if not reqs:
            return
        batch = self._step_batch(reqs, q_len, eager=bool(st.get("eager")))
        if batch is None:
            return
        lens = batch.lens.copy()
        self._poison_scratch()
        self._phase("prepare", [(len(reqs), q_len)], batch.eager)
        handle = self.engine.prepare(batch)
        if st.get("dummy"):
            self._phase("dummy", [(st["dummy"], q_len)])
            self.engine.dummy(st["dummy"], q_len)
        self._phase("execute", [(len(reqs), q_len)], batch.eager)
        out = self.engine.execute(handle)
        self._commit(reqs, batch)
        what = f"{'eager ' if batch.eager else ''}decode of {len(reqs)} requests q_len {q_len}"
        self._check_pool(what)
        self._check_out(what, reqs, lens, batch.q, q_len, out)

    def op_draft(self, st):
        k = st["k"]
        reqs = self._pick(st["n"], k)
        if not reqs:
            return
        w, s = self.world, self.shape
        try:
            slots = np.array([w.grow(r, k) for r in reqs], dtype=np.int64).T.copy()   # [k, B]
        except PoolFull:
            return
        B = len(reqs)
        toks = [w.new_tokens(B) for _ in range(k)]
        batch = DraftBatch(rids=[r.rid for r in reqs], steps=k,
                           lens=np.array([r.length for r in reqs], dtype=np.int32), tables=w.page_table(reqs),
                           slots=slots, q=np.stack([t[0] for t in toks]),
                           k_new=np.stack([t[1] for t in toks]), v_new=np.stack([t[2] for t in toks]))
        self._poison_scratch()
        self._phase("draft", [(B, 1)])
        outs = self.engine.draft(batch)
        outs = np.asarray(outs.detach().cpu() if hasattr(outs, "detach") else outs)
        if outs.ndim not in (4, 5) or outs.shape[0] != k or outs.shape[-3] != B:
            self.findings.append(Finding("output", f"draft loop returned shape {outs.shape}, expected ({k}, {B}, Hq, D) "
                                                   f"or ({k}, layers, {B}, Hq, D)"))
            return
        for i in range(k):
            for b, r in enumerate(reqs):
                w.commit(r, batch.k_new[i, b:b + 1], batch.v_new[i, b:b + 1])
            if not self.findings:
                self._check_out(f"draft step {i + 1} of {k} over {B} requests", reqs,
                                [r.length for r in reqs], batch.q[i], 1, outs[i])
        self._check_pool(f"draft loop of {k} steps")
        for r in reqs:           # the draft tokens are rejected: their slots are poisoned again
            w.roll_back(r, k)

    def op_micro(self, st):
        reqs = self._pick(st["n"], 1)
        if len(reqs) < 2:
            return
        half = len(reqs) // 2
        parts = [reqs[:half], reqs[half:]]
        batches = [self._step_batch(p, 1, micro_batch=i) for i, p in enumerate(parts)]
        if any(b is None for b in batches):
            return
        self._poison_scratch()
        self._phase("micro", [(len(p), 1) for p in parts])
        outs = self.engine.micro_batches(batches)
        for p, b in zip(parts, batches):
            self._commit(p, b)
        self._check_pool("two micro-batches")
        for i, (p, b, o) in enumerate(zip(parts, batches, outs)):
            if not self.findings:
                self._check_out(f"micro-batch {i} of {len(p)} requests", p, b.lens, b.q, 1, o)

    def step(self, i, st):
        try:
            getattr(self, "op_" + st["op"])(st)
        except Exception as e:   # an engine that raises is a finding, never a crash of the run
            self.findings.append(Finding("raised", f"{st['op']}: the engine raised {type(e).__name__}: {e}"))
        self.hooks.phase = "idle"
        for f in self.findings:
            if f.step < 0:
                f.step = i
        return not self.findings


def run(factory, steps, seed, shape=None, graphs=None):
    """Run `steps` through a fresh engine; stop at the first step with a finding."""
    shape = shape or Shape()
    t0 = time.perf_counter()
    r = Runner(factory, shape, seed, graphs)
    done = 0
    counts = {}
    for i, st in enumerate(steps):
        done += 1
        counts[st["op"]] = counts.get(st["op"], 0) + 1
        if not r.step(i, st):
            break
    counts.update(replays=r.hooks.replays, mints=r.hooks.mints)
    return Outcome(r.findings, done, time.perf_counter() - t0, counts)


# ---- the state machine

def draw(rng, ladder, n_steps, max_q_len=4, start_requests=(2, 6), ops=None):
    """A step sequence: admissions, the engine's capture ladder in a random order, then serving
    steps drawn by weight: decodes (replayable, padded, above the ladder, eager, at a q_len never
    captured, with a dummy run between prepare and execute), draft loops, micro-batches, dummy
    runs, admissions of short and long requests, finishes. `ops`: the serving ops the engine has
    (default all; an engine without micro-batches or a draft loop leaves them out)."""
    steps = []
    for _ in range(int(rng.integers(*start_requests, endpoint=True))):
        steps.append({"op": "admit", "len": _length(rng)})
    for i in rng.permutation(len(ladder)):
        bs, q = ladder[i]
        steps.append({"op": "capture", "bs": int(bs), "q_len": int(q)})
    max_bs = max([b for b, _ in ladder] or [1])
    captured_q = sorted({q for _, q in ladder}) or [1]
    uncaptured = [q for q in range(1, max_q_len + 1) if q not in captured_q] or [max(captured_q) + 1]
    mix = {"decode": 8, "draft": 3, "micro": 2, "dummy": 1, "admit": 2, "finish": 1}
    ops = [o for o in mix if ops is None or o in ops or o in ("decode", "admit", "finish")]
    weights = np.array([mix[o] for o in ops], dtype=np.float64)
    while len(steps) < n_steps:
        op = ops[rng.choice(len(ops), p=weights / weights.sum())]
        if op == "decode":
            kind = rng.random()
            q = int(rng.choice(captured_q))
            eager = False
            dummy = 0
            if kind < 0.12:
                n = int(rng.integers(max_bs + 1, max_bs + 4))               # above the ladder
            elif kind < 0.22:
                q = int(rng.choice(uncaptured))                             # a q_len never captured
                n = int(rng.integers(1, max_bs + 1))
            else:
                n = int(rng.integers(1, max_bs + 1))
                eager = bool(rng.random() < 0.1)
                if rng.random() < 0.2:
                    dummy = int(rng.choice([b for b, _ in ladder] or [1]))
            steps.append({"op": "decode", "n": n, "q_len": q, "eager": eager, "dummy": dummy})
        elif op == "draft":
            steps.append({"op": "draft", "n": int(rng.integers(1, max_bs + 1)), "k": int(rng.integers(1, 4))})
        elif op == "micro":
            steps.append({"op": "micro", "n": int(rng.integers(2, 2 * max_bs + 1))})
        elif op == "dummy":
            steps.append({"op": "dummy", "bs": int(rng.choice([b for b, _ in ladder] or [1])),
                          "q_len": int(rng.choice(captured_q))})
        elif op == "admit":
            steps.append({"op": "admit", "len": _length(rng)})
        else:
            steps.append({"op": "finish", "req": int(rng.integers(0, 8))})
    return steps


def _length(rng):
    """Short and long contexts mixed, so a replay at a long length follows one at a short one."""
    if rng.random() < 0.5:
        return int(rng.integers(1, 17))
    return int(rng.integers(40, 200))


def ladder_of(factory, shape=None):
    return probe(factory, shape)[0]


def probe(factory, shape=None):
    """(ladder, ops) of the engine `factory` makes."""
    engine = Runner(factory, shape or Shape(), 0).engine
    return [tuple(int(x) for x in k) for k in engine.ladder()], set(engine.ops())


def explore(factory, seed, n_steps=60, shape=None, graphs=None, rounds=1, log=print, max_q_len=4):
    """Draw `rounds` sequences from `seed` on and run each through a fresh engine; return
    (seed, steps, outcome) of the first failing one, or (None, None, outcomes) when all pass."""
    shape = shape or Shape()
    ladder, ops = probe(factory, shape)
    outcomes = []
    for r in range(rounds):
        s = seed + r
        steps = draw(np.random.default_rng(s), ladder, n_steps, max_q_len, ops=ops)
        log(f"pav lifecycle: seed {s}, {len(steps)} steps")
        out = run(factory, steps, s, shape, graphs)
        outcomes.append(out)
        if not out.passed:
            return s, steps, out
    return None, None, outcomes
