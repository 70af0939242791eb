# SPDX-License-Identifier: Apache-2.0
"""What the PyTorch example workers share: a device that takes pav's inputs as
they are stored (bf16 raw bits viewed as torch.bfloat16, fp8 codes decoded
through a 256-entry table there) and the command line every torch worker
takes (--device, --defect, --list-defects).
"""
import sys

import torch

import pav_worker
from pav import inprocess  # importable once pav_worker has found the package


class Device:
    """pav's input arrays on one torch device."""

    def __init__(self, device):
        self.device = torch.device(device)
        self.tables = {}

    def table(self, flavour):
        """The float32 values of the 256 codes of an fp8 flavour, on the device."""
        if flavour not in self.tables:
            self.tables[flavour] = torch.from_numpy(pav_worker.fp8_table(flavour)).to(self.device)
        return self.tables[flavour]

    def tensor(self, a, dtype=None):
        """An input array on the device as stored (dtype "bf16": its raw bits as
        torch.bfloat16), strides kept: the span is copied and viewed there at
        the same strides (pav.inprocess.to_device). A torch tensor (pav's own
        device copy, in process) is taken as it is."""
        if a is None:
            return None
        if pav_worker.is_torch(a):
            return a.to(self.device)
        return inprocess.to_device(a, dtype, self.device)

    def page_table(self, call, c):
        """The call's page table on the device, into the namespace c: c.bt
        (the block table), or c.indices and c.indptr (CSR lists)."""
        if call.page_table == "block_table":
            c.bt = self.tensor(call.block_tables).long()
        else:
            c.indices = self.tensor(call.kv_indices).long()
            c.indptr = call.kv_indptr.tolist()

    def page_ids(self, call, c, s, pages):
        """The first `pages` page ids of sequence s, on the device (c from
        page_table())."""
        if call.page_table == "csr":
            return c.indices[c.indptr[s]:c.indptr[s] + pages]
        return c.bt[s, :pages]

    def widen(self, x, dtype):
        """Cache elements as stored -> float32 (fp8 codes through the table)."""
        if dtype in pav_worker.FP8_DTYPES:
            return self.table(dtype)[x.long()]
        return x.float()


def serve(prog, defects, description, kernel_of):
    """Parses the command line, checks the device can run, and serves the
    kernel kernel_of(device, defect) under `description` (its version names
    torch's and the device, and the defect when one is on)."""
    parser = pav_worker.defect_parser(prog, defects)
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1, ... (default cpu)")
    opts = parser.parse_args()
    if opts.list_defects:
        pav_worker.list_defects(defects)
        return
    try:  # a device that cannot run stops the worker before it describes itself
        torch.zeros(1, device=opts.device)
    except (AssertionError, RuntimeError) as e:
        sys.exit("%s: --device %s cannot be used: %s" % (prog, opts.device, e))
    kernel = kernel_of(opts.device, opts.defect)
    desc = dict(description)
    desc["version"] = "%s torch %s %s" % (description.get("version", "1.0"), torch.__version__, opts.device)
    if opts.defect:
        desc["version"] += " +defect." + opts.defect
    pav_worker.serve(pav_worker.Kernel(desc, kernel.decode))
