# SPDX-License-Identifier: Apache-2.0
"""Plumbing for a pav worker: the request loop of the worker protocol, `.npy`
inputs and outputs with their raw-bit dtypes, and a check of a call against the
worker's own description.

A worker module builds a `Kernel` (a description dict and a decode function)
and calls `serve(kernel)`. The decode function receives a `Call` (NumPy arrays
and scalars, bf16/f16 already widened to float32, fp8 left as raw codes with
their flavour named) and returns `(out, lse)`: out a float32 array of q's shape,
lse a float32 [rows, Hq] array or None. serve() rounds out to the dtype pav asks
for and writes the files.

Only NumPy and the standard library are used, so any Python with NumPy can run
a worker built on it. See docs/verify-your-kernel.md, "Worker protocol".
"""
import json
import os
import sys
import traceback

import numpy as np

PROTOCOL = 1

# dtype names of the protocol -> the .npy element type they cross as.
NPY_TYPES = {
    "f32": np.dtype("<f4"),
    "f16": np.dtype("<f2"),
    "bf16": np.dtype("<u2"),
    "fp8_e4m3fn": np.dtype("u1"),
    "fp8_e4m3fnuz": np.dtype("u1"),
    "i32": np.dtype("<i4"),
    "i64": np.dtype("<i8"),
}


def fp8_table(flavour):
    """The 256 values of an fp8 e4m3 flavour, indexed by code (NaN codes give NaN).

    e4m3fn: exponent bias 7, NaN at 0x7f and 0xff, 0x80 is -0.
    e4m3fnuz: exponent bias 8, NaN at 0x80 only, no negative zero.
    Value of a code: subnormal (exponent field 0) m * 2^(1 - bias - 3),
    normal (8 + m) * 2^(e - bias - 3), m the 3 mantissa bits.
    """
    if flavour not in ("fp8_e4m3fn", "fp8_e4m3fnuz"):
        raise ValueError("unknown fp8 flavour %r" % flavour)
    fnuz = flavour == "fp8_e4m3fnuz"
    bias = 8 if fnuz else 7
    codes = np.arange(256, dtype=np.int64)
    e = (codes >> 3) & 0xF
    m = codes & 0x7
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - 3),
                   np.ldexp((8 + m).astype(np.float64), e - bias - 3))
    value = np.where(codes & 0x80, -mag, mag)
    nan = codes == 0x80 if fnuz else (codes & 0x7F) == 0x7F
    value[nan] = np.nan
    return value.astype(np.float32)


