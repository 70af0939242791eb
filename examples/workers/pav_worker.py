# SPDX-License-Identifier: Apache-2.0
"""The worker helper the examples import as `pav_worker`: the pav package's
`pav.worker` (python/pav/worker.py), from an importable pav package, else
from this source tree. Importing this module gives that module itself."""
import os
import sys

try:
    from pav import worker
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from pav import worker

sys.modules[__name__] = worker
