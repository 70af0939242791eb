# SPDX-License-Identifier: Apache-2.0
"""Plumbing for a pav worker: the request loop of the worker protocol, `.npy`
inputs and outputs with their raw-bit dtypes, the cache formats read as pav
sends them, and a check of a call against the worker's own description.

A worker module builds a `Kernel` (a description dict and a decode function)
and calls `serve(kernel)`. The decode function receives a `Call` (NumPy arrays
and scalars: q widened to float32, the caches left as they are stored, in the
layout, dtype and page table the kernel declares) and returns `(out, lse)`: out
a float32 array of q's shape, lse a float32 [rows, Hq] array or None. serve()
rounds out to the dtype pav asks for and writes the files.

The cache formats (kernels/cache_format.hpp is the C++ home of the same rules):
layouts packed (K [pages, Hkv, D/16, page_size, 16], V plain [pages, Hkv, D,
page_size] or trans [pages, Hkv, page_size/16, D, 16]), nhd ([pages, page_size,
Hkv, D]) and hnd ([pages, Hkv, page_size, D]); K and V apart or, for nhd and
hnd, one combined kv_cache [pages, 2, ...] ([:, 0] K, [:, 1] V), or (MLA) one
k_cache whose rows' first v_head_dim dims are the values; pages found
through block tables or CSR lists (kv_indptr, kv_indices, kv_last_page_len);
cache dtypes bf16, f16 and the fp8 flavours e4m3fn, e4m3fnuz and e5m2; K and V
scales each none, per tensor [1], per KV head [Hkv] or per token [pages, Hkv,
page_size]. `Call.pages(s)` lists a sequence's pages and `Call.kv(pages, head)`
reads K and V of those pages as float32, indexing the cache as it is.

Only NumPy and the standard library are used, so any Python with NumPy can run
a worker built on it. See docs/verify-your-kernel.md, "Worker protocol".
"""
import errno
import json
import os
import sys
import threading
import traceback
import weakref

import numpy as np

PROTOCOL = 1

# dtype names of the protocol -> the .npy element type they cross as.
NPY_TYPES = {
    "f32": np.dtype("<f4"),
    "f16": np.dtype("<f2"),
    "bf16": np.dtype("<u2"),
    "fp8_e4m3fn": np.dtype("u1"),
    "fp8_e4m3fnuz": np.dtype("u1"),
    "fp8_e5m2": np.dtype("u1"),
    "i32": np.dtype("<i4"),
    "i64": np.dtype("<i8"),
}

FP8_DTYPES = ("fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2")
CACHE_DTYPES = ("bf16", "f16") + FP8_DTYPES
CACHE_LAYOUTS = ("packed", "nhd", "hnd")
PAGE_TABLES = ("block_table", "csr")
CSR_LISTS = ("kv_indptr", "kv_indices", "kv_last_page_len")
LARGE_CACHE_ELEMENTS = 2 ** 31  # a cache spanning this many elements has offsets past int32


# Every cache format the example workers read as it is stored (they index the
# cache in place, through its strides: a padded cache arrives as its span).
EVERY_CACHE_FORMAT = {
    "cache_dtypes": ["bf16", "f16", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2"],
    "cache_layouts": ["packed", "nhd", "hnd"],
    "v_layouts": ["plain", "trans"],
    "kv_storage": ["separate", "combined", "latent"],
    "mla_dims": [[512, 64], [128, 64]],  # MLA heads (latent, rope): head dims 576 and 192
    "page_tables": ["block_table", "csr"],
    "strided_cache": True,
    "scale_kinds": ["none", "per_tensor", "per_head", "per_token"],
    "mixed_scales": True,
    "block_sizes": [1, 2, 8, 16, 32, 64, 128, 256],
}


def fp8_table(flavour):
    """The 256 values of an fp8 flavour, indexed by code (NaN codes give NaN).

    e4m3fn: exponent bias 7, NaN at 0x7f and 0xff, 0x80 is -0.
    e4m3fnuz: exponent bias 8, NaN at 0x80 only, no negative zero.
    Value of an e4m3 code: subnormal (exponent field 0) m * 2^(1 - bias - 3),
    normal (8 + m) * 2^(e - bias - 3), m the 3 mantissa bits.
    e5m2: the upper byte of an f16 (exponent bias 15, 2 mantissa bits, with
    its infinities and NaNs).
    """
    codes = np.arange(256, dtype=np.int64)
    if flavour == "fp8_e5m2":
        return (codes.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    if flavour not in ("fp8_e4m3fn", "fp8_e4m3fnuz"):
        raise ValueError("unknown fp8 flavour %r" % flavour)
    fnuz = flavour == "fp8_e4m3fnuz"
    bias = 8 if fnuz else 7
    e = (codes >> 3) & 0xF
    m = codes & 0x7
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - 3),
                   np.ldexp((8 + m).astype(np.float64), e - bias - 3))
    value = np.where(codes & 0x80, -mag, mag)
    nan = codes == 0x80 if fnuz else (codes & 0x7F) == 0x7F
    value[nan] = np.nan
    return value.astype(np.float32)


_FP8_TABLES = {}


def _fp8_lut(flavour):
    if flavour not in _FP8_TABLES:
        _FP8_TABLES[flavour] = fp8_table(flavour)
    return _FP8_TABLES[flavour]


def bf16_to_f32(bits):
    """Raw bf16 bits (uint16) -> float32: the bits are the top half of a float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 -> raw bf16 bits, rounded to nearest even; NaN stays a (quiet) NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


def is_torch(x):
    """True for a torch tensor (an in-process kernel of device memory gets them)."""
    return type(x).__module__.split(".")[0] == "torch"


def torch_dtype(dtype):
    """The torch dtype of an input of the protocol's dtype name as a device
    kernel's Call holds it: bf16 as torch.bfloat16, fp8 as its uint8 codes (as
    on the host; Call.torch views them as torch's fp8 dtype)."""
    import torch
    names = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32", "i64": "int64"}
    return getattr(torch, names[dtype]) if dtype in names else torch.uint8


def widen(array, dtype):
    """An input of a float dtype as float32 values (bf16 arrives as raw bits;
    a torch tensor is in its own dtype)."""
    if is_torch(array):
        if dtype not in ("bf16", "f16", "f32"):
            raise ValueError("not a float dtype: %r" % dtype)
        return array.float()
    if dtype == "bf16":
        return bf16_to_f32(array)
    if dtype in ("f16", "f32"):
        return array.astype(np.float32)
    raise ValueError("not a float dtype: %r" % dtype)


