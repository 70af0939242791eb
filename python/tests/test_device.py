# SPDX-License-Identifier: Apache-2.0
"""A kernel of device memory in pav's process (a GPU build of the module, a
CUDA device, PyTorch with CUDA): the call's tensors are torch tensors on the
device over pav's device copies (DLPack), out written in place reaches pav,
and each fault is a verdict with its case saved and replayed from Python and
from the command line (pav.serve puts the tensors on the device) with the
same verdict. Registered as the CTest python_device_tests, labelled gpu."""
import json
import os
import subprocess
import sys

import pytest
import torch

import pav
from test_inprocess import PAV, SOURCE

sys.path.insert(0, os.path.join(SOURCE, "examples", "workers"))
import torch_decode  # noqa: E402

# Not skipped where it cannot run: a gpu-labelled test that cannot reach a
# device fails, so a runner without one is not a pass.
assert torch.cuda.is_available(), "test_device: torch sees no CUDA device"
assert not pav.api._extension().device_memory_unavailable(), pav.api._extension().device_memory_unavailable()

DEVICE = torch.device("cuda", torch.cuda.current_device())
GOOD = torch_decode.TorchDecode(DEVICE)
BAD = torch_decode.TorchDecode(DEVICE, defect="no-max-subtract")
ON_DEVICE = pav.Description(torch_decode.DESCRIPTION, memory="device")
SEEN = {}


def good(call):
    return GOOD.decode(call)


def inputs_on_the_device(call):
    q, k = call.torch("q"), call.torch("k_cache") if call.kv_cache is None else call.torch("kv_cache")
    SEEN["q"] = (q.device, q.dtype, call.q_dtype)
    SEEN["cache"] = (k.device, str(k.dtype), call.cache_dtype)
    return GOOD.decode(call)


def in_place(call):
    out, lse = GOOD.decode(call)
    call.out.copy_(out)  # pav's own device output: what is written here is what pav reads back
    if call.want_lse:
        call.lse.copy_(lse)


def on_the_host(call):
    out, lse = GOOD.decode(call)
    return out.cpu(), lse


def float64(call):
    out, lse = GOOD.decode(call)
    return out.double(), lse


def not_contiguous(call):
    out, lse = GOOD.decode(call)
    return out.transpose(0, 1).contiguous().transpose(0, 1), lse


def unwritten(call):
    return None


def raises(call):
    raise RuntimeError("the kernel gave up")


def defect(call):
    return BAD.decode(call)


def test_the_inputs_are_device_tensors_in_their_own_dtypes():
    report = pav.verify(inputs_on_the_device, ON_DEVICE, checks=["decode"], cases=4, seed=11)
    assert report.passed, report.failure_text()
    q_device, q_dtype, q_name = SEEN["q"]
    assert q_device == DEVICE and q_dtype == {"f32": torch.float32, "f16": torch.float16,
                                              "bf16": torch.bfloat16}[q_name]
    cache_device, _, _ = SEEN["cache"]
    assert cache_device == DEVICE


@pytest.mark.parametrize("fn", [good, in_place])
def test_a_correct_device_kernel_passes(tmp_path, fn):
    report = pav.verify(fn, ON_DEVICE, checks=["decode"], cases=12, seed=5, save_dir=str(tmp_path))
    assert report.passed, report.failure_text()


@pytest.mark.parametrize("fn, words", [
    (on_the_host, "out is on cpu; pav's outputs are on cuda"),
    (float64, "out has dtype float64"),
    (not_contiguous, "out is not contiguous"),
    (unwritten, ""),
    (raises, "RuntimeError: the kernel gave up"),
    (defect, ""),
])
def test_a_device_kernels_fault_is_a_verdict_replayed_from_python_and_the_command_line(tmp_path, fn, words):
    report = pav.verify(fn, ON_DEVICE, checks=["decode"], cases=12, seed=5, save_dir=str(tmp_path))
    assert not report.passed and words in report.failure_text(), report.failure_text()
    [case] = report.saved_cases()
    assert json.load(open(case))["meta"]["kernel"]["spec"].startswith("exec:")
    again = pav.replay(case, fn, ON_DEVICE)
    assert not again.passed and words in again.failure_text(), again.failure_text()
    cli = subprocess.run([PAV, "replay", case, "--trust-case-kernel", "--json"], capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert words in json.loads(cli.stdout)["cases"][0]["verdict"]
