# SPDX-License-Identifier: Apache-2.0
"""What an engine's attention backend is wrapped in, and what pav hands it.

The adapter (`Adapter`) is the engine's, written once per backend: a handful
of methods in the shape engines already have (capture a graph for a key;
prepare a step's metadata, refreshing a captured graph's buffers in place;
execute it, by replay or eagerly; a speculative draft loop that advances
lengths in place; a dummy run; two micro-batches in flight). The `Hooks` are
pav's: the engine calls them where it mints a plan, compiles a kernel variant,
captures a graph or replays one, and pav checks each call against the step it
is in. docs/verify-your-engine.md says how to wrap the usual backend styles.
"""
from dataclasses import dataclass

import numpy as np


@dataclass
class _Batch:
    rids: list
    lens: np.ndarray
    tables: np.ndarray
    slots: np.ndarray
    q: np.ndarray
    k_new: np.ndarray
    v_new: np.ndarray

    @property
    def size(self):
        return len(self.rids)


@dataclass
class StepBatch(_Batch):
    """One forward over `len(rids)` requests, each with `q_len` new tokens.

    lens:   int32 [B], each request's live length INCLUDING this step's new tokens
    tables: int32 [B, max_pages], each request's pages (0 past its last page)
    slots:  int64 [B * q_len], the flat slot (page * page_size + offset) each new token's K/V goes to
    q:      float32 [B * q_len, Hq, D]; k_new, v_new: float32 [B * q_len, Hkv, D]
    eager:  pav asks for an eager run (no graph may be replayed for it)
    micro_batch: 0, or 1 for the second of two micro-batches in flight
    """
    q_len: int = 1
    eager: bool = False
    micro_batch: int = 0


@dataclass
class DraftBatch(_Batch):
    """A speculative draft loop of `steps` single-token steps over `len(rids)` requests.

    lens:   int32 [B], live lengths BEFORE the first draft token; draft step i attends over lens + i + 1
    tables: int32 [B, max_pages], covering lens + steps
    slots:  int64 [steps, B], where draft token i of each request goes
    q:      float32 [steps, B, Hq, D]; k_new, v_new: float32 [steps, B, Hkv, D]
    The engine advances its own lengths in place between steps, as engines do; pav checks each
    step's output against the true lengths of that step.
    """
    steps: int = 1


class Adapter:
    """Subclass per backend. Every method but the ones marked optional must be given.

    The engine gets pav's `Hooks` and the `KVPool` when the factory builds it, reads K/V from the
    pool and writes each new token's K/V to the slot the batch names (a slot of -1 or a padded row
    writes nothing)."""

    def ladder(self):
        """The (batch size, q_len) keys the engine captures graphs for, as its start-up does."""
        raise NotImplementedError

    def capture(self, batch_size, q_len):
        """Capture the graph of one key (with the engine's own synthetic inputs, as at start-up)."""
        raise NotImplementedError

    def prepare(self, batch):
        """Build the step's metadata (and refresh a graph's buffers in place if it will replay
        one); return a handle for execute(). Nothing may run attention yet."""
        raise NotImplementedError

    def execute(self, handle):
        """Run the prepared step (replay or eager, as the engine dispatches); return the real rows'
        output, [B * q_len, Hq, D], or [layers, B * q_len, Hq, D] for a forward of several attention
        layers (each with its own metadata or wrapper, all over the same pool and q)."""
        raise NotImplementedError

    def draft(self, batch):
        """Run the draft loop; return [steps, B, Hq, D] (or [steps, layers, B, Hq, D])."""
        raise NotImplementedError

    def dummy(self, batch_size, q_len):
        """A dummy (padding / idle-rank / warm-up) forward with the engine's synthetic inputs."""
        raise NotImplementedError

    def micro_batches(self, batches):
        """Two micro-batches in flight. Optional: the default prepares both, then executes both;
        an engine with its own overlap schedule runs that instead."""
        handles = [self.prepare(b) for b in batches]
        return [self.execute(h) for h in handles]

    def admitted(self, rid, length):
        """Optional: request `rid` joined, its first `length` tokens already in the pool (an engine
        with its own request table registers it here; its pages come with each step's batch)."""

    def finished(self, rid):
        """Optional: request `rid` left; its pages are poisoned and may go to a later request."""

    def ops(self):
        """Optional: the serving ops the engine has, of 'draft', 'micro', 'dummy' (decode, admit
        and finish always); pav draws no other. Default: all."""
        return {"draft", "micro", "dummy"}

    def precision(self):
        """Optional: the type the engine computes in, 'f32' (default), 'bf16' or 'f16': every q, K and V
        pav draws is exact in it, so the engine's casts lose nothing."""
        return "f32"

    def tolerance(self):
        """Optional: (absolute, relative) tolerance of an output against the fp64 reference. Default
        (1e-4, 1e-4), for float32 accumulation; a kernel with 16-bit outputs needs about (2e-2, 2e-2)."""
        return (1e-4, 1e-4)

    def live_buffers(self):
        """Optional: {name: array} of the buffers a captured graph may read, as the engine holds
        them now. pav checks that what a graph recorded at capture is still these at replay."""
        return {}

    def scratch(self):
        """Optional: {name: array} of buffers that carry nothing from one step to the next
        (partials, workspaces, staging outputs). pav poisons them before every step."""
        return {}

    def plan_cache_bound(self):
        """Optional: the most plans the engine may hold; None leaves only 'no mint outside capture'."""
        return None

    def describe(self):
        """Optional: a JSON-able description saved with a failing sequence."""
        return {"adapter": type(self).__name__}


