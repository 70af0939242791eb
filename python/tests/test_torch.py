# SPDX-License-Identifier: Apache-2.0
"""Torch tensors in and out of an in-process kernel (registered only where
PyTorch imports): pav's arrays as torch views without a copy, bf16 outputs
taken as they are, a tensor on another device or of another dtype a verdict
with its case saved and replayed from the command line."""
import json
import os
import subprocess

import numpy as np
import pytest
import torch

import pav
from test_inprocess import DESCRIPTION, GOOD, PAV

BF16 = pav.Description(DESCRIPTION, q_dtypes=["bf16"])


def torch_bf16_out(call):
    q = call.torch("q")
    assert q.dtype == torch.bfloat16 and q.data_ptr() == call.raw["q"][0].ctypes.data  # a view, not a copy
    out, lse = GOOD.decode(call)
    return torch.from_numpy(np.ascontiguousarray(out)).to(torch.bfloat16), torch.from_numpy(lse)


def torch_out_in_place(call):
    out, lse = GOOD.decode(call)
    call.torch("out").copy_(torch.from_numpy(np.ascontiguousarray(out)))
    call.torch("lse").copy_(torch.from_numpy(lse))


def torch_on_meta(call):
    out, lse = GOOD.decode(call)
    return torch.empty(out.shape, dtype=torch.float32, device="meta"), lse


def torch_f16_for_bf16(call):
    out, lse = GOOD.decode(call)
    return torch.from_numpy(np.ascontiguousarray(out)).to(torch.float16), lse


@pytest.mark.parametrize("fn", [torch_bf16_out, torch_out_in_place])
def test_torch_outputs_pass(tmp_path, fn):
    report = pav.verify(fn, BF16, checks=["decode"], cases=6, seed=4, save_dir=str(tmp_path))
    assert report.passed, report.failure_text()


@pytest.mark.parametrize("fn, words", [(torch_on_meta, "out is on meta"),
                                       (torch_f16_for_bf16, "out has dtype float16; the call's out is bf16")])
def test_a_torch_output_pav_cannot_take_is_a_verdict(tmp_path, fn, words):
    report = pav.verify(fn, BF16, checks=["decode"], cases=6, seed=4, save_dir=str(tmp_path))
    assert not report.passed and words in report.failure_text()
    [case] = report.saved_cases()
    cli = subprocess.run([PAV, "replay", case, "--trust-case-kernel", "--json"], capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 1 and words in json.loads(cli.stdout)["cases"][0]["verdict"]


def test_a_large_input_with_holes_goes_to_the_device_without_reading_them(tmp_path):
    # A combined bf16 cache [pages, 2, 512 Ki elements] of 96 pages (192 MiB),
    # data in pages 3 and 70 and holes elsewhere: each half's device copy is
    # the copy of its dense bytes, and the holes are still holes after it (a
    # read through the mapping fills them, at the cost of a dense copy).
    from pav import inprocess, worker
    from test_worker_files import MIB, sparse_npy
    folder = "/dev/shm" if os.access("/dev/shm", os.W_OK) else str(tmp_path)
    path = sparse_npy(os.path.join(folder, "pav-test-kv-%d.npy" % os.getpid()), (96, 2, MIB // 2), np.uint16,
                      [3 * 2 * MIB, 70 * 2 * MIB])
    try:
        kv = worker.map_input(path)
        dense = np.load(path, allow_pickle=False)  # read, not mapped
        for half in (0, 1):
            t = inprocess.to_device(kv[:, half], "bf16", "cpu")
            want = torch.from_numpy(np.ascontiguousarray(dense[:, half]).view(np.int16)).view(torch.bfloat16)
            assert t.dtype == torch.bfloat16 and t.shape == want.shape and t.stride() == (MIB, 1)
            assert torch.equal(t.view(torch.int16), want.view(torch.int16))
            assert worker.data_extents(kv[:, half]) is not None  # the holes were not read
    finally:
        os.unlink(path)