def cache_to_f32(elements, dtype):
    """Cache elements as stored (bf16 raw bits, f16, fp8 codes of any flavour)
    -> a new float32 array of the same shape: the one decode of every cache
    dtype the workers share."""
    if dtype in FP8_DTYPES:
        return _fp8_lut(dtype)[np.asarray(elements, dtype=np.uint8)]
    if dtype == "bf16":
        return bf16_to_f32(elements)
    if dtype == "f16":
        return np.asarray(elements, dtype=np.float16).astype(np.float32)
    raise ValueError("not a cache dtype: %r" % dtype)


def narrow(values, dtype):
    """float32 values -> the array written for `dtype` (bf16 as raw bits)."""
    if dtype == "bf16":
        return f32_to_bf16(values)
    if dtype == "f16":
        return values.astype(np.float16)
    if dtype == "f32":
        return values.astype(np.float32)
    raise ValueError("cannot write dtype %r" % dtype)


# ---- reading a cache where it lies ----------------------------------------------
#
# The functions below take NumPy arrays with NumPy index arrays, or torch
# tensors with long index tensors on their device: they only index, permute
# and reshape.

# The forms a K or V tensor comes in, and the axis that holds its KV heads:
#   packed_k [pages, Hkv, D/16, page_size, 16]   (packed K)
#   plain    [pages, Hkv, D, page_size]          (packed V)
#   trans    [pages, Hkv, page_size/16, D, 16]   (packed V)
#   nhd      [pages, page_size, Hkv, D]
#   hnd      [pages, Hkv, page_size, D]
CACHE_FORMS = ("packed_k", "plain", "trans", "nhd", "hnd")


def _permute(x, *axes):
    return x.permute(*axes) if hasattr(x, "permute") else x.transpose(axes)


def gather(cache, form, pages, heads):
    """The elements of `cache`, a K or V tensor in `form`, for the tokens of
    `pages` (page ids, in order) and the KV heads `heads` (head indices):
    [len(heads), len(pages) * page_size, D] in the cache's own dtype, token
    t = i * page_size + slot of page i. Only those pages are read: the cache is
    indexed as it is, never converted whole."""
    if isinstance(cache, np.ndarray):
        pages = np.asarray(pages, dtype=np.intp)
        heads = np.asarray(heads, dtype=np.intp)
    n, nh = pages.shape[0], heads.shape[0]
    if form == "nhd":
        # The two index arrays sit apart (a slice between): their broadcast
        # dims come first, [n, nh, page_size, D].
        x = cache[pages[:, None], :, heads[None, :]]
        return _permute(x, 1, 0, 2, 3).reshape(nh, n * x.shape[2], x.shape[3])
    x = cache[pages[:, None], heads[None, :]]        # [n, nh, ...the page's rest]
    if form == "hnd":                                # [n, nh, page_size, D]
        return _permute(x, 1, 0, 2, 3).reshape(nh, n * x.shape[2], x.shape[3])
    if form == "packed_k":                           # [n, nh, D/16, page_size, 16]
        return _permute(x, 1, 0, 3, 2, 4).reshape(nh, n * x.shape[3], x.shape[2] * 16)
    if form == "plain":                              # [n, nh, D, page_size]
        return _permute(x, 1, 0, 3, 2).reshape(nh, n * x.shape[3], x.shape[2])
    if form == "trans":                              # [n, nh, page_size/16, D, 16]
        return _permute(x, 1, 0, 2, 4, 3).reshape(nh, n * x.shape[2] * 16, x.shape[3])
    raise ValueError("unknown cache form %r" % form)


def scale_kind(scale, hkv):
    """The kind of a K or V scale tensor (None: absent) for a cache of hkv KV
    heads, read off its shape as pav tells them apart: [1] per_tensor (also
    when Hkv is 1), [Hkv] per_head, [pages, Hkv, page_size] per_token."""
    if scale is None:
        return "none"
    if len(scale.shape) == 1 and scale.shape[0] == 1:
        return "per_tensor"
    if len(scale.shape) == 1 and scale.shape[0] == hkv:
        return "per_head"
    if len(scale.shape) == 3:
        return "per_token"
    raise ValueError("scale of shape %s is of no kind" % (list(scale.shape),))


def gather_scale(scale, kind, pages, heads):
    """A scale's values for the tokens of `pages` and the KV heads `heads`
    (as gather() orders them), broadcastable to [len(heads), tokens]: [1, 1]
    per tensor, [len(heads), 1] per head, [len(heads), tokens] per token;
    None for no scale."""
    if kind == "none":
        return None
    if kind == "per_tensor":
        return scale.reshape(1, 1)
    if isinstance(scale, np.ndarray):
        pages = np.asarray(pages, dtype=np.intp)
        heads = np.asarray(heads, dtype=np.intp)
    if kind == "per_head":
        return scale[heads].reshape(-1, 1)
    if kind == "per_token":                          # [pages, Hkv, page_size]
        x = scale[pages[:, None], heads[None, :]]    # [n, nh, page_size]
        return _permute(x, 1, 0, 2).reshape(heads.shape[0], pages.shape[0] * x.shape[2])
    raise ValueError("unknown scale kind %r" % kind)


# The description fields the example workers share: host memory, bf16 and f16
# queries, out in q's dtype, no limits, any q strides (read through the
# descriptor's strides: see span_view), a split of their own, an lse written, a check entry, and the
# plain numerics profile.
WORKER_DEFAULTS = {
    "version": "1.0",
    "memory": "host",
    "q_dtypes": ["bf16", "f16"],
    "out_dtype": "same",
    "max_num_seqs": 0,
    "max_kv_heads": 0,
    "max_context_len": 0,
    "strided_q": True,
    "split": "self",
    "split_ceiling": False,
    "max_split_ceiling": 0,
    "writes_lse": True,
    "check": True,
    "profile": {"q_quant": "none", "p_round": "none", "partial": "none"},
}


def description(name, **fields):
    """A worker's description: WORKER_DEFAULTS with its name and its own fields."""
    d = dict(WORKER_DEFAULTS, name=name)
    d.update(fields)
    return d


# pav writes a large input file chunk by chunk and leaves a chunk of zeros a
# hole (a large cache's untouched low blocks are gigabytes of them). Reading a
# hole through a mapping allocates its pages (on tmpfs, where pav's files
# usually are), so a copy of the whole file costs what a dense one would;
# data_extents() says where the data is, and a copy of those ranges onto zeros
# is the same bytes. Smaller files are copied whole.
SPARSE_FILE_BYTES = 64 << 20

# The large files this process has mapped: id(memmap) -> (first address, bytes,
# file path, file offset of that address, weak reference to the memmap). An
# entry leaves with its memmap, before its addresses can be mapped again.
_mapped_files = {}
_mapped_lock = threading.Lock()


