# SPDX-License-Identifier: Apache-2.0
"""The reference engine's backend wrapped for pav.lifecycle: each adapter
method is one call into the backend, as it would be for an engine's own."""
from pav.lifecycle import Adapter

from engine_backend import Backend


class ReferenceEngine(Adapter):
    def __init__(self, hooks, pool, shape, **options):
        self.backend = Backend(hooks, pool, shape, **options)

    def ladder(self):
        b = self.backend
        return [(bs, q) for q in b.ladder_q_lens for bs in b.ladder_sizes]

    def capture(self, batch_size, q_len):
        self.backend.capture(batch_size, q_len)

    def prepare(self, batch):
        return self.backend.init_forward_metadata(batch)

    def execute(self, handle):
        return self.backend.forward(handle)

    def draft(self, batch):
        return self.backend.draft_forward(batch)

    def dummy(self, batch_size, q_len):
        self.backend.dummy_forward(batch_size, q_len)

    def micro_batches(self, batches):
        return self.backend.two_micro_batches(batches)

    def live_buffers(self):
        b = self.backend
        return {"workspace": b.workspace[0]}

    def scratch(self):
        b = self.backend
        return {"workspace0": b.workspace[0], "workspace1": b.workspace[1], "graph.out": b.graph_bufs.out}

    def plan_cache_bound(self):
        b = self.backend
        return 2 * len(b.ladder_sizes)

    def describe(self):
        return {"adapter": "examples/engine ReferenceEngine", "defect": self.backend.defect}


def torch_setup(device):
    """The torch kernel on `device` and the graphs that go with it: real CUDA graphs
    (torch.cuda.graph) on a CUDA device, graph semantics emulated elsewhere, pav's KV
    pool on that device. Returns (factory options, graphs)."""
    from pav import lifecycle
    from engine_kernel_torch import TorchKernel
    graphs = lifecycle.TorchGraphs(device) if device.startswith("cuda") else \
        lifecycle.EmulatedGraphs(pool_device=device)
    return {"kernel": TorchKernel(device)}, graphs


def factory(defect=None, **options):
    """What pav.lifecycle.run wants: (hooks, pool, shape) -> a fresh adapter."""
    return lambda hooks, pool, shape: ReferenceEngine(hooks, pool, shape, defect=defect, **options)
