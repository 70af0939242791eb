#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A worker that does no attention: it answers each decode request with a zero
out.npy (and a -inf lse.npy). The adapter benchmark runs it so that what it
times is the protocol's cost per call, not a kernel's.

--load also opens every input (np.load with mmap_mode="r", then touches each
page), as a worker that reads its inputs must.
"""
import json
import os
import sys

import numpy as np

DESCRIPTION = {
    "name": "null_worker", "version": "1", "memory": "host",
    "q_dtypes": ["bf16", "f16"], "out_dtype": "same",
    "cache_dtypes": ["fp8_e4m3fn", "fp8_e4m3fnuz"], "v_layouts": ["plain", "trans"],
    "scale_kinds": ["none", "per_tensor", "per_token"],
    "block_sizes": [16, 64, 128], "head_dims": [64, 128, 256], "gqa_ratios": list(range(1, 17)),
    "q_len": [1, 4], "split": "self", "split_ceiling": False, "writes_lse": True, "check": False,
    "profile": {"q_quant": "none", "p_round": "none", "partial": "none"},
}
TYPES = {"bf16": "<u2", "f16": "<f2", "f32": "<f4"}


def main():
    load = "--load" in sys.argv[1:]
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op == "describe":
            out.write(json.dumps({"ok": True, "protocol": 1, "kernel": DESCRIPTION}) + "\n")
        elif op == "decode":
            folder = req["dir"]
            if load:
                for t in req["tensors"].values():
                    a = np.load(os.path.join(folder, t["file"]), mmap_mode="r")
                    a.view(np.uint8).reshape(-1)[::4096].sum() if a.size else None
            for name, o in req["outputs"].items():
                fill = -np.inf if name == "lse" else 0
                np.save(os.path.join(folder, o["file"]), np.full(o["shape"], fill, dtype=TYPES[o["dtype"]]))
            out.write(json.dumps({"id": req["id"], "ok": True}) + "\n")
        elif op == "quit":
            return
        out.flush()


if __name__ == "__main__":
    main()
