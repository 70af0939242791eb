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
    q_len, softmax_scale: scalars; out_dtype, want_lse: what pav asked for.
    """

    def __init__(self, request):
        folder = request["dir"]
        tensors = request["tensors"]
        args = request["args"]

        def load(name):
            t = tensors.get(name)
            if t is None:
                return None, None
            a = np.load(os.path.join(folder, t["file"]), allow_pickle=False)
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


def _shape(tensors, name):
    t = tensors.get(name)
    return None if t is None else [int(x) for x in t["shape"]]


def check_call(desc, request):
    """None when the call is inside the description and well formed; else the
    reason to refuse it, naming the field at fault. Written for requests pav may
    have broken on purpose: nothing here may raise on odd shapes or dtypes."""
    tensors = request.get("tensors", {})
    args = request.get("args", {})
    for name in ("q", "out", "k_cache", "v_cache", "block_tables", "context_lens"):
        if name not in tensors:
            return "%s is missing" % name
    q, out = _shape(tensors, "q"), _shape(tensors, "out")
    kc, vc = _shape(tensors, "k_cache"), _shape(tensors, "v_cache")
    bt, cl = _shape(tensors, "block_tables"), _shape(tensors, "context_lens")
    dt = {n: t.get("dtype") for n, t in tensors.items()}
    if len(q) != 3 or min(q) <= 0:
        return "q must be [num_seqs*q_len, Hq, D] with positive extents, got %s" % q
    if dt["q"] not in desc["q_dtypes"]:
        return "q dtype %s not supported" % dt["q"]
    out_dtype = dt["q"] if desc["out_dtype"] == "same" else desc["out_dtype"]
    if dt["out"] != out_dtype:
        return "out dtype %s, expected %s" % (dt["out"], out_dtype)
    if out != q:
        return "out shape %s differs from q %s" % (out, q)
    for name in ("q", "out"):
        strides = tensors[name].get("strides", [])
        if len(strides) != 3 or strides[2] != 1:
            return "%s head_dim stride must be 1" % name
    if len(kc) != 5 or kc[4] != 16 or min(kc) <= 0:
        return "k_cache must be [num_blocks, Hkv, D/16, block_size, 16], got %s" % kc
    if dt["k_cache"] not in desc["cache_dtypes"]:
        return "k_cache dtype %s not supported" % dt["k_cache"]
    if dt["v_cache"] != dt["k_cache"]:
        return "v_cache dtype %s differs from k_cache %s" % (dt["v_cache"], dt["k_cache"])
    nb, hkv, hgroups, bs = kc[0], kc[1], kc[2], kc[3]
    num_rows, hq, d = q
    if hgroups * 16 != d:
        return "head_dim %d but k_cache has %d groups of 16" % (d, hgroups)
    if d not in desc["head_dims"]:
        return "head_dim %d not supported" % d
    if bs not in desc["block_sizes"]:
        return "block_size %d not supported" % bs
    if hq % hkv != 0 or hq // hkv not in desc["gqa_ratios"]:
        return "Hq %d / Hkv %d is not a supported GQA ratio" % (hq, hkv)
    if desc.get("max_kv_heads", 0) and hkv > desc["max_kv_heads"]:
        return "Hkv %d above max_kv_heads" % hkv
    if vc == [nb, hkv, d, bs]:
        layout = "plain"
    elif bs % 16 == 0 and vc == [nb, hkv, bs // 16, d, 16]:
        layout = "trans"
    else:
        return "v_cache shape %s matches neither layout" % vc
    if layout not in desc["v_layouts"]:
        return "v layout %s not supported" % layout
    if dt["block_tables"] != "i32" or len(bt) != 2:
        return "block_tables must be [num_seqs, max_blocks] i32"
    if dt["context_lens"] != "i32" or len(cl) != 1:
        return "context_lens must be [num_seqs] i32"
    num_seqs = cl[0]
    if num_seqs <= 0 or (desc.get("max_num_seqs", 0) and num_seqs > desc["max_num_seqs"]):
        return "num_seqs %d out of range" % num_seqs
    q_len = int(args.get("q_len", 1))
    lo, hi = desc["q_len"]
    if not lo <= q_len <= hi:
        return "q_len %d outside [%d, %d]" % (q_len, lo, hi)
    if num_rows != num_seqs * q_len:
        return "q has %d rows, expected num_seqs*q_len = %d" % (num_rows, num_seqs * q_len)
    if bt[0] < num_seqs:
        return "block_tables has %d rows for %d sequences" % (bt[0], num_seqs)
    scales = [n for n in ("k_scale", "v_scale") if n in tensors]
    if len(scales) == 1:
        return "%s given without its pair" % scales[0]
    kind = "none"
    if scales:
        ks, vs = _shape(tensors, "k_scale"), _shape(tensors, "v_scale")
        if dt["k_scale"] != "f32" or dt["v_scale"] != "f32":
            return "scales must be f32"
        if ks == [1] and vs == [1]:
            kind = "per_tensor"
        elif ks == [nb, hkv, bs] and vs == [nb, hkv, bs]:
            kind = "per_token"
        else:
            return "scales must be [1] or [num_blocks, Hkv, block_size], got %s and %s" % (ks, vs)
    if kind not in desc["scale_kinds"]:
        return "scale kind %s not supported" % kind
    lens = tensors["context_lens"].get("values")
    table = tensors["block_tables"].get("values")
    if lens is not None and table is not None:
        max_len = desc.get("max_context_len", 0)
        for s, n in enumerate(lens):
            if n < 0 or (max_len and n > max_len):
                return "context_lens[%d] = %d out of range" % (s, n)
            pages = (n + bs - 1) // bs
            if pages > bt[1]:
                return "context_lens[%d] = %d needs %d blocks, block_tables has %d" % (s, n, pages, bt[1])
            for i in range(pages):
                b = table[s * bt[1] + i]
                if not 0 <= b < nb:
                    return "block_tables[%d][%d] = %d outside the cache" % (s, i, b)
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
    for name in sorted(defects):
        print("%-22s %s" % (name, defects[name]))
