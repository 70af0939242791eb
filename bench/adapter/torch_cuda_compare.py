#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch example decode (examples/workers/torch_decode.py) on a CUDA
device, through `import pav` in this process and through `exec:` as a worker,
on the same cases:

    PYTHONPATH=BUILD/python python3 bench/adapter/torch_cuda_compare.py [--seconds 60] [--jobs 1,8]
        [--calls 40] [--gpu-plugin BUILD/adapters/libpav_gpu_kernel.so] [--out DIR]

The kernel runs three ways: in process on device memory (the description says
`memory: "device"`: pav copies the call to the device and hands it over as
DLPack tensors, as it does for a lib: kernel of device memory), in process on
pav's host arrays (the kernel moves them to the device itself, as the worker
does), and as the exec: worker.

1. A timed fuzz of each, the decode property from the same seed, at each
   --jobs: cases run (fuzz.json).
2. Calls per second on one case (bench/adapter_bench's 4 x 4096 tokens, packed
   fp8 cache) through each, beside pav's own GPU kernel as a lib: plugin of
   device memory (--gpu-plugin) and the null lib:, exec: and in-process
   kernels' overhead (calls.json, adapter_bench's JSON).

A GPU build of pav's Python module is needed for the device-memory kernel.
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


def fuzz_cases(kernel, worker, seconds, jobs, out, pav_binary):
    """Cases each way runs in a timed fuzz of the decode property from one seed."""
    row = {"jobs": jobs}
    for label, k in kernel.items():
        t0 = time.time()
        r = pav.fuzz(k, seconds=seconds, seed=2026, properties=["decode"], jobs=jobs,
                     save_dir=os.path.join(out, "cases-%s-j%d" % (label, jobs)))
        row[label] = {"cases": r["runs"][0]["cases"], "passed": r.passed, "wall_s": time.time() - t0}
    t0 = time.time()
    r = subprocess.run([pav_binary, "fuzz", "--kernel", worker, "--minutes", repr(seconds / 60), "--seed", "2026",
                        "--property", "decode", "--jobs", str(jobs), "--save",
                        os.path.join(out, "cases-exec-j%d" % jobs), "--quiet", "--json"], capture_output=True, text=True)
    report = json.loads(r.stdout)
    row["exec"] = {"cases": report["runs"][0]["cases"], "passed": report["passed"], "wall_s": time.time() - t0}
    for label in kernel:
        row["ratio_%s_to_exec" % label] = row[label]["cases"] / max(row["exec"]["cases"], 1)
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--jobs", default="1,8", help="comma-separated --jobs of each timed fuzz")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--pav", default=os.environ.get("PAV_BINARY", "pav"))
    parser.add_argument("--gpu-plugin", default=None, help="pav's GPU kernel plugin (libpav_gpu_kernel.so)")
    parser.add_argument("--out", default=".")
    opts = parser.parse_args()
    os.makedirs(opts.out, exist_ok=True)
    worker = "exec:%s %s --device %s" % (sys.executable, os.path.join(ROOT, "examples", "workers", "torch_decode.py"),
                                         opts.device)
    decode = torch_decode.TorchDecode(opts.device).decode
    kernel = {
        "inprocess_device": pav.Kernel(decode, pav.Description(torch_decode.DESCRIPTION, memory="device"),
                                       replay_spec=worker),
        "inprocess_host": pav.Kernel(decode, torch_decode.DESCRIPTION, replay_spec=worker),
    }
    fuzz = {"device": torch_decode.torch.cuda.get_device_name(0), "seconds": opts.seconds,
            "runs": [fuzz_cases(kernel, worker, opts.seconds, int(j), opts.out, opts.pav)
                     for j in opts.jobs.split(",")]}
    with open(os.path.join(opts.out, "fuzz.json"), "w") as f:
        json.dump(fuzz, f, indent=2)
    print(json.dumps(fuzz))

    import inprocess_bench
    import null_worker
    null = pav.Kernel(inprocess_bench.null_in_place, pav.Description(null_worker.DESCRIPTION), check=False)
    with api._Registered() as reg:
        labels = ["torch device in process", "torch host in process", "torch exec"]
        specs = [reg.spec(kernel["inprocess_device"], None), reg.spec(kernel["inprocess_host"], None), worker]
        if opts.gpu_plugin:
            # Its uniform path: adapter_bench hands a kernel no work plan.
            labels.append("pav gpu lib")
            specs.append("lib:" + os.path.abspath(opts.gpu_plugin) + " --path uniform")
        labels += ["null in process", "null lib", "null exec"]
        specs += [reg.spec(null, None), "lib:" + inprocess_bench.null_lib(),
                  "exec:%s %s" % (sys.executable, os.path.join(HERE, "null_worker.py"))]
        for label, spec in zip(labels, specs):
            print("%-24s %s" % (label, spec[:100]))
        args = []
        for s in specs:
            args += ["--kernel", s]
        rc = api._extension().adapter_bench(args + ["--calls", str(opts.calls),
                                                    "--json-out", os.path.join(opts.out, "calls.json")])
    return rc


if __name__ == "__main__":
    sys.exit(main())
