# SPDX-License-Identifier: Apache-2.0
"""A Python kernel of the in-process convention, served as a pav worker:

    pav replay CASE --kernel exec:'python3 .../pav/serve.py FILE.py:NAME --description JSON'

FILE.py:NAME names the function (NAME may be dotted: Class.method of a class
at the file's top level is not a function pav can call; a module-level
function is). The function gets the same `pav.worker.Call` as in process,
with `call.out` and `call.lse` arrays to write, and its outputs are held to
the same rules (pav.inprocess), so a case saved by `pav.verify` or the pytest
plugin replays from the command line with the same verdict. pav records this
command in the cases it saves from a Python kernel (pav.Kernel's replay_spec).
A kernel of device memory (its description says `memory: "device"`) gets the
call's tensors on the current CUDA device, as in process.
"""
import argparse
import importlib.util
import json
import os
import sys

import numpy as np

if __package__ in (None, ""):  # run as a file: the package is this file's folder
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pav import inprocess, worker  # noqa: E402


def load_function(target):
    """FILE.py:NAME -> the function, the file imported as a module of its own."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise SystemExit("pav.serve: expected FILE.py:NAME, got %r" % target)
    if not os.path.isfile(path):
        raise SystemExit("pav.serve: %s: no such file" % path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("pav_served_" + os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    fn = module
    for part in name.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise SystemExit("pav.serve: %s has no %s" % (path, name))
    return fn


def served(fn, device=None):
    """fn as a worker decode: out and lse arrays to write, NaN until written,
    the outputs checked as in process and handed to serve() as float32. With
    a device (a kernel of device memory), fn gets the call on that torch
    device as it would in process."""
    def decode(call):
        if device is not None:
            import torch
            call = inprocess.device_call(call, device)
            inprocess.take_outputs(call, fn(call))
            torch.cuda.synchronize(device)
            return call.out.float().cpu().numpy(), None if call.lse is None else call.lse.cpu().numpy()
        call.out = worker.narrow(np.full(call.out_shape, np.nan, dtype=np.float32), call.out_dtype)
        call.lse = np.full(call.lse_shape, np.nan, dtype=np.float32) if call.want_lse else None
        inprocess.take_outputs(call, fn(call))
        out = call.out if call.out_dtype == "f32" else worker.widen(call.out, call.out_dtype)
        return out, call.lse
    return decode


def main(argv=None):
    parser = argparse.ArgumentParser(prog="pav.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="FILE.py:NAME, the kernel function")
    parser.add_argument("--description", required=True, help="the kernel's description, as JSON")
    args = parser.parse_args(argv)
    description = json.loads(args.description)
    device = None
    if description.get("memory") == "device":
        # pav sends a worker host files; the kernel gets them on the device,
        # as in process.
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("pav.serve: the kernel works on device memory and torch sees no CUDA device here")
        device = torch.device("cuda", torch.cuda.current_device())
        description = dict(description, memory="host")
    fn = load_function(args.target)
    worker.serve(worker.Kernel(description, served(fn, device), getattr(fn, "poison_scratch", None)))


if __name__ == "__main__":
    main()
