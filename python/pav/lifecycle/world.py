# SPDX-License-Identifier: Apache-2.0
"""The ground truth of a lifecycle run: the KV pool, the requests, their live
lengths and page tables at every step, and the fp64 reference an attention
call's output is compared with.

The pool is pav's memory; the engine under test reads it and writes the new
tokens' K and V into it through its own slot mapping. pav keeps a second copy
(`expected`) that only pav writes: every slot outside a live context is NaN in
both, so a read past a live length shows as NaN, and after each engine call the
pool must equal `expected` bit for bit (NaN where NaN), so a write through a
stale slot mapping shows as the slot it hit.
"""
from dataclasses import dataclass, field

import numpy as np

from pav import worker


_FIELDS = ("q_heads", "kv_heads", "head_dim", "page_size", "num_pages", "max_pages_per_request", "reserved_pages")


@dataclass(frozen=True)
class Shape:
    """The attention layer's dimensions and the pool's size."""
    q_heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    page_size: int = 8
    num_pages: int = 512
    max_pages_per_request: int = 48
    reserved_pages: int = 1         # pages 0.. never given to a request: an engine's padding target

    def __post_init__(self):
        for name in _FIELDS:
            v = getattr(self, name)
            low = 0 if name == "reserved_pages" else 1
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"Shape.{name} must be an integer >= {low}, got {v!r}")
        if self.reserved_pages >= self.num_pages:
            raise ValueError(f"Shape.reserved_pages ({self.reserved_pages}) leaves none of the {self.num_pages} pages")
        if self.q_heads % self.kv_heads:
            raise ValueError(f"Shape.q_heads ({self.q_heads}) must be a multiple of kv_heads ({self.kv_heads})")

    @property
    def max_len(self):
        return self.page_size * self.max_pages_per_request

    def to_json(self):
        return {k: getattr(self, k) for k in _FIELDS}


PRECISIONS = ("f32", "bf16", "f16")


def representable(x, precision):
    """float32 `x` rounded (to nearest, ties to even) to values exact in `precision`."""
    if precision == "f32":
        return x
    if precision == "f16":
        return x.astype(np.float16).astype(np.float32)
    if precision == "bf16":
        return worker.bf16_to_f32(worker.f32_to_bf16(np.ascontiguousarray(x, dtype=np.float32)))
    raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")


class KVPool:
    """K and V, [num_pages, page_size, kv_heads, head_dim] float32 each: NumPy arrays, or, with
    `device` (a torch device), torch tensors there, for an engine that runs on the device."""

    def __init__(self, shape: Shape, device=None):
        self.shape = shape
        self.device = device
        dims = (shape.num_pages, shape.page_size, shape.kv_heads, shape.head_dim)
        if device is None:
            self.k = np.full(dims, np.nan, dtype=np.float32)
            self.v = np.full(dims, np.nan, dtype=np.float32)
        else:
            import torch
            self._torch = torch
            self.k = torch.full(dims, float("nan"), dtype=torch.float32, device=device)
            self.v = torch.full(dims, float("nan"), dtype=torch.float32, device=device)

    def _index(self, x):
        return x if self.device is None else self._torch.as_tensor(x, device=self.device)

    def put(self, pages, offs, k, v):
        """Rows k[i], v[i] (NumPy) at (pages[i], offs[i])."""
        pages, offs = self._index(np.asarray(pages)), self._index(np.asarray(offs))
        self.k[pages, offs] = self._index(np.asarray(k, dtype=np.float32))
        self.v[pages, offs] = self._index(np.asarray(v, dtype=np.float32))

    def host(self):
        """(K, V) as NumPy arrays (a copy from the device)."""
        if self.device is None:
            return self.k, self.v
        return self.k.cpu().numpy(), self.v.cpu().numpy()

    def load(self, k, v):
        self.k[...] = self._index(k)
        self.v[...] = self._index(v)


