#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch example decode (examples/workers/torch_decode.py) on a CUDA
device, through `import pav` in this process and through `exec:` as a worker,
on the same cases:

    PYTHONPATH=build/cpu/python python3 bench/adapter/torch_cuda_compare.py [--seconds 60] [--calls 40] [--out DIR]

1. A timed fuzz of each (`pav.fuzz(..., seconds=S)` and `pav fuzz --kernel
   exec:... --minutes`), the decode property from the same seed: cases run.
2. Calls per second on one case (bench/adapter_bench's 4 x 4096 tokens, packed
   fp8 cache) through each, beside the null lib: and exec: kernels' overhead.

The in-process kernel gets pav's host arrays and moves them to the device
itself, as the worker does (pav_torch.Device), and returns its output on the
host. Writes fuzz.json and calls.json (adapter_bench's JSON) under --out.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "workers"))
sys.path.insert(0, HERE)

import pav  # noqa: E402
from pav import api  # noqa: E402
import torch_decode  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--pav", default=os.environ.get("PAV_BINARY", "pav"))
    parser.add_argument("--out", default=".")
    opts = parser.parse_args()
    os.makedirs(opts.out, exist_ok=True)
    worker = "exec:%s %s --device %s" % (sys.executable, os.path.join(ROOT, "examples", "workers", "torch_decode.py"),
                                         opts.device)
    kernel = pav.Kernel(torch_decode.TorchDecode(opts.device).decode, torch_decode.DESCRIPTION, replay_spec=worker)

    t0 = time.time()
    inproc = pav.fuzz(kernel, seconds=opts.seconds, seed=2026, properties=["decode"],
                      save_dir=os.path.join(opts.out, "cases-inprocess"))
    t1 = time.time()
    r = subprocess.run([opts.pav, "fuzz", "--kernel", worker, "--minutes", repr(opts.seconds / 60), "--seed", "2026",
                        "--property", "decode", "--save", os.path.join(opts.out, "cases-exec"), "--quiet", "--json"],
                       capture_output=True, text=True)
    t2 = time.time()
    exec_report = json.loads(r.stdout)
    fuzz = {"device": torch_decode.torch.cuda.get_device_name(0) if opts.device.startswith("cuda") else "cpu",
            "seconds": opts.seconds,
            "inprocess": {"cases": inproc["runs"][0]["cases"], "passed": inproc.passed, "wall_s": t1 - t0},
            "exec": {"cases": exec_report["runs"][0]["cases"], "passed": exec_report["passed"], "wall_s": t2 - t1}}
    fuzz["ratio"] = fuzz["inprocess"]["cases"] / max(fuzz["exec"]["cases"], 1)
    with open(os.path.join(opts.out, "fuzz.json"), "w") as f:
        json.dump(fuzz, f, indent=2)
    print(json.dumps(fuzz))

    import inprocess_bench
    import null_worker
    null = pav.Kernel(inprocess_bench.null_in_place, pav.Description(null_worker.DESCRIPTION), check=False)
    with api._Registered() as reg:
        specs = [reg.spec(kernel, None), worker, reg.spec(null, None), "lib:" + inprocess_bench.null_lib(),
                 "exec:%s %s" % (sys.executable, os.path.join(HERE, "null_worker.py"))]
        for label, spec in zip(["torch cuda in process", "torch cuda exec", "null in process", "null lib",
                                "null exec"], specs):
            print("%-22s %s" % (label, spec[:100]))
        args = []
        for s in specs:
            args += ["--kernel", s]
        rc = api._extension().adapter_bench(args + ["--calls", str(opts.calls),
                                                    "--json-out", os.path.join(opts.out, "calls.json")])
    return rc


if __name__ == "__main__":
    sys.exit(main())