def bf16_to_f32(bits):
    """Raw bf16 bits (uint16) -> float32: the bits are the top half of a float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 -> raw bf16 bits, rounded to nearest even; NaN stays a (quiet) NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


def widen(array, dtype):
    """An input of a float dtype as float32 values (bf16 arrives as raw bits)."""
    if dtype == "bf16":
        return bf16_to_f32(array)
    if dtype in ("f16", "f32"):
        return array.astype(np.float32)
    raise ValueError("not a float dtype: %r" % dtype)


def narrow(values, dtype):
    """float32 values -> the array written for `dtype` (bf16 as raw bits)."""
    if dtype == "bf16":
        return f32_to_bf16(values)
    if dtype == "f16":
        return values.astype(np.float16)
    if dtype == "f32":
        return values.astype(np.float32)
    raise ValueError("cannot write dtype %r" % dtype)


class Call:
    """One decode call's inputs.

    q: float32 [num_seqs*q_len, Hq, D]; k_cache, v_cache: uint8 fp8 codes in
    their layouts; cache_dtype: the fp8 flavour's name; v_layout: "plain" or
    "trans"; block_tables [num_seqs, max_blocks] and context_lens [num_seqs]:
    int32; k_scale, v_scale: None, float32 [1] or [num_blocks, Hkv, block_size];
    the caches, tables and scales are read-only maps of pav's files, valid
    during the call only (pav may rewrite the files for the next call);
    q_len, softmax_scale: scalars; out_dtype, want_lse: what pav asked for.
    Attention variants, each off unless the call sets it: window_left (-1
    when off), soft_cap (0.0 when off), sinks and alibi_slopes (None, or
    float32 [Hq]).
    """

    def __init__(self, request):
        folder = request["dir"]
        tensors = request["tensors"]
        args = request["args"]

        def load(name):
            t = tensors.get(name)
            if t is None:
                return None, None
            # Mapped, not read: a decode touches only its sequences' pages.
            a = np.load(os.path.join(folder, t["file"]), mmap_mode="r", allow_pickle=False)
            if list(a.shape) != list(t["shape"]):
                raise ValueError("%s: file shape %s, request says %s" % (name, list(a.shape), t["shape"]))
            if a.dtype != NPY_TYPES[t["dtype"]]:
                raise ValueError("%s: file dtype %s does not carry %s" % (name, a.dtype, t["dtype"]))
            return a, t["dtype"]

        q, q_dtype = load("q")
        self.q = widen(q, q_dtype)
        self.q_dtype = q_dtype
        self.k_cache, self.cache_dtype = load("k_cache")
        self.v_cache, v_dtype = load("v_cache")
        if v_dtype != self.cache_dtype:
            raise ValueError("K is %s but V is %s" % (self.cache_dtype, v_dtype))
        self.v_layout = "plain" if self.v_cache.ndim == 4 else "trans"
        self.block_tables, _ = load("block_tables")
        self.context_lens, _ = load("context_lens")
        self.k_scale, _ = load("k_scale")
        self.v_scale, _ = load("v_scale")
        self.q_len = int(args["q_len"])
        self.softmax_scale = float(args["softmax_scale"])
        # Attention variants (docs/verify-your-kernel.md, "Attention variants"):
        # each is present only when set.
        self.window_left = int(args.get("window_left", -1))    # -1: no window
        self.soft_cap = float(args.get("soft_cap", 0.0))       # 0: no cap
        sinks, _ = load("sinks")
        slopes, _ = load("alibi_slopes")
        self.sinks = None if sinks is None else np.asarray(sinks, dtype=np.float32)      # [Hq] or None
        self.alibi_slopes = None if slopes is None else np.asarray(slopes, dtype=np.float32)
        self.max_partitions = int(args.get("max_partitions", 0))
        outputs = request["outputs"]
        self.out_file = os.path.join(folder, outputs["out"]["file"])
        self.out_dtype = outputs["out"]["dtype"]
        self.out_shape = tuple(outputs["out"]["shape"])
        self.want_lse = "lse" in outputs
        self.lse_file = os.path.join(folder, outputs["lse"]["file"]) if self.want_lse else None


class Kernel:
    """A worker's kernel: `description` (the protocol's JSON description, whose
    supported sets check() enforces) and `decode(call) -> (out, lse)`."""

    def __init__(self, description, decode):
        self.description = description
        self.decode = decode


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

    def positive(self):
        return all(n >= 1 for n in self.shape)


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


def check_call(desc, request):
    """None when the call is inside the description (the contract's rules in
    docs/verify-your-kernel.md, in the order pav applies them); else the
    reason to refuse it, naming the field at fault. pav's reject property holds
    a worker to exactly this: refuse every call outside, accept every call
    inside. Written for requests pav breaks on purpose: nothing here may raise
    on odd ranks, extents or dtype names."""
    tensors = {name: _View(t) for name, t in request.get("tensors", {}).items()}
    args = request.get("args", {})
    for name in ("q", "out", "k_cache", "v_cache", "block_tables", "context_lens"):
        if name not in tensors:
            return "%s is missing" % name
    q, out, k, v = tensors["q"], tensors["out"], tensors["k_cache"], tensors["v_cache"]
    bt, cl = tensors["block_tables"], tensors["context_lens"]
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
    if out.shape != q.shape:
        return "out shape %s differs from q %s" % (out.shape, q.shape)
    out_dtype = q.dtype if desc["out_dtype"] == "same" else desc["out_dtype"]
    if out.dtype != out_dtype:
        return "out dtype %s, expected %s" % (out.dtype, out_dtype)
    why = _rows_problem("out", out, strided_q)
    if why:
        return why
    if d not in desc["head_dims"]:
        return "head_dim %d not supported" % d
    # K
    if k.rank != 5 or not k.positive():
        return "k_cache must be [num_blocks, Hkv, D/16, block_size, 16], got %s" % k.shape
    if k.dtype not in desc["cache_dtypes"]:
        return "k_cache dtype %s not supported" % k.dtype
    if k.shape[4] != 16 or k.shape[2] * 16 != d:
        return "k_cache shape %s does not hold head_dim %d in groups of 16" % (k.shape, d)
    if not k.contiguous():
        return "k_cache must be contiguous"
    nb, hkv, bs = k.shape[0], k.shape[1], k.shape[3]
    if bs not in desc["block_sizes"]:
        return "block_size %d not supported" % bs
    if desc.get("max_kv_heads", 0) and hkv > desc["max_kv_heads"]:
        return "Hkv %d above max_kv_heads" % hkv
    if hq % hkv != 0 or hq // hkv not in desc["gqa_ratios"]:
        return "Hq %d / Hkv %d is not a supported GQA ratio" % (hq, hkv)
    # V
    if v.dtype != k.dtype:
        return "v_cache dtype %s differs from k_cache %s" % (v.dtype, k.dtype)
    if v.shape == [nb, hkv, d, bs]:
        layout = "plain"
    elif bs % 16 == 0 and v.shape == [nb, hkv, bs // 16, d, 16]:
        layout = "trans"
    else:
        return "v_cache shape %s matches neither layout" % v.shape
    if layout not in desc["v_layouts"]:
        return "v layout %s not supported" % layout
    if not v.contiguous():
        return "v_cache must be contiguous"
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
    if bt.rank != 2 or bt.dtype != "i32" or bt.shape[0] < num_seqs or bt.shape[1] < 1 or not bt.contiguous():
        return "block_tables must be a contiguous [>= num_seqs, >= 1] i32"
    lens, table = cl.values or [], bt.values or []
    max_len = desc.get("max_context_len", 0)
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
    # scales
    if ("k_scale" in tensors) != ("v_scale" in tensors):
        return "k_scale and v_scale must come together"
    kinds = set()
    for name in ("k_scale", "v_scale"):
        t = tensors.get(name)
        if t is None:
            continue
        if t.dtype != "f32":
            return "%s must be f32" % name
        if t.shape == [1]:
            kinds.add("per_tensor")
        elif t.shape == [nb, hkv, bs] and t.contiguous():
            kinds.add("per_token")
        else:
            return "%s must be [1] or a contiguous [num_blocks, Hkv, block_size], got %s" % (name, t.shape)
    if len(kinds) > 1:
        return "k_scale and v_scale are of different kinds"
    kind = kinds.pop() if kinds else "none"
    if kind not in desc["scale_kinds"]:
        return "scale kind %s not supported" % kind
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
