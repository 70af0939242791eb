# SPDX-License-Identifier: Apache-2.0
"""A Python callable as a kernel under test, in pav's own process.

pav hands the callable one `pav.worker.Call` per decode call, built over pav's
own memory (no file, no copy). The callable either writes `call.out` (and
`call.lse`) in place and returns None, or returns `out` or `(out, lse)`:
NumPy arrays or torch tensors, of exactly the call's output shape, C-contiguous,
where pav's outputs are (the host's memory, or for a kernel of device memory
pav's device), in the output's dtype or float32 (rounded to it to nearest
even, as a worker's float32 output is). Anything else is the kernel's fault
and a verdict, as is an exception it raises.

A kernel of device memory (description `memory: "device"`) gets torch tensors
on pav's device, over pav's device copies of the call (DLPack, no further
copy): `call.torch(name)`, `call.out`, `call.lse`. pav waits for all of the
device's work after the call before it reads the outputs.

The same rules hold when the callable runs as a worker (pav.serve), so a case
found in process replays from the command line with the same verdict.
"""
import os
import sys
import threading
import traceback

import numpy as np

from pav import worker

# What a returned array's dtype may be, per output dtype (by the protocol's
# names): the output's own dtype, or float32.
_NUMPY_NAMES = {"float32": "f32", "float16": "f16"}
_TORCH_NAMES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16"}


# What pav prints or keeps of a kernel's text (an exception and its traceback),
# as for a worker's stderr and messages (docs/limits.md): its head and tail.
TEXT_LIMIT = 2048


def bounded(text, limit=TEXT_LIMIT):
    if len(text) <= limit:
        return text
    half = limit // 2
    return "%s\n... (%d characters left out) ...\n%s" % (text[:half], len(text) - 2 * half, text[-half:])


class OutputError(Exception):
    """What a kernel gave back is not an output pav can take."""


_is_torch = worker.is_torch


def _store(dest, value, name, dtype):
    """Checks a returned output and copies it into pav's array `dest` (stored
    form of `dtype`). Raises OutputError naming what is wrong."""
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        raise OutputError("%s is a %s, not an array or tensor" % (name, type(value).__name__))
    shape = tuple(int(n) for n in value.shape)
    if shape != tuple(dest.shape):
        raise OutputError("%s has shape %s; the call's %s is %s" % (name, list(shape), name, list(dest.shape)))
    on_device = _is_torch(dest)  # a kernel of device memory: pav's output is a device tensor
    if on_device and not _is_torch(value):
        raise OutputError("%s is a %s; pav's outputs are torch tensors on %s" % (name, type(value).__name__,
                                                                              dest.device))
    if _is_torch(value):
        where = dest.device if on_device else "cpu"
        if str(value.device) != str(where):
            raise OutputError("%s is on %s; pav's outputs are on %s (return %s.to(\"%s\"))" %
                              (name, value.device, where, name, where))
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
    if on_device:
        dest.copy_(value.detach())  # float32 rounds to the output's dtype, to nearest even
        return
    if _is_torch(value):
        import torch
        value = value.detach().cpu()
        value = value.view(torch.int16).numpy().view(np.uint16) if got == "bf16" else value.numpy()
    if got == dtype and dtype != "f32":
        dest[...] = value  # already in the stored form (bf16 bits, f16)
    else:
        dest[...] = worker.narrow(np.asarray(value, dtype=np.float32), dtype)


def take_outputs(call, result, into=None):
    """Puts what the kernel returned into call.out and call.lse, or into the
    arrays of `into` ({"out": ..., "lse": ...}, pav's copies the kernel never
    saw) where given (nothing when it returned None: it wrote them in place).
    Returns the names stored. Raises OutputError."""
    if result is None:
        return ()
    if isinstance(result, tuple):
        if len(result) != 2:
            raise OutputError("the kernel returned a tuple of %d; expected out or (out, lse)" % len(result))
        out, lse = result
    else:
        out, lse = result, None
    into = into if into is not None else {"out": call.out, "lse": call.lse}
    _store(into["out"], out, "out", call.out_dtype)
    if call.want_lse and lse is not None:
        _store(into["lse"], lse, "lse", "f32")
        return ("out", "lse")
    return ("out",)


