# SPDX-License-Identifier: Apache-2.0
"""A Python callable as a kernel under test, in pav's own process.

pav hands the callable one `pav.worker.Call` per decode call, built over pav's
own memory (no file, no copy). The callable either writes `call.out` (and
`call.lse`) in place and returns None, or returns `out` or `(out, lse)`:
NumPy arrays or torch tensors, of exactly the call's output shape, C-contiguous,
on the CPU (pav's memory is the host's), in the output's dtype or float32
(rounded to it to nearest even, as a worker's float32 output is). Anything
else is the kernel's fault and a verdict, as is an exception it raises.

The same rules hold when the callable runs as a worker (pav.serve), so a case
found in process replays from the command line with the same verdict.
"""
import sys
import traceback

import numpy as np

from pav import worker

# What a returned array's dtype may be, per output dtype (by the protocol's
# names): the output's own dtype, or float32.
_NUMPY_NAMES = {"float32": "f32", "float16": "f16"}
_TORCH_NAMES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16"}


class OutputError(Exception):
    """What a kernel gave back is not an output pav can take."""


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _store(dest, value, name, dtype):
    """Checks a returned output and copies it into pav's array `dest` (stored
    form of `dtype`). Raises OutputError naming what is wrong."""
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        raise OutputError("%s is a %s, not an array or tensor" % (name, type(value).__name__))
    shape = tuple(int(n) for n in value.shape)
    if shape != tuple(dest.shape):
        raise OutputError("%s has shape %s; the call's %s is %s" % (name, list(shape), name, list(dest.shape)))
    if _is_torch(value):
        if value.device.type != "cpu":
            raise OutputError("%s is on %s; pav's outputs are in host memory (return %s.cpu())" %
                              (name, value.device, name))
        contiguous = value.is_contiguous()
        strides = list(value.stride())
        got = _TORCH_NAMES.get(str(value.dtype))
    else:
        if not isinstance(value, np.ndarray):
            raise OutputError("%s is a %s, not a NumPy array or torch tensor" % (name, type(value).__name__))
        contiguous = value.flags.c_contiguous
        strides = [st // max(value.itemsize, 1) for st in value.strides]
        got = _NUMPY_NAMES.get(str(value.dtype))
    if not contiguous:
        raise OutputError("%s is not contiguous (strides %s for shape %s)" % (name, strides, list(shape)))
    if got not in (dtype, "f32"):
        raise OutputError("%s has dtype %s; the call's %s is %s (float32 is taken and rounded)" %
                          (name, str(value.dtype).replace("torch.", ""), name, dtype))
    if _is_torch(value):
        import torch
        value = value.detach().cpu()
        value = value.view(torch.int16).numpy().view(np.uint16) if got == "bf16" else value.numpy()
    if got == dtype and dtype != "f32":
        dest[...] = value  # already in the stored form (bf16 bits, f16)
    else:
        dest[...] = worker.narrow(np.asarray(value, dtype=np.float32), dtype)


def take_outputs(call, result):
    """Puts what the kernel returned into call.out and call.lse (nothing when it
    returned None: it wrote them in place). Raises OutputError."""
    if result is None:
        return
    if isinstance(result, tuple):
        if len(result) != 2:
            raise OutputError("the kernel returned a tuple of %d; expected out or (out, lse)" % len(result))
        out, lse = result
    else:
        out, lse = result, None
    _store(call.out, out, "out", call.out_dtype)
    if call.want_lse and lse is not None:
        _store(call.lse, lse, "lse", "f32")


class Runner:
    """What pav's extension calls: check(request) -> None or a reason;
    decode(request, arrays) -> None, or (status, message) for a verdict."""

    def __init__(self, fn, description, check=None):
        self.fn = fn
        self.description = description
        self.check_fn = check

    def check(self, request):
        if callable(self.check_fn):
            return self.check_fn(request)
        return worker.check_call(self.description, request)

    def decode(self, request, arrays):
        call = worker.Call(request, arrays)
        try:
            result = self.fn(call)
            take_outputs(call, result)
        except OutputError as e:
            return ("error", str(e))
        except Exception as e:  # the kernel's own failure: a verdict, with its traceback for people
            traceback.print_exc(file=sys.stderr)
            return ("error", "%s: %s" % (type(e).__name__, e))
        return None