@dataclass
class Request:
    rid: int
    pages: list = field(default_factory=list)
    length: int = 0


class PoolFull(Exception):
    pass


class World:
    """Requests, pages and lengths as they truly are; pav's copy of the pool."""

    def __init__(self, shape: Shape, rng: np.random.Generator, device=None, precision="f32"):
        self.shape = shape
        self.rng = rng
        self.precision = precision         # every value pav draws is exact in this type
        self.pool = KVPool(shape, device)  # the engine's view: it reads and writes this
        self.expected = KVPool(shape)      # pav's copy: only pav writes it
        self.free_pages = list(range(shape.num_pages - 1, shape.reserved_pages - 1, -1))
        self.requests = []                 # live, in admission order
        self.next_rid = 0

    # ---- pages and slots

    def _ensure_pages(self, req, length):
        need = -(-length // self.shape.page_size)
        if need > self.shape.max_pages_per_request:
            raise PoolFull(f"request {req.rid} would need {need} pages, past {self.shape.max_pages_per_request}")
        while len(req.pages) < need:
            if not self.free_pages:
                raise PoolFull("the KV pool has no free page")
            req.pages.append(self.free_pages.pop())

    def slot(self, req, pos):
        """The flat slot index (page * page_size + offset) of token `pos` of `req`."""
        return req.pages[pos // self.shape.page_size] * self.shape.page_size + pos % self.shape.page_size

    def room(self, req, extra):
        return req.length + extra <= self.shape.max_len

    def _write(self, flat_slots, k, v, into_pool):
        pages, offs = np.divmod(np.asarray(flat_slots, dtype=np.int64), self.shape.page_size)
        self.expected.put(pages, offs, k, v)
        if into_pool:
            self.pool.put(pages, offs, k, v)

    def _poison(self, flat_slots):
        pages, offs = np.divmod(np.asarray(flat_slots, dtype=np.int64), self.shape.page_size)
        nan = np.full((len(pages), self.shape.kv_heads, self.shape.head_dim), np.nan, dtype=np.float32)
        for pool in (self.pool, self.expected):
            pool.put(pages, offs, nan, nan)

    def new_kv(self, n):
        """K and V of `n` new tokens. A quarter of the keys are loud (three times the scale), so such a
        token takes much of its request's attention: a read that misses it (a stale length, a
        stale plan) is off by far more than a 16-bit kernel's rounding."""
        s = self.shape
        k = self.rng.standard_normal((n, s.kv_heads, s.head_dim)).astype(np.float32)
        v = self.rng.standard_normal((n, s.kv_heads, s.head_dim)).astype(np.float32)
        k[self.rng.random(n) < 0.25] *= 3.0
        return representable(k, self.precision), representable(v, self.precision)

    def new_q(self, n):
        s = self.shape
        return representable(self.rng.standard_normal((n, s.q_heads, s.head_dim)).astype(np.float32), self.precision)

    def new_tokens(self, n):
        """q, K and V of `n` new tokens of a step. Half the tokens attend mostly to themselves (the
        key leans towards the mean of its query group), so a read that leaves out the newest token
        is off by a large fraction of the output, far past a 16-bit kernel's rounding."""
        s = self.shape
        q = self.new_q(n)
        k, v = self.new_kv(n)
        near = self.rng.random(n) < 0.5
        mean = q.reshape(n, s.kv_heads, s.q_heads // s.kv_heads, s.head_dim).mean(axis=2)
        k[near] = representable(0.5 * k[near] + 1.5 * mean[near], self.precision)
        return q, k, v

    # ---- requests

    def admit(self, length):
        """A request whose first `length` tokens are already in the pool (prefill is not under test)."""
        req = Request(self.next_rid)
        self._ensure_pages(req, length)
        self.next_rid += 1
        k, v = self.new_kv(length)
        self._write([self.slot(req, pos) for pos in range(length)], k, v, into_pool=True)
        req.length = length
        self.requests.append(req)
        return req

    def finish(self, req):
        self._poison([self.slot(req, pos) for pos in range(req.length)])
        self.free_pages.extend(reversed(req.pages))
        self.requests.remove(req)

    def grow(self, req, n):
        """Reserve the slots of `n` new tokens (the engine writes them); returns their flat slots."""
        self._ensure_pages(req, req.length + n)
        return [self.slot(req, req.length + i) for i in range(n)]

    def commit(self, req, k, v):
        """The engine was asked to write these tokens: pav's copy gets them, the live length grows."""
        self._write(self.grow(req, len(k)), k, v, into_pool=False)
        req.length += len(k)

    def roll_back(self, req, n):
        """Drop the last `n` tokens (rejected draft tokens): their slots are poisoned again."""
        self._poison([self.slot(req, pos) for pos in range(req.length - n, req.length)])
        req.length -= n

    def page_table(self, reqs, width=None):
        width = width or self.shape.max_pages_per_request
        t = np.zeros((len(reqs), width), dtype=np.int32)
        for i, r in enumerate(reqs):
            t[i, :len(r.pages)] = r.pages
        return t

    # ---- checks

    def pool_differences(self, limit=3):
        """Slots where the engine's pool differs from pav's copy, (page, offset, 'k' or 'v', how):
        stray writes first, then overwritten tokens, then tokens never written."""
        kinds = {"stray": [], "over": [], "missing": []}
        how = {"stray": "written, though no live token and no new token of this step is there",
               "over": "a token there was overwritten with other values",
               "missing": "a token pav expects there was never written (or was overwritten with NaN)"}
        for name, a, b in zip("kv", self.pool.host(), self.expected.host()):
            same = (a == b) | (np.isnan(a) & np.isnan(b))
            same[:self.shape.reserved_pages] = True          # the engine's to write padding to
            for p, o in np.argwhere(~same.all(axis=(2, 3))):
                kind = "stray" if np.isnan(b[p, o]).all() else "missing" if np.isnan(a[p, o]).any() else "over"
                kinds[kind].append((int(p), int(o), name, how[kind]))
        return [d for k in ("stray", "over", "missing") for d in kinds[k][:limit]]

    def owner_of(self, page, offset):
        for r in self.requests:
            if page in r.pages:
                pos = r.pages.index(page) * self.shape.page_size + offset
                return f"request {r.rid} token {pos}" + ("" if pos < r.length else " (past its live length)")
        return "a free page"


def reference(world, reqs, q, q_len):
    """fp64 attention of `q` ([len(reqs) * q_len, Hq, D]) over each request's TRUE live context, from
    pav's own copy of the pool. Query row j of a request of live length L attends tokens
    [0, L - q_len + j + 1) (the q_len new tokens are the last q_len of its context)."""
    s = world.shape
    g = s.q_heads // s.kv_heads
    out = np.empty((len(reqs) * q_len, s.q_heads, s.head_dim), dtype=np.float64)
    scale = 1.0 / np.sqrt(s.head_dim)
    for b, r in enumerate(reqs):
        slots = np.array([world.slot(r, pos) for pos in range(r.length)], dtype=np.int64)
        pages, offs = np.divmod(slots, s.page_size)
        k = world.expected.k[pages, offs].astype(np.float64)      # [L, Hkv, D]
        v = world.expected.v[pages, offs].astype(np.float64)
        for j in range(q_len):
            n = r.length - q_len + j + 1
            qr = q[b * q_len + j].astype(np.float64).reshape(s.kv_heads, g, s.head_dim)
            sc = np.einsum("hgd,lhd->hgl", qr, k[:n]) * scale
            sc -= sc.max(axis=-1, keepdims=True)
            p = np.exp(sc)
            p /= p.sum(axis=-1, keepdims=True)
            out[b * q_len + j] = np.einsum("hgl,lhd->hgd", p, v[:n]).reshape(s.q_heads, s.head_dim)
    return out