def device_tensors(request, capsules):
    """The call's DLPack capsules (pav's device copies) as torch tensors, each
    in its torch dtype (fp8 codes viewed as torch's fp8 dtype where it has one)."""
    import torch.utils.dlpack
    dtypes = {name: t["dtype"] for name, t in request["tensors"].items()}
    dtypes["out"], dtypes["lse"] = request["outputs"]["out"]["dtype"], "f32"
    tensors = {}
    for name, capsule in capsules.items():
        t = torch.utils.dlpack.from_dlpack(capsule)
        want = worker.torch_dtype(dtypes[name])
        tensors[name] = t if t.dtype == want else t.view(want)
    return tensors


def to_device(array, dtype, device):
    """A host input (as the protocol stores it) copied to a torch device at its
    own strides: its span is copied and viewed there as on the host, as pav's
    device copies are."""
    import torch
    strides = tuple(st // array.itemsize for st in array.strides)
    span = worker.span_elements(array.shape, strides)
    kind = np.int16 if dtype == "bf16" else array.dtype
    sparse = worker.data_extents(array)
    if sparse is None:
        flat = np.lib.stride_tricks.as_strided(array, (span,), (array.itemsize,), writeable=False)
        t = torch.from_numpy(np.array(flat.view(kind))).to(device)
    else:
        # A large file with holes (a large cache's untouched zeros): zeros on the
        # device and the data ranges copied over them, the same bytes without
        # reading the holes.
        span_bytes, extents = sparse
        t = torch.zeros(span_bytes.shape[0], dtype=torch.uint8, device=device)
        for lo, hi in extents:
            t[lo:hi].copy_(torch.from_numpy(np.array(span_bytes[lo:hi])))
        t = t.view(torch.from_numpy(np.empty(0, dtype=kind)).dtype)
    t = t.view(torch.bfloat16) if dtype == "bf16" else t
    return t.as_strided(tuple(array.shape), strides)


def device_call(call, device):
    """A worker's call as a kernel of device memory sees it in pav's process:
    every input on the device at its own strides, out and lse NaN there."""
    import torch
    arrays = {name: to_device(a, dtype, device) for name, (a, dtype) in call.raw.items()}
    arrays["out"] = torch.full(call.out_shape, float("nan"), dtype=worker.torch_dtype(call.out_dtype), device=device)
    if call.want_lse:
        arrays["lse"] = torch.full(call.lse_shape, float("nan"), dtype=torch.float32, device=device)
    return worker.Call(call.request, arrays)


class KernelInterrupted(BaseException):
    """Raised by pav inside a kernel's call that has not returned within the
    run's timeout, or during which the run was asked to stop. A BaseException,
    as KeyboardInterrupt is, so that a kernel's `except Exception` lets it through;
    pav raises it again every 0.2 s for a few seconds in case the kernel catches
    it all the same."""


class KernelExit(Exception):
    """os._exit called by a kernel during its call (see _guarded_exit)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


# os._exit ends the process at once: no exception, no atexit, no verdict. During a
# kernel's call, on the thread and in the process that called it, it raises
# KernelExit instead, and the call is a verdict; anywhere else (another thread, a
# child the kernel forked, pav's own code) it exits as it always does.
_calling = threading.local()
_real_exit = os._exit


def _guarded_exit(code):
    if getattr(_calling, "pid", None) == os.getpid():
        raise KernelExit(code)
    _real_exit(code)


os._exit = _guarded_exit


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

    def decode(self, request, arrays, returned=None):
        """returned: where outputs the kernel returns go ({"out", "lse"} arrays
        the kernel never sees, so a thread of its that writes call.out after
        the call cannot reach them); None: into call.out and call.lse. Returns
        None, ("returned", "out" or "out lse") when it stored into `returned`,
        or (status, message) for a verdict."""
        if self.description.get("memory") == "device":
            arrays = device_tensors(request, arrays)
        call = worker.Call(request, arrays)
        outer = getattr(_calling, "pid", None)
        _calling.pid = os.getpid()
        try:
            worker.poison_scratch(self.fn, request)
            result = self.fn(call)
            stored = take_outputs(call, result, returned)
            if returned is not None and stored:
                return ("returned", " ".join(stored))
        except OutputError as e:
            return ("error", str(e))
        except KernelExit as e:
            return ("error", "the kernel called os._exit(%s): it would have ended pav's process, and the run "
                             "with it, without a verdict" % bounded(repr(e.code), 100))
        except Exception as e:  # the kernel's own failure: a verdict, with its traceback for people
            sys.stderr.write(bounded(traceback.format_exc()))
            return ("error", "%s: %s" % (type(e).__name__, e))  # pav bounds it where it enters (kernel_text)
        finally:
            _calling.pid = outer
        return None
