# SPDX-License-Identifier: Apache-2.0
"""pav.lifecycle: verify an engine's attention backend, not only its kernel.

pav owns the KV pool (NaN outside live contexts), the requests and their true
live lengths and page tables; it draws step sequences from a state machine
(a capture ladder, replays at new lengths, draft loops, dummy runs between
prepare and execute, micro-batches, eager and above-ladder batches, a q_len
never captured) and checks every attention output against an fp64 reference
over the true live state of that step, plus what outputs cannot show (a
graph's buffers moved, a plan minted or a kernel compiled outside capture, the
plan cache's bound, the route captured against the route replayed, a shape
never captured replaying a graph, scratch poisoned between steps). A failing
sequence shrinks, saves as a versioned JSON file and replays through a fresh
engine. Pure Python and NumPy; torch only for real CUDA graphs.

    from pav import lifecycle
    seed, steps, out = lifecycle.explore(make_engine, seed=1, n_steps=80, rounds=20)

docs/verify-your-engine.md has the adapter and the checks.
"""
from pav.lifecycle.adapter import (  # noqa: F401
    Adapter,
    DraftBatch,
    EmulatedGraphs,
    Finding,
    Graph,
    Hooks,
    StepBatch,
    TorchGraphs,
    data_ptr,
    poison,
)
from pav.lifecycle.run import OPS, Outcome, draw, explore, ladder_of, probe, run  # noqa: F401
from pav.lifecycle.seqfile import FORMAT, VERSION, SequenceError, load, replay, save, validate  # noqa: F401
from pav.lifecycle.shrink import shrink  # noqa: F401
from pav.lifecycle.world import PRECISIONS, KVPool, Shape, World, reference, representable  # noqa: F401