def data_ptr(x):
    """Address of an array's first element: NumPy or anything with data_ptr() (a torch tensor)."""
    if hasattr(x, "data_ptr"):
        return int(x.data_ptr())
    return int(np.asarray(x).__array_interface__["data"][0])


def _overlaps(a, b):
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.shares_memory(a, b)
    sa, sb = data_ptr(a), data_ptr(b)
    ea = sa + a.numel() * a.element_size()
    eb = sb + b.numel() * b.element_size()
    return sa < eb and sb < ea


def poison(arr):
    """Fill with NaN (floating) or a value no index or length may take (integers)."""
    if hasattr(arr, "data_ptr") and not isinstance(arr, np.ndarray):
        if arr.is_floating_point():
            arr.fill_(float("nan"))
        else:
            arr.fill_(-(2 ** 30))
        return
    if np.issubdtype(arr.dtype, np.floating):
        arr.fill(np.nan)
    else:
        arr.fill(-(2 ** 30))


@dataclass
class Finding:
    check: str
    message: str
    step: int = -1

    def to_json(self):
        return {"check": self.check, "message": self.message, "step": self.step}


class Graph:
    """A captured graph: its key, the route it recorded, the buffers it reads (name -> array, with
    each one's identity and address at capture) and how to run it."""

    def __init__(self, key, fn, reads, route, runner=None):
        self.key = tuple(key)
        self.fn = fn
        self.reads = dict(reads)
        self.route = route
        self.recorded = {n: (id(a), data_ptr(a), tuple(a.shape)) for n, a in self.reads.items()}
        self.runner = runner


class EmulatedGraphs:
    """Graph semantics on the CPU: capture runs the callable once and records the buffers and the
    route; replay re-runs the recorded callable, which reads whatever those buffers hold then. A
    buffer the engine has since replaced is, to the graph, freed memory: replay poisons it first.
    `pool_device`: a torch device for the KV pool (an engine in torch on the CPU); None: NumPy."""

    name = "emulated"

    def __init__(self, pool_device=None):
        self.pool_device = pool_device

    def capture(self, key, fn, reads, route):
        fn()
        return Graph(key, fn, reads, route)

    def replay(self, graph, orphaned):
        for a in orphaned:
            poison(a)
        graph.fn()


class TorchGraphs:
    """Real CUDA graphs through torch.cuda.graph: capture records the kernels `fn` launches with
    the buffers' addresses; replay launches them again. (Warm-up on a side stream first, as torch
    asks.) Orphaned buffers are left alone: the caching allocator may already have reused them."""

    name = "torch.cuda.graph"

    def __init__(self, device="cuda", mempool=None):
        import torch
        self.torch = torch
        self.pool_device = device          # the KV pool lives there too
        self.mempool = mempool

    def capture(self, key, fn, reads, route):
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.mempool):
            fn()
        return Graph(key, fn, reads, route, runner=g)

    def replay(self, graph, orphaned):
        graph.runner.replay()


