#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The example workers' check (pav_worker.check_call) on both sides of the MLA
and large-cache rules, with requests written out by hand:

    python3 examples/tests/check_refuses.py

Each case is a check request as pav sends it (descriptors only: dtype, shape,
strides, and the tables' values); the check must accept the ones inside the
NumPy worker's description and refuse, naming the rule, the ones outside.
Exits 1 on the first case that goes the other way.
"""
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "workers"))
import numpy_decode  # noqa: E402
import pav_worker  # noqa: E402


def contiguous(shape):
    strides, n = [], 1
    for extent in reversed(shape):
        strides.insert(0, n)
        n *= extent
    return strides


def view(dtype, shape, values=None):
    d = {"dtype": dtype, "shape": list(shape), "strides": contiguous(shape)}
    if values is not None:
        d["values"] = list(values)
    return d


def mla_request(dv=512, d=576, pages=4, page_size=16, hq=16):
    """Two sequences (lengths 20 and 0) of q_len 1 against one latent nhd cache."""
    return {
        "op": "check", "id": 1,
        "args": {"q_len": 1, "softmax_scale": 0.05, "max_partitions": 0, "cache_layout": "nhd",
                 "page_table": "block_table", "kv_storage": "latent", "v_head_dim": dv},
        "tensors": {
            "q": view("bf16", [2, hq, d]),
            "out": view("bf16", [2, hq, dv]),
            "k_cache": view("bf16", [pages, page_size, 1, d]),
            "block_tables": view("i32", [2, 2], [0, 1, 3, 3]),
            "context_lens": view("i32", [2], [20, 0]),
        },
    }


def main():
    desc = numpy_decode.DESCRIPTION
    failures = 0

    def expect(name, request, refused_with=None, description=desc):
        nonlocal failures
        why = pav_worker.check_call(description, request)
        ok = why is None if refused_with is None else (why is not None and refused_with in why)
        print("%s %s: %s" % ("ok  " if ok else "FAIL", name, why or "accepted"))
        failures += not ok

    expect("MLA 512 + 64", mla_request())
    expect("MLA 128 + 64", mla_request(dv=128, d=192))
    expect("MLA 448 + 128 (undeclared split)", mla_request(dv=448), "MLA dims [448, 128] not supported")
    expect("MLA 512 + 48 (undeclared head dim)", mla_request(d=560), "head_dim 560 not supported")
    r = mla_request()
    r["tensors"]["out"] = view("bf16", [2, 16, 576])
    expect("MLA out with D dims", r, "out shape")
    r = mla_request()
    r["tensors"]["k_scale"] = view("f32", [1])
    expect("MLA one scale", r)
    r["tensors"]["v_scale"] = view("f32", [1])
    expect("MLA with a V scale of its own", r, "v_scale given with an MLA cache")
    r = mla_request()
    r["tensors"]["v_cache"] = view("bf16", [4, 16, 1, 576])
    expect("MLA with a separate V", r, "k_cache alone")
    r = mla_request()
    r["args"]["v_head_dim"] = 576
    r["tensors"]["out"] = view("bf16", [2, 16, 576])
    expect("MLA D_v = D", r, "multiple of 16 in 16..560")
    no_mla = copy.deepcopy(desc)
    no_mla["kv_storage"] = ["separate", "combined"]
    no_mla.pop("mla_dims")
    expect("MLA to a kernel without latent storage", mla_request(), "kv storage latent not supported",
           description=no_mla)

    # A cache spanning 2^31 elements: 2^31 / (16 * 576) pages is not whole, so
    # the edge is the page count below and above it.
    edge = -(-2 ** 31 // (16 * 576))
    expect("cache below 2^31 elements", mla_request(pages=edge - 1))
    expect("cache of 2^31 elements or more", mla_request(pages=edge), "does not declare large_cache")
    large = dict(desc, large_cache=True)
    expect("cache of 2^31 elements, declared", mla_request(pages=edge), description=large)
    # Exactly 2^31 elements: 2^17 nhd pages of 16 x 8 x 128, K and V apart.
    plain = mla_request()
    plain["args"].update(kv_storage="separate")
    del plain["args"]["v_head_dim"]
    plain["tensors"].update(q=view("bf16", [2, 8, 128]), out=view("bf16", [2, 8, 128]))
    for n in (2 ** 17 - 1, 2 ** 17):
        for name in ("k_cache", "v_cache"):
            plain["tensors"][name] = view("bf16", [n, 16, 8, 128])
        if n < 2 ** 17:
            expect("a cache one page short of 2^31 elements", copy.deepcopy(plain))
        else:
            expect("a cache of exactly 2^31 elements", copy.deepcopy(plain), "does not declare large_cache")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
