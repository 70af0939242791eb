#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An independent implementation of pav's generator 2 (properties/case/counter_rng.hpp)
and of how build_case turns a seed into tensors, written from the algorithm's
description, in plain Python integers and IEEE doubles (no NumPy).

It computes the first bytes of the tensors of the case in
fixtures/generator-pins.json and compares them with the pinned values there;
the C++ test (properties/case/counter_rng_test.cpp) compares build_case's bytes with
the same pins. Both agreeing with one file shows the seed means the same bytes
in both implementations, whatever the platform.

  rng_reference.py --check [PINS]   exit 0 when every pinned value matches, 1 otherwise
  rng_reference.py --print [PINS]   print the values this implementation computes (JSON)
"""
import json
import math
import struct
import sys

M64 = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def key(seed, tag, a=0, b=0, c=0):
    k = mix64(seed ^ ((tag << 56) & M64))
    k = mix64(k ^ a)
    k = mix64(k ^ b)
    return mix64(k ^ c)


def bits(k, i):
    return mix64((k + 0xD1342543DE82EF95 * (i + 1)) & M64)


def f32(x):
    """Round a double to the nearest float32 (ties to even)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


NORMAL_SCALE = math.sqrt(3.0 / (2.0**32 - 1.0))  # rounded to double, as the C++ literal


def normal(k, i):
    h = bits(k, i)
    s = (h & 0xFFFF) + ((h >> 16) & 0xFFFF) + ((h >> 32) & 0xFFFF) + (h >> 48)
    return f32(float(s - 131070) * NORMAL_SCALE)


def uniform(k, i):
    return (bits(k, i) >> 40) * 2.0**-24


def below(k, i, n):
    return (bits(k, i) * n) >> 64


def shuffle(v, k):
    for i in range(len(v) - 1, 0, -1):
        j = below(k, i, i + 1)
        v[i], v[j] = v[j], v[i]


def to_bf16(x):
    u = f32_bits(x)
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return (u >> 16) | 0x40
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFFFFFF
    return u >> 16


FP8 = {"fp8_e4m3fn": dict(bias=7, max=448.0, max_code=0x7E, nan=0x7F, fnuz=False),
       "fp8_e4m3fnuz": dict(bias=8, max=240.0, max_code=0x7F, nan=0x80, fnuz=True)}


def to_fp8(x, flavour):
    """Round to nearest even, saturating, from the format's definition."""
    f = FP8[flavour]
    if math.isnan(x):
        return f["nan"]
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a >= f["max"]:
        code = f["max_code"]
    else:
        emin = 1 - f["bias"]  # exponent of the smallest normal
        if a < 2.0**emin:
            units = round(a / 2.0 ** (emin - 3))  # subnormal steps; exact quotient, ties to even
            code = units  # 8 is the smallest normal's code
        else:
            e = math.frexp(a)[1] - 1  # a = 1.m * 2^e
            units = round(a / 2.0 ** (e - 3))  # 8..16
            if units == 16:
                e, units = e + 1, 8
            code = ((e + f["bias"]) << 3) | (units - 8)
        code = min(code, f["max_code"])
    if f["fnuz"] and code == 0:
        return 0
    return code | sign


TAG_BLOCKS, TAG_Q, TAG_TENSOR_SCALES, TAG_TOKEN_SCALES, TAG_K, TAG_V = 1, 2, 3, 4, 5, 6
F32_NAN = 0x7FC00000