class Hooks:
    """pav's side of the seam: the engine calls these; each call is checked against the step."""

    def __init__(self, graphs=None):
        self.graphs = graphs or EmulatedGraphs()
        self.phase = "idle"          # startup, capture, prepare, execute, draft, dummy, micro
        self.expect = []             # (batch size, q_len) of the forward(s) in flight
        self.expect_eager = False
        self.findings = []
        self.live_buffers = dict     # set by the runner: the adapter's live_buffers
        self.plan_bound = None
        self.mints = 0
        self.specialisations = 0
        self.replays = 0
        self.captured = []           # keys pav asked the engine to capture

    def _find(self, check, message):
        self.findings.append(Finding(check, message))

    # ---- plans and kernel variants

    def plan_minted(self, what, cache_size=None):
        """The engine made a new plan (allocated its buffers); `cache_size`: plans it now holds."""
        self.mints += 1
        if self.phase not in ("startup", "capture"):
            self._find("mint-outside-capture",
                       f"a plan was minted during {self.phase} ({what}); plans may be minted only at start-up or "
                       f"while graphs are captured (a runtime mint allocates and compiles in the serving path)")
        if cache_size is not None and self.plan_bound is not None and cache_size > self.plan_bound:
            self._find("plan-cache-bound", f"the plan cache holds {cache_size} plans, past its bound of "
                                           f"{self.plan_bound} ({what})")

    def specialised(self, what):
        """The engine compiled (or would compile) a kernel variant for `what`."""
        self.specialisations += 1
        if self.phase not in ("startup", "capture"):
            self._find("specialise-outside-capture",
                       f"a kernel variant was compiled during {self.phase} ({what}); variants may be compiled "
                       f"only at start-up or capture")

    # ---- graphs

    def capture_graph(self, key, fn, reads, route=None):
        """Capture `fn` as the graph of `key` (batch size, q_len, anything else); `reads`: {name:
        buffer} it reads or writes; `route`: the kernel path it takes ('planned', 'uniform', ...)."""
        if self.phase != "capture":
            self._find("capture-outside-capture", f"a graph for {tuple(key)} was captured during {self.phase}")
        return self.graphs.capture(key, fn, reads, route)

    def replay_graph(self, graph, route=None, wrote=None):
        """Replay `graph`. `route`: the path this step's metadata was prepared for (None: not
        compared); `wrote`: {name: buffer} this step's refresh wrote (each must be one the graph reads)."""
        self.replays += 1
        bs, q_len = graph.key[0], graph.key[1]
        if self.expect_eager:
            self._find("replay-when-eager", f"a step run eagerly replayed the graph of {graph.key}")
        if self.expect and not any(q == q_len and b <= bs for b, q in self.expect):
            want = ", ".join(f"batch {b} q_len {q}" for b, q in self.expect)
            self._find("graph-key", f"the graph captured for batch {bs} q_len {q_len} was replayed for a step of "
                                    f"{want}; a shape never captured must fall back to eager")
        if route is not None and route != graph.route:
            self._find("route", f"the graph of {graph.key} recorded route '{graph.route}' at capture, but this "
                                f"step's metadata was prepared for route '{route}'")
        live = self.live_buffers()
        orphaned = []
        for name, (ident, ptr, shape) in graph.recorded.items():
            now = live.get(name)
            if now is None:
                continue
            if id(now) != ident and data_ptr(now) != ptr:
                self._find("buffer-moved", f"buffer '{name}' read by the graph of {graph.key} was reallocated after "
                                           f"capture (address {ptr:#x} at capture, {data_ptr(now):#x} now)")
                orphaned.append(graph.reads[name])
        for name, arr in (wrote or {}).items():
            if not any(_overlaps(arr, r) for r in graph.reads.values()):
                self._find("refresh-target", f"the refresh before replaying {graph.key} wrote '{name}', which the "
                                             f"graph does not read; the graph reads its capture-bound buffers")
        self.graphs.replay(graph, orphaned)