def _address(a):
    return a.__array_interface__["data"][0]


def span_elements(shape, strides):
    """Elements from a tensor's first to its last at these strides (in
    elements, non-negative), padding included; 0 for an empty one."""
    return 1 + sum((n - 1) * st for n, st in zip(shape, strides)) if all(n > 0 for n in shape) else 0


def map_input(path):
    """An input file (.npy) mapped read-only, not read: a decode touches only
    its sequences' pages. A large one is remembered, for data_extents()."""
    m = np.load(path, mmap_mode="r", allow_pickle=False)
    if isinstance(m, np.memmap) and m.nbytes >= SPARSE_FILE_BYTES:
        key = id(m)
        with _mapped_lock:
            _mapped_files[key] = (_address(m), m.nbytes, path, m.offset, weakref.ref(m))
        weakref.finalize(m, _forget_mapped_file, key)
    return m


def _forget_mapped_file(key):
    with _mapped_lock:
        _mapped_files.pop(key, None)


def data_extents(a):
    """Where the data of array a lies, when a is (a view of) a large input file
    this process mapped and that file has holes in a's span (the bytes from its
    first element to its last; strides non-negative): (span, extents), span a
    read-only uint8 array over those bytes (mapped, not read) and extents the
    ranges [start, end) of it that hold data; the rest of span reads zero.
    None otherwise (copy the span whole): a is not mapped from such a file, the
    file system does not tell holes, or the span has none."""
    if not hasattr(os, "SEEK_DATA") or a.size == 0 or any(st < 0 for st in a.strides):
        return None
    nbytes = a.itemsize * span_elements(a.shape, [st // a.itemsize for st in a.strides])
    first = _address(a)
    with _mapped_lock:
        entries = list(_mapped_files.values())
    for start, size, path, offset, ref in entries:
        m = ref()
        if m is not None and start <= first and first + nbytes <= start + size:
            break
    else:
        return None
    begin = offset + (first - start)
    end = begin + nbytes
    extents = []
    try:
        with open(path, "rb") as f:
            pos = begin
            while pos < end:
                try:
                    data = os.lseek(f.fileno(), pos, os.SEEK_DATA)
                except OSError as e:
                    if e.errno == errno.ENXIO:  # no data past pos
                        break
                    raise
                if data >= end:
                    break
                hole = min(os.lseek(f.fileno(), data, os.SEEK_HOLE), end)
                extents.append((data - begin, hole - begin))
                pos = hole
    except OSError:
        return None
    if extents == [(0, nbytes)]:
        return None
    whole = np.asarray(m).reshape(-1).view(np.uint8)  # the mapped file's array, contiguous
    return whole[first - start:first - start + nbytes], extents


def span_view(flat, shape, strides, name="tensor"):
    """A tensor sent as its storage span (descriptor "storage": "span": a 1-D
    file of the elements from its first to its last, padding included) viewed
    at its strides, in elements: the kernel sees pav's strides, not a copy."""
    span = span_elements(shape, strides)
    if flat.ndim != 1 or flat.shape[0] != span or len(strides) != len(shape) or any(st < 0 for st in strides):
        raise ValueError("%s: span file of shape %s for shape %s at strides %s" % (name, list(flat.shape), shape, strides))
    return np.lib.stride_tricks.as_strided(flat, tuple(shape), tuple(st * flat.itemsize for st in strides),
                                           writeable=False)


class Call:
    """One decode call's inputs.

    q: float32 [num_seqs*q_len, Hq, D]; q_len, softmax_scale: scalars;
    out_dtype, want_lse: what pav asked for.

    The cache, as stored: cache_layout "packed", "nhd" or "hnd"; kv_storage
    "separate", "combined" (then kv_cache is the one [pages, 2, ...] tensor
    and k_cache, v_cache its [:, 0] and [:, 1] halves, views of it; else
    kv_cache is None) or "latent" (MLA: k_cache alone, [pages, page_size, 1,
    D] or [pages, 1, page_size, D], whose first v_head_dim dims are the
    values; v_cache is that view of it and v_scale is k_scale; out has
    v_head_dim dims). v_head_dim is head_dim but for MLA. cache_dtype one of
    CACHE_DTYPES, the elements raw
    (bf16 bits as uint16, f16, fp8 codes as uint8: cache_to_f32() decodes
    them); v_layout "plain" or "trans" for packed (None otherwise); k_form,
    v_form their CACHE_FORMS names; num_pages, page_size, num_kv_heads,
    head_dim.
    The pages: page_table "block_table" (block_tables [num_seqs, max_blocks]
    int32) or "csr" (kv_indptr [num_seqs+1], kv_indices, kv_last_page_len
    [num_seqs], int32; block_tables None); context_lens [num_seqs] int32 in
    both. pages(s) and seq_len(s) read them.
    Scales: k_scale, v_scale None, float32 [1], [Hkv] or [pages, Hkv,
    page_size], of kinds k_scale_kind and v_scale_kind (which may differ).
    The caches, tables and scales are read-only: maps of pav's files for a
    worker, arrays over pav's own memory for a kernel in pav's process; valid
    during the call only (pav rewrites them for the next call). out and lse
    are None for a worker; in process they are pav's output arrays (out in
    out_dtype as stored: bf16 as raw bits), which the kernel may write.
    Attention variants, each off unless the call sets it: window_left (-1
    when off), soft_cap (0.0 when off), sinks and alibi_slopes (None, or
    float32 [Hq]).
    """

    def __init__(self, request, arrays=None):
        """request: the decode request. arrays: None for a worker (the tensors
        are mapped from the request's files), or the tensors by name as arrays
        over pav's own memory at their strides, with "out" (and "lse") the
        outputs to write (a kernel in pav's process, pav.inprocess)."""
        self.request = request
        folder = request.get("dir")
        tensors = request["tensors"]
        args = request["args"]

        def load(name):
            t = tensors.get(name)
            if t is None:
                return None, None
            if arrays is not None:
                a = arrays[name]
            else:
                a = map_input(os.path.join(folder, t["file"]))
            if a.dtype != (torch_dtype(t["dtype"]) if is_torch(a) else NPY_TYPES[t["dtype"]]):
                raise ValueError("%s: file dtype %s does not carry %s" % (name, a.dtype, t["dtype"]))
            if arrays is None and t.get("storage", "shape") == "span":
                a = span_view(a, t["shape"], t["strides"], name)
            elif arrays is None and "storage" in t:
                raise ValueError("%s: unknown storage %r" % (name, t["storage"]))
            if list(a.shape) != list(t["shape"]):
                raise ValueError("%s: file shape %s, request says %s" % (name, list(a.shape), t["shape"]))
            self.raw[name] = (a, t["dtype"])
            return a, t["dtype"]

        self.raw = {}  # every input as sent: name -> (array, dtype name)

        q, q_dtype = load("q")
        self._q_stored, self._q = q, None  # widened on first use of call.q
        self.q_dtype = q_dtype
        self.head_dim = q.shape[2]
        self.cache_layout = args.get("cache_layout", "packed")
        if self.cache_layout not in CACHE_LAYOUTS:
            raise ValueError("unknown cache layout %r" % self.cache_layout)
        self.kv_cache, kv_dtype = load("kv_cache")
        self.kv_storage = "separate" if self.kv_cache is None else "combined"
        latent = args.get("kv_storage") == "latent"
        if latent and self.kv_cache is None and "v_cache" not in tensors:
            self.kv_storage = "latent"
        if args.get("kv_storage", self.kv_storage) != self.kv_storage:
            raise ValueError("args say kv_storage %s, the tensors are %s" % (args["kv_storage"], self.kv_storage))
        self.v_head_dim = int(args["v_head_dim"]) if latent else self.head_dim
        if latent:
            if self.cache_layout == "packed":
                raise ValueError("an MLA (latent) cache is for the nhd and hnd layouts")
            self.k_cache, self.cache_dtype = load("k_cache")
            self.v_cache = self.k_cache[..., :self.v_head_dim]  # a view: the values are the keys' first dims
        elif self.kv_cache is not None:
            if self.cache_layout == "packed" or self.kv_cache.ndim != 5 or self.kv_cache.shape[1] != 2:
                raise ValueError("kv_cache %s is no combined %s cache" % (list(self.kv_cache.shape), self.cache_layout))
            # The halves are views: nothing is copied.
            self.k_cache, self.v_cache = self.kv_cache[:, 0], self.kv_cache[:, 1]
            self.cache_dtype = kv_dtype
        else:
            self.k_cache, self.cache_dtype = load("k_cache")
            self.v_cache, v_dtype = load("v_cache")
            if v_dtype != self.cache_dtype:
                raise ValueError("K is %s but V is %s" % (self.cache_dtype, v_dtype))
        if self.cache_dtype not in CACHE_DTYPES:
            raise ValueError("%s is not a cache dtype" % self.cache_dtype)
        k = self.k_cache
        self.num_pages = k.shape[0]
        if self.cache_layout == "packed":
            self.v_layout = "plain" if self.v_cache.ndim == 4 else "trans"
            self.k_form, self.v_form = "packed_k", self.v_layout
            self.num_kv_heads, self.page_size = k.shape[1], k.shape[3]
        else:
            self.v_layout = None
            self.k_form = self.v_form = self.cache_layout
            nhd = self.cache_layout == "nhd"
            self.page_size, self.num_kv_heads = (k.shape[1], k.shape[2]) if nhd else (k.shape[2], k.shape[1])
        self.page_table = args.get("page_table", "block_table")
        if self.page_table not in PAGE_TABLES:
            raise ValueError("unknown page table %r" % self.page_table)
        self.block_tables, _ = load("block_tables")
        self.kv_indptr, _ = load("kv_indptr")
        self.kv_indices, _ = load("kv_indices")
        self.kv_last_page_len, _ = load("kv_last_page_len")
        self.context_lens, _ = load("context_lens")
        self.k_scale, _ = load("k_scale")
        self.v_scale, _ = load("v_scale")
        if latent:
            self.v_scale = self.k_scale  # an MLA cache has one scale
        self.k_scale_kind = scale_kind(self.k_scale, self.num_kv_heads)
        self.v_scale_kind = scale_kind(self.v_scale, self.num_kv_heads)
        self.q_len = int(args["q_len"])
        self.softmax_scale = float(args["softmax_scale"])
        # Attention variants (docs/verify-your-kernel.md, "Attention variants"):
        # each is present only when set.
        self.window_left = int(args.get("window_left", -1))    # -1: no window
        self.soft_cap = float(args.get("soft_cap", 0.0))       # 0: no cap
        sinks, _ = load("sinks")
        slopes, _ = load("alibi_slopes")
        self.sinks = None if sinks is None else widen(sinks, "f32")           # [Hq] or None
        self.alibi_slopes = None if slopes is None else widen(slopes, "f32")
        self.max_partitions = int(args.get("max_partitions", 0))
        outputs = request["outputs"]
        self.out_dtype = outputs["out"]["dtype"]
        self.out_shape = tuple(outputs["out"]["shape"])
        self.want_lse = "lse" in outputs
        self.lse_shape = tuple(outputs["lse"]["shape"]) if self.want_lse else None
        # A worker's outputs are files; an in-process kernel's are pav's own
        # arrays, out as stored (bf16 as raw bits), which it may write in place.
        self.out_file = None if arrays is not None else os.path.join(folder, outputs["out"]["file"])
        self.lse_file = None if arrays is not None or not self.want_lse else \
            os.path.join(folder, outputs["lse"]["file"])
        self.out = None if arrays is None else arrays["out"]
        self.lse = None if arrays is None else arrays.get("lse")

    @property
    def q(self):
        """q as float32 values [num_seqs*q_len, Hq, D], widened from the
        stored dtype on first use (a kernel that reads call.torch("q") or
        raw["q"] never pays for it)."""
        if self._q is None:
            self._q = widen(self._q_stored, self.q_dtype)
        return self._q

    @q.setter
    def q(self, value):
        self._q = value

    @property
    def num_seqs(self):
        return self.context_lens.shape[0]

    def seq_len(self, s):
        """Sequence s's length: context_lens[s] with a block table; with CSR
        lists, as a CSR kernel reads it, (n - 1) * page_size +
        kv_last_page_len[s] for its n pages (the same for any call pav admits)."""
        if self.page_table == "block_table":
            return int(self.context_lens[s])
        n = int(self.kv_indptr[s + 1]) - int(self.kv_indptr[s])
        return 0 if n == 0 else (n - 1) * self.page_size + int(self.kv_last_page_len[s])

    def pages(self, s):
        """Sequence s's page ids in order, int64: the first ceil(len /
        page_size) entries of its block table row, or its kv_indices slice."""
        if self.page_table == "block_table":
            n = -(-max(int(self.context_lens[s]), 0) // self.page_size)
            return np.asarray(self.block_tables[s, :n], dtype=np.int64)
        return np.asarray(self.kv_indices[int(self.kv_indptr[s]):int(self.kv_indptr[s + 1])], dtype=np.int64)

    def _heads(self, head):
        if head is None:
            return np.arange(self.num_kv_heads), False
        if np.ndim(head) == 0:
            return np.array([int(head)]), True
        return np.asarray(head, dtype=np.intp), False

    def kv_codes(self, pages, head=None):
        """K and V of `pages` as stored (raw elements of cache_dtype): see kv()."""
        heads, one = self._heads(head)
        k = gather(self.k_cache, self.k_form, pages, heads)
        v = gather(self.v_cache, self.v_form, pages, heads)
        return (k[0], v[0]) if one else (k, v)

    def kv_scales(self, pages, head=None):
        """The K and V scales of `pages` (see gather_scale()), each None when
        absent; for one head (an int) without the head axis."""
        heads, one = self._heads(head)
        ks = gather_scale(self.k_scale, self.k_scale_kind, pages, heads)
        vs = gather_scale(self.v_scale, self.v_scale_kind, pages, heads)
        return tuple(None if s is None else s[0] if one else s for s in (ks, vs))

    def kv(self, pages, head=None):
        """K and V of the tokens of `pages` (page ids, e.g. a slice of
        pages(s)) for KV head `head`, decoded and scaled: float32 [tokens, D]
        for an int head, [len(heads), tokens, D] for a list of heads, [Hkv,
        tokens, D] for None. Token t = i * page_size + slot of page i; the
        slots of a last page past the sequence's length hold whatever the
        cache holds there (pav may fill them with NaN): mask them."""
        kc, vc = self.kv_codes(pages, head)
        ks, vs = self.kv_scales(pages, head)
        k = cache_to_f32(kc, self.cache_dtype)
        v = cache_to_f32(vc, self.cache_dtype)
        if ks is not None:
            k *= ks[..., None]
        if vs is not None:
            v *= vs[..., None]
        return k, v


    def torch(self, name):
        """Input `name` ("q", "k_cache", "block_tables", ...; "out" and "lse"
        in process) as a torch tensor over the same memory, in its own dtype
        (bf16 as torch.bfloat16, fp8 as torch's fp8 dtype where torch has it,
        else the uint8 codes); None when the call has no such tensor. No copy."""
        import torch
        import warnings
        if name in ("out", "lse"):
            array, dtype = getattr(self, name), (self.out_dtype if name == "out" else "f32")
        else:
            array, dtype = self.raw.get(name, (None, None))
        if array is None:
            return None
        if is_torch(array):  # device memory: already pav's tensor (bf16 as torch.bfloat16)
            t = array
        else:
            with warnings.catch_warnings():  # pav's inputs are read-only; the kernel must not write them
                warnings.simplefilter("ignore", UserWarning)
                # bf16 bits cross as int16 (torch takes no uint16 arrays), then viewed as bf16.
                t = torch.from_numpy(array.view(np.int16) if array.dtype == np.uint16 else array)
        if dtype == "bf16" and t.dtype != torch.bfloat16:
            return t.view(torch.bfloat16)
        fp8 = {"fp8_e4m3fn": "float8_e4m3fn", "fp8_e4m3fnuz": "float8_e4m3fnuz", "fp8_e5m2": "float8_e5m2"}
        if dtype in fp8 and hasattr(torch, fp8[dtype]):
            return t.view(getattr(torch, fp8[dtype]))
        return t


class Kernel:
    """A worker's kernel: `description` (the protocol's JSON description, whose
    supported sets check() enforces) and `decode(call) -> (out, lse)`. A kernel
    that keeps scratch between calls declares `"scratch": true` and gives
    `poison_scratch()`, which fills that scratch with NaN: pav asks for it
    before every decode call (the request's `poison_scratch`)."""

    def __init__(self, description, decode, poison_scratch=None):
        self.description = description
        self.decode = decode
        self.poison_scratch = poison_scratch


def poison_scratch(kernel, request):
    """Before a decode: the kernel's poison_scratch() when the request asks for it."""
    if not request.get("poison_scratch"):
        return
    poison = getattr(kernel, "poison_scratch", None)
    if not callable(poison):
        raise ValueError("pav asks to poison the scratch this kernel declares (\"scratch\": true), and it has no "
                         "poison_scratch()")
    poison()


class _View:
    """A tensor descriptor of a check request: dtype name, shape, strides."""

    def __init__(self, t):
        self.dtype = t.get("dtype")
        self.shape = [int(x) for x in t.get("shape", [])]
        self.strides = [int(x) for x in t.get("strides", [])]
        self.values = t.get("values")
        self.rank = len(self.shape)

    def contiguous(self):
        expect = 1
        for n, st in reversed(list(zip(self.shape, self.strides))):
            if n != 1 and st != expect:
                return False
            expect *= n
        return len(self.strides) == self.rank

    def ordered(self):
        """Strides that keep the dims in order without overlap, the last one 1
        (gaps allowed: padded pages and rows, a half of a combined tensor)."""
        if self.rank == 0 or len(self.strides) != self.rank or self.strides[-1] != 1:
            return False
        for i in range(self.rank - 2, -1, -1):
            if self.shape[i] > 1 and self.strides[i] < self.shape[i + 1] * self.strides[i + 1]:
                return False
        return True

    def positive(self):
        return all(n >= 1 for n in self.shape)

    def span(self):
        """Elements the view spans: one past its farthest element's offset."""
        return 1 + sum((n - 1) * st for n, st in zip(self.shape, self.strides))

    def half(self):
        """The shape and strides of either [:, i] view of a [n, 2, ...]
        descriptor (a combined cache's K or V)."""
        return _View({"dtype": self.dtype, "shape": self.shape[:1] + self.shape[2:],
                      "strides": self.strides[:1] + self.strides[2:]})


def _rows_problem(name, t, strided_q):
    """q and out: head_dim stride 1; dense rows, or (strided_q) dense heads
    with rows at least Hq*D apart."""
    if len(t.strides) != 3 or t.strides[2] != 1:
        return "%s: head_dim stride must be 1" % name
    if t.contiguous():
        return None
    if not strided_q:
        return "%s: not contiguous and the kernel takes no strided q" % name
    if t.strides[1] != t.shape[2] or t.strides[0] < t.shape[1] * t.shape[2]:
        return "%s: heads must be dense and rows at least Hq*D apart" % name
    return None


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _variant_problem(desc, args, tensors, hq):
    """The attention variants of a call against the description's "variants":
    None, or the reason naming the field. Each variant is present only when
    set: window_left an integer >= 0, soft_cap a finite number > 0, sinks and
    alibi_slopes contiguous f32 [Hq]."""
    declared = desc.get("variants") or []
    if "window_left" in args:
        w = args["window_left"]
        if "window" not in declared:
            return "window_left given to a kernel that declares no window variant"
        if not _number(w) or not np.isfinite(w) or w != int(w) or not 0 <= w <= 2**31 - 1:
            return "window_left must be an integer in 0..2^31-1, got %r" % (w,)
    if "soft_cap" in args:
        c = args["soft_cap"]
        if "soft_cap" not in declared:
            return "soft_cap given to a kernel that declares no soft_cap variant"
        if not _number(c) or not np.isfinite(c) or c <= 0:
            return "soft_cap must be a finite number > 0, got %r" % (c,)
    for name, variant in (("sinks", "sinks"), ("alibi_slopes", "alibi")):
        t = tensors.get(name)
        if t is None:
            continue
        if variant not in declared:
            return "%s given to a kernel that declares no %s variant" % (name, variant)
        if t.dtype != "f32" or t.shape != [hq] or t.strides != [1]:
            return "%s must be a contiguous f32 [Hq] = [%d], got %s shape %s strides %s" % (
                name, hq, t.dtype, t.shape, t.strides)
    return None


def _heads_problem(desc, bs, hkv, hq):
    """The page size, the KV head count and the GQA ratio against the description."""
    if bs not in desc["block_sizes"]:
        return "block_size %d not supported" % bs
    if desc.get("max_kv_heads", 0) and hkv > desc["max_kv_heads"]:
        return "Hkv %d above max_kv_heads" % hkv
    if hq % hkv != 0 or hq // hkv not in desc["gqa_ratios"]:
        return "Hq %d / Hkv %d is not a supported GQA ratio" % (hq, hkv)
    return None


def _packed_problem(desc, tensors, d, hq):
    """A packed K and V: (reason or None, (pages, Hkv, page_size))."""
    for name in ("k_cache", "v_cache"):
        if name not in tensors:
            return "%s is missing" % name, None
    k, v = tensors["k_cache"], tensors["v_cache"]
    if k.rank != 5 or not k.positive():
        return "k_cache must be [num_blocks, Hkv, D/16, block_size, 16], got %s" % k.shape, None
    if k.dtype not in desc["cache_dtypes"]:
        return "k_cache dtype %s not supported" % k.dtype, None
    if k.shape[4] != 16 or k.shape[2] * 16 != d:
        return "k_cache shape %s does not hold head_dim %d in groups of 16" % (k.shape, d), None
    if not k.contiguous():
        return "k_cache must be contiguous", None
    nb, hkv, bs = k.shape[0], k.shape[1], k.shape[3]
    why = _heads_problem(desc, bs, hkv, hq)
    if why:
        return why, None
    if v.dtype != k.dtype:
        return "v_cache dtype %s differs from k_cache %s" % (v.dtype, k.dtype), None
    if v.shape == [nb, hkv, d, bs]:
        layout = "plain"
    elif bs % 16 == 0 and v.shape == [nb, hkv, bs // 16, d, 16]:
        layout = "trans"
    else:
        return "v_cache shape %s matches neither layout" % v.shape, None
    if layout not in desc["v_layouts"]:
        return "v layout %s not supported" % layout, None
    if not v.contiguous():
        return "v_cache must be contiguous", None
    return None, (nb, hkv, bs)


def _paged_problem(desc, tensors, layout, d, hq, dv=None):
    """An nhd or hnd K and V, apart, combined in kv_cache or (dv given: MLA)
    V the first dv dims of K: (reason or None, (pages, Hkv, page_size)).
    Contiguous, or with strided_cache any strides that keep the dims in order
    (a strided tensor's file is its span, viewed at those strides)."""
    kv = tensors.get("kv_cache")
    if dv is not None:
        if kv is not None or "v_cache" in tensors:
            return "an MLA cache is k_cache alone (its values are its keys' first v_head_dim dims)", None
        if "k_cache" not in tensors:
            return "k_cache is missing", None
        k = v = tensors["k_cache"]
        views = [("k_cache", k)]
    elif kv is not None:
        if "k_cache" in tensors or "v_cache" in tensors:
            return "kv_cache given with k_cache or v_cache", None
        if kv.rank != 5 or kv.shape[1] != 2 or len(kv.strides) != 5:
            return "kv_cache must be [pages, 2, ...] of rank 5, got %s" % kv.shape, None
        k = v = kv.half()
        views = [("kv_cache", kv)]
    else:
        for name in ("k_cache", "v_cache"):
            if name not in tensors:
                return "%s is missing" % name, None
        k, v = tensors["k_cache"], tensors["v_cache"]
        views = [("k_cache", k), ("v_cache", v)]
    for name, t in views:
        if not t.positive() or any(st < 0 for st in t.strides):
            return "%s shape %s has an extent < 1 or a negative stride" % (name, t.shape), None
    if k.dtype not in CACHE_DTYPES:
        return "k_cache dtype %s is not a cache dtype" % k.dtype, None
    if v.dtype != k.dtype:
        return "v_cache dtype %s differs from k_cache %s" % (v.dtype, k.dtype), None
    nhd = layout == "nhd"
    if k.rank != 4:
        return "k_cache must be %s for %s, got %s" % (
            "[pages, page_size, Hkv, D]" if nhd else "[pages, Hkv, page_size, D]", layout, k.shape), None
    nb, bs, hkv = (k.shape[0], k.shape[1], k.shape[2]) if nhd else (k.shape[0], k.shape[2], k.shape[1])
    if k.shape[3] != d:
        return "k_cache holds head_dim %d, q has %d" % (k.shape[3], d), None
    if dv is not None and (dv < 16 or dv % 16 or dv >= d):
        return "v_head_dim %d: an MLA cache's D_v must be a multiple of 16 in 16..%d" % (dv, d - 16), None
    if v.shape != k.shape:
        return "v_cache shape %s differs from k_cache %s" % (v.shape, k.shape), None
    strided = desc.get("strided_cache", False)
    for name, t in views:
        if strided and not t.ordered():
            return "%s: strides %s overlap or the head-dim stride is not 1" % (name, t.strides), None
        if not strided and not t.contiguous():
            return "%s must be contiguous (the kernel takes no strided cache)" % name, None
    if k.dtype not in desc["cache_dtypes"]:
        return "k_cache dtype %s not supported" % k.dtype, None
    why = _heads_problem(desc, bs, hkv, hq)
    if why:
        return why, None
    return None, (nb, hkv, bs)


def _i32_list_problem(t, name, at_least):
    if t is None:
        return "%s is missing" % name
    if t.rank != 1 or t.dtype != "i32" or t.shape[0] < at_least or t.strides != [1]:
        return "%s must be a contiguous [>= %d] i32" % (name, at_least)
    return None


def _page_table_problem(desc, tensors, page_table, num_seqs, nb, bs):
    """The block table or the CSR lists: every sequence's pages within the cache."""
    cl = tensors["context_lens"]
    lens = cl.values or []
    max_len = desc.get("max_context_len", 0)
    if page_table == "block_table":
        if any(name in tensors for name in CSR_LISTS):
            return "kv_indptr: CSR lists given with a block table"
        bt = tensors.get("block_tables")
        if bt is None:
            return "block_tables is missing"
        if bt.rank != 2 or bt.dtype != "i32" or bt.shape[0] < num_seqs or bt.shape[1] < 1 or not bt.contiguous():
            return "block_tables must be a contiguous [>= num_seqs, >= 1] i32"
        table = bt.values or []
        for s in range(num_seqs):
            n = lens[s]
            if n < 0 or (max_len and n > max_len):
                return "context_lens[%d] = %d out of range" % (s, n)
            pages = (n + bs - 1) // bs
            if pages > bt.shape[1]:
                return "context_lens[%d] = %d needs %d blocks, block_tables has %d" % (s, n, pages, bt.shape[1])
            for i in range(pages):
                b = table[s * bt.shape[1] + i]
                if not 0 <= b < nb:
                    return "block_tables[%d][%d] = %d outside the cache" % (s, i, b)
        return None
    # CSR: kv_indptr starts at 0 and grows by each sequence's page count;
    # kv_last_page_len is the tokens of its last page (0 for an empty one).
    if "block_tables" in tensors:
        return "block_tables given with CSR page lists"
    indptr, indices, last = (tensors.get(name) for name in CSR_LISTS)
    why = (_i32_list_problem(indptr, "kv_indptr", num_seqs + 1) or
           _i32_list_problem(last, "kv_last_page_len", num_seqs) or
           _i32_list_problem(indices, "kv_indices", 1))
    if why:
        return why
    if indptr.shape[0] != num_seqs + 1:
        return "kv_indptr has %d entries for %d sequences (expected num_seqs + 1)" % (indptr.shape[0], num_seqs)
    if last.shape[0] != num_seqs:
        return "kv_last_page_len has %d entries for %d sequences" % (last.shape[0], num_seqs)
    ptr, ids, lasts = indptr.values or [], indices.values or [], last.values or []
    if ptr[0] != 0:
        return "kv_indptr[0] = %d (expected 0)" % ptr[0]
    for s in range(num_seqs):
        n_len = lens[s]
        if n_len < 0 or (max_len and n_len > max_len):
            return "context_lens[%d] = %d out of range" % (s, n_len)
        n = (n_len + bs - 1) // bs
        a, b = ptr[s], ptr[s + 1]
        if b - a != n:
            return "kv_indptr[%d..%d] = %d..%d holds %d pages, context_lens[%d] = %d needs %d" % (
                s, s + 1, a, b, b - a, s, n_len, n)
        if b > indices.shape[0]:
            return "kv_indptr[%d] = %d past kv_indices' %d entries" % (s + 1, b, indices.shape[0])
        expect = 0 if n == 0 else n_len - (n - 1) * bs
        if lasts[s] != expect:
            return "kv_last_page_len[%d] = %d (context_lens[%d] = %d leaves %d in its last page)" % (
                s, lasts[s], s, n_len, expect)
        for i in range(n):
            p = ids[a + i]
            if not 0 <= p < nb:
                return "kv_indices[%d] = %d (page %d of sequence %d) outside 0..%d" % (a + i, p, i, s, nb - 1)
    return None


def _scales_problem(desc, tensors, nb, hkv, bs):
    """K and V scales: each of a kind the kernel declares, per-token ones a
    contiguous [pages, Hkv, page_size]; one kind for both unless mixed_scales."""
    mixed = desc.get("mixed_scales", False)
    if not mixed and ("k_scale" in tensors) != ("v_scale" in tensors):
        return "k_scale and v_scale must come together"
    kinds = []
    for name in ("k_scale", "v_scale"):
        t = tensors.get(name)
        if t is None:
            kinds.append("none")
            continue
        if t.dtype != "f32":
            return "%s must be f32" % name
        if any(st < 0 for st in t.strides):
            return "%s has a negative stride" % name
        if t.shape == [1]:  # with one KV head, per tensor and per head at once
            kinds.append("per_head" if hkv == 1 and "per_tensor" not in desc["scale_kinds"] else "per_tensor")
        elif t.shape == [hkv]:
            kinds.append("per_head")
        elif t.shape == [nb, hkv, bs] and t.contiguous():
            kinds.append("per_token")
        else:
            return "%s must be [1], [Hkv] = [%d] or a contiguous [num_blocks, Hkv, block_size], got %s" % (
                name, hkv, t.shape)
    if kinds[0] != kinds[1] and not mixed:
        return "k_scale and v_scale are of different kinds"
    for kind in kinds:
        if kind not in desc["scale_kinds"]:
            return "scale kind %s not supported" % kind
    return None


def check_call(desc, request):
    """None when the call is inside the description (the contract's rules in
    docs/verify-your-kernel.md and kernels/cache_format.hpp, in the order pav
    applies them); else the reason to refuse it, naming the field at fault.
    pav's reject property holds a worker to exactly this: refuse every call
    outside, accept every call inside. Written for requests pav breaks on
    purpose: nothing here may raise on odd ranks, extents or dtype names."""
    tensors = {name: _View(t) for name, t in request.get("tensors", {}).items()}
    args = request.get("args", {})
    for name in ("q", "out", "context_lens"):
        if name not in tensors:
            return "%s is missing" % name
    q, out, cl = tensors["q"], tensors["out"], tensors["context_lens"]
    strided_q = desc.get("strided_q", False)
    # q and out
    if q.rank != 3 or not q.positive():
        return "q must be [num_seqs*q_len, Hq, D] with extents >= 1, got %s" % q.shape
    if q.dtype not in desc["q_dtypes"]:
        return "q dtype %s not supported" % q.dtype
    rows, hq, d = q.shape
    why = _rows_problem("q", q, strided_q)
    if why:
        return why
    latent = args.get("kv_storage") == "latent"
    dv = args.get("v_head_dim") if latent else None
    if latent and (not isinstance(dv, int) or isinstance(dv, bool)):
        return "v_head_dim must be an integer with kv_storage latent, got %r" % (dv,)
    if out.shape != (q.shape[:2] + [dv] if latent else q.shape):
        return "out shape %s, expected q's %s%s" % (out.shape, q.shape, " with v_head_dim dims" if latent else "")
    out_dtype = q.dtype if desc["out_dtype"] == "same" else desc["out_dtype"]
    if out.dtype != out_dtype:
        return "out dtype %s, expected %s" % (out.dtype, out_dtype)
    why = _rows_problem("out", out, strided_q)
    if why:
        return why
    if d not in desc["head_dims"]:
        return "head_dim %d not supported" % d
    # the cache: its layout, then K and V in it, then how they are stored
    layout = args.get("cache_layout", "packed")
    if layout not in CACHE_LAYOUTS:
        return "unknown cache layout %r" % (layout,)
    if layout not in desc.get("cache_layouts", ["packed"]):
        return "cache layout %s not supported" % layout
    storage = "latent" if latent else "combined" if "kv_cache" in tensors else "separate"
    if args.get("kv_storage", storage) != storage:
        return "args.kv_storage %r, but the tensors are %s" % (args.get("kv_storage"), storage)
    if layout == "packed":
        if storage != "separate":
            return "kv_storage %s is for the nhd and hnd layouts" % storage
        why, dims = _packed_problem(desc, tensors, d, hq)
    else:
        why, dims = _paged_problem(desc, tensors, layout, d, hq, dv)
    if why:
        return why
    nb, hkv, bs = dims
    if storage not in desc.get("kv_storage", ["separate"]):
        return "kv storage %s not supported" % storage
    views = [tensors[n] for n in ("kv_cache", "k_cache", "v_cache") if n in tensors]
    if max(t.span() for t in views) >= LARGE_CACHE_ELEMENTS and not desc.get("large_cache", False):
        return "the cache spans 2^31 elements or more and the kernel does not declare large_cache"
    if latent and [dv, d - dv] not in [list(m) for m in desc.get("mla_dims", [])]:
        return "MLA dims [%d, %d] not supported" % (dv, d - dv)
    if latent and "v_scale" in tensors:
        return "v_scale given with an MLA cache (its one scale is k_scale)"
    # tables and lengths
    if cl.rank != 1 or cl.dtype != "i32" or cl.shape[0] < 1 or cl.strides != [1]:
        return "context_lens must be a contiguous [num_seqs >= 1] i32"
    num_seqs = cl.shape[0]
    if desc.get("max_num_seqs", 0) and num_seqs > desc["max_num_seqs"]:
        return "num_seqs %d above max_num_seqs" % num_seqs
    q_len = int(args.get("q_len", 1))
    lo, hi = desc["q_len"]
    if not lo <= q_len <= hi:
        return "q_len %d outside [%d, %d]" % (q_len, lo, hi)
    if rows != num_seqs * q_len:
        return "q has %d rows, expected num_seqs*q_len = %d" % (rows, num_seqs * q_len)
    page_table = args.get("page_table", "block_table")
    if page_table not in PAGE_TABLES:
        return "unknown page table %r" % (page_table,)
    if page_table not in desc.get("page_tables", ["block_table"]):
        return "page table %s not supported" % page_table
    why = _page_table_problem(desc, tensors, page_table, num_seqs, nb, bs)
    if why:
        return why
    # scales
    if latent and "k_scale" in tensors:  # one scale for K and V
        tensors = dict(tensors, v_scale=tensors["k_scale"])
    why = _scales_problem(desc, tensors, nb, hkv, bs)
    if why:
        return why
    # the attention variants
    why = _variant_problem(desc, args, tensors, hq)
    if why:
        return why
    # lse, plan, split ceiling
    lse = tensors.get("lse")
    if lse is not None:
        if not desc.get("writes_lse"):
            return "lse given to a kernel that does not write it"
        if lse.shape != [rows, hq] or lse.dtype != "f32" or not lse.contiguous():
            return "lse must be a contiguous f32 [rows, Hq]"
    plan = "work_info" in tensors or "reduce_info" in tensors
    if desc.get("split", "self") == "self" and plan:
        return "a plan given to a kernel that splits by itself"
    if desc.get("split") == "plan" and not plan:
        return "no plan given to a kernel that runs pav's plan"
    ceiling = int(args.get("max_partitions", 0))
    if ceiling < 0:
        return "max_partitions %d < 0" % ceiling
    if ceiling > 0 and desc.get("split", "self") == "self" and not desc.get("split_ceiling"):
        return "max_partitions given to a kernel that takes no split ceiling"
    if desc.get("max_split_ceiling", 0) and ceiling > desc["max_split_ceiling"]:
        return "max_partitions %d above max_split_ceiling" % ceiling
    return None


def _write(path, array):
    # Write then rename: pav never reads a half-written file.
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        np.save(f, array, allow_pickle=False)
    os.replace(tmp, path)


def _run_decode(kernel, request):
    poison_scratch(kernel, request)
    call = Call(request)
    out, lse = kernel.decode(call)
    out = np.ascontiguousarray(out, dtype=np.float32).reshape(call.out_shape)
    _write(call.out_file, narrow(out, call.out_dtype))
    if call.want_lse:
        if lse is None:
            raise ValueError("lse requested but the kernel computed none")
        _write(call.lse_file, np.ascontiguousarray(lse, dtype=np.float32))


def _reply(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def serve(kernel):
    """Answers pav's requests on stdin until quit or end of input."""
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        op = request.get("op")
        rid = request.get("id")
        if op == "describe":
            _reply({"ok": True, "protocol": PROTOCOL, "kernel": kernel.description})
        elif op == "quit":
            return
        elif op == "check":
            try:
                reason = check_call(kernel.description, request)
            except Exception as e:  # a malformed request is refused, not a crash
                reason = "malformed call: %s" % e
            if reason is None:
                _reply({"id": rid, "ok": True, "accept": True})
            else:
                _reply({"id": rid, "ok": True, "accept": False, "reason": reason})
        elif op == "decode":
            try:
                _run_decode(kernel, request)
                _reply({"id": rid, "ok": True})
            except Exception as e:
                traceback.print_exc(file=sys.stderr)
                _reply({"id": rid, "ok": False, "status": "error", "error": "%s: %s" % (type(e).__name__, e)})
        else:
            _reply({"id": rid, "ok": False, "status": "error", "error": "unknown op %r" % op})


def defect_parser(prog, defects):
    """An argparse parser with the examples' common options: --defect NAME
    (one key of `defects`, a dict name -> one-line description) and
    --list-defects. Callers add their own options."""
    import argparse
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--defect", choices=sorted(defects), help="inject one known bug (see --list-defects)")
    parser.add_argument("--list-defects", action="store_true", help="print every defect with its description")
    return parser


def list_defects(defects):
    width = max([22] + [len(name) for name in defects])
    for name in sorted(defects):
        print("%-*s %s" % (width, name, defects[name]))