def build(spec):
    """The tensors build_case makes for a generator-2 spec (plain V, no q padding)."""
    lens, seed = spec["lens"], spec["seed"]
    H, G, D, bs = spec["hkv"], spec["group"], spec["head_dim"], spec["block_size"]
    q_len, fl, scales = spec["q_len"], spec["cache_dtype"], spec["scales"]
    assert spec["v_layout"] == "plain" and spec["q_dtype"] == "bf16" and spec.get("q_row_pad", 0) == 0
    B = len(lens)
    nblk = [(L + bs - 1) // bs if L > 0 else 0 for L in lens]
    needed = sum(nblk)
    max_blocks = max(1, max(nblk))
    num_blocks = needed + spec.get("spare_blocks", 1)
    ids = list(range(needed))
    shuffle(ids, key(seed, TAG_BLOCKS))
    tables = [needed] * (B * max_blocks)
    n = 0
    for b in range(B):
        for i in range(nblk[b]):
            tables[b * max_blocks + i] = ids[n]
            n += 1
    Hq = H * G
    q = [to_bf16(normal(key(seed, TAG_Q, r), i)) for r in range(B * q_len) for i in range(Hq * D)]
    nan8 = FP8[fl]["nan"]
    k = [nan8] * (num_blocks * H * D * bs)
    v = list(k)
    ks = vs = None
    if scales == "per_tensor":
        row = key(seed, TAG_TENSOR_SCALES, 0)
        ks = [f32(0.03125 * f32(0.75 + 0.5 * uniform(row, 0)))]
        vs = [f32(0.03125 * f32(0.75 + 0.5 * uniform(row, 1)))]
    elif scales == "per_token":
        ks = [None] * (num_blocks * H * bs)
        vs = [None] * (num_blocks * H * bs)
    for b in range(B):
        for t in range(max(lens[b], 0)):
            blk, off = tables[b * max_blocks + t // bs], t % bs
            for h in range(H):
                tk = tv = 1.0
                if scales == "per_token":
                    row = key(seed, TAG_TOKEN_SCALES, b, t, h)
                    tk = f32(0.5 + uniform(row, 0))
                    tv = f32(0.5 + uniform(row, 1))
                    ks[(blk * H + h) * bs + off] = f32(0.03125 * tk)
                    vs[(blk * H + h) * bs + off] = f32(0.03125 * tv)
                krow, vrow = key(seed, TAG_K, b, t, h), key(seed, TAG_V, b, t, h)
                for d in range(D):
                    ko = ((blk * H + h) * (D // 16) + d // 16) * bs * 16 + off * 16 + d % 16
                    vo = ((blk * H + h) * D + d) * bs + off
                    k[ko] = to_fp8(f32(f32(normal(krow, d) * 32.0) / tk), fl)
                    v[vo] = to_fp8(f32(f32(normal(vrow, d) * 32.0) / tv), fl)

    def scale_bits(xs):
        return None if xs is None else [F32_NAN if x is None else f32_bits(x) for x in xs]

    return dict(block_tables=tables, q_bits=q, k_codes=k, v_codes=v,
                k_scale_bits=scale_bits(ks), v_scale_bits=scale_bits(vs))


def primitives(seed):
    """The generator's own outputs for a few indices, as exact integers."""
    k = key(seed, 9, 1, 2, 3)
    perm = list(range(10))
    shuffle(perm, k)
    return dict(key=k, bits=[bits(k, i) for i in range(4)],
                normal_bits=[f32_bits(normal(k, i)) for i in range(8)],
                uniform_bits=[f32_bits(uniform(k, i)) for i in range(4)],
                below_1000=[below(k, i, 1000) for i in range(8)], shuffle_10=perm)


def computed(pins):
    out = {"primitives": primitives(pins["primitives_seed"]), "cases": []}
    for case in pins["cases"]:
        t = build(case["spec"])
        out["cases"].append({name: t[name][:count] for name, count in case["first"].items()})
    return out


def main(argv):
    mode = argv[1] if len(argv) > 1 else "--check"
    path = argv[2] if len(argv) > 2 else "fixtures/generator-pins.json"
    with open(path) as f:
        pins = json.load(f)
    got = computed(pins)
    if mode == "--print":
        json.dump(got, sys.stdout)
        print()
        return 0
    if mode != "--check":
        print(__doc__, file=sys.stderr)
        return 2
    groups = [("primitives", pins["primitives"], got["primitives"])]
    for n, (case, mine) in enumerate(zip(pins["cases"], got["cases"])):
        groups += [(f"cases[{n}].{name}", want, mine.get(name)) for name, want in case["expect"].items()]
    bad = 0
    for name, want, have in groups:
        if have != want:
            bad += 1
            print(f"rng_reference: {name} differs:\n  pinned   {want}\n  computed {have}", file=sys.stderr)
    print(f"rng_reference: {len(groups) - bad} of {len(groups)} pinned groups match")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
