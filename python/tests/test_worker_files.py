# SPDX-License-Identifier: Apache-2.0
"""A worker's large input files with holes (pav leaves a large cache's chunks of
zeros as holes): data_extents() names the ranges that hold data, and those
ranges copied onto zeros are the span's bytes, for the whole file and for
strided views into it; a small file, an array not mapped from a file and a
span without holes are copied whole (None)."""
import os
import tempfile

import numpy as np
import pytest

from pav import worker

MIB = 1 << 20


@pytest.fixture
def folder():
    # tmpfs where there is one (pav's files usually are there), holes either way.
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=base) as d:
        yield d


def sparse_npy(path, shape, dtype, data_at):
    """An .npy file of zeros left as holes but for 2 MiB of random bytes at each
    byte offset (of the array's data) in data_at."""
    rng = np.random.default_rng(7)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                                 "shape": shape})
        header = f.tell()
        f.truncate(header + int(np.prod(shape)) * np.dtype(dtype).itemsize)
        for at in data_at:
            f.seek(header + at)
            f.write(rng.integers(0, 256, 2 * MIB, dtype=np.uint8).tobytes())
    return path


def rebuilt(a):
    """a's span rebuilt from data_extents: zeros and the data ranges; and the
    bytes read."""
    span, extents = worker.data_extents(a)
    out = np.zeros(span.shape[0], dtype=np.uint8)
    for lo, hi in extents:
        out[lo:hi] = span[lo:hi]
    return out, sum(hi - lo for lo, hi in extents)


def dense_span(path, view=lambda x: x):
    """The span's bytes of view(the file's array), read (not mapped: a read
    through the mapping would fill the holes)."""
    a = view(np.load(path, allow_pickle=False))
    n = 1 + sum((k - 1) * (st // a.itemsize) for k, st in zip(a.shape, a.strides))
    flat = np.lib.stride_tricks.as_strided(a, (n,), (a.itemsize,), writeable=False)
    return np.array(flat).view(np.uint8)


def test_the_data_ranges_rebuild_the_file_and_skip_its_holes(folder):
    n = 96 * MIB
    # The middle range starts 64 bytes before a page of the array's data, so
    # in the file (after the .npy header) its first bytes share a page with
    # the hole before them.
    path = sparse_npy(os.path.join(folder, "k.npy"), (n // 2,), np.uint16, [0, 40 * MIB - 64, n - 2 * MIB])
    a = worker.map_input(path)
    bytes_, read = rebuilt(a)
    assert np.array_equal(bytes_, dense_span(path))
    assert bytes_[:2 * MIB].any() and bytes_[40 * MIB - 64:40 * MIB].any() and bytes_[-2 * MIB:].any()
    assert read < n // 4  # the holes are not read


def test_strided_views_into_the_file_rebuild_their_own_span(folder):
    # A combined cache [pages, 2, page bytes]: its K and V halves are views
    # starting at different places; data in pages 3 and 70 of 96.
    page = MIB
    path = sparse_npy(os.path.join(folder, "kv.npy"), (96, 2, page), np.uint8, [3 * 2 * page, 70 * 2 * page])
    kv = worker.map_input(path)
    for view in (lambda x: x[:, 0], lambda x: x[:, 1], lambda x: x[10:, 1], lambda x: x[:80, 0, 16:]):
        bytes_, read = rebuilt(view(kv))
        assert np.array_equal(bytes_, dense_span(path, view))
        assert bytes_.any() and read < bytes_.shape[0] // 4


@pytest.mark.parametrize("case", ["small file", "not mapped", "no hole", "no data"])
def test_without_holes_to_skip_the_span_is_copied_whole(folder, case):
    if case == "small file":
        a = worker.map_input(sparse_npy(os.path.join(folder, "s.npy"), (4 * MIB,), np.uint8, [0]))
        assert worker.data_extents(a) is None
    elif case == "not mapped":
        assert worker.data_extents(np.zeros(80 * MIB, dtype=np.uint8)) is None
    elif case == "no hole":
        path = os.path.join(folder, "d.npy")
        np.save(path, np.ones(70 * MIB, dtype=np.uint8))
        assert worker.data_extents(worker.map_input(path)) is None
    else:
        # all holes: no range to copy, the span reads zero
        a = worker.map_input(sparse_npy(os.path.join(folder, "z.npy"), (70 * MIB,), np.uint8, []))
        span, extents = worker.data_extents(a[MIB:])
        assert extents == [] and span.shape[0] == 69 * MIB
