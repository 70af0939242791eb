# SPDX-License-Identifier: Apache-2.0
"""Hostile case files that record a kernel under test (meta.kernel): a case file
from someone else's CI must never load a library or run a command on its own,
and a case found through a foreign kernel must never replay on pav's own
kernels in its place.

Where a refused kernel would have run, its command hangs (sleep): a replay that
ran it shows as a timeout, not as a pass. Each class runs through both replay
commands (pav replay, pav fuzz --replay), which share one path.
"""
import copy

from corpus import BASE_CASE, dumps

HANG = 600  # seconds a command that must not run would sleep
REPLAYS = {"replay": ["replay"], "fuzz": ["fuzz", "--replay"]}


def _case(meta):
    doc = copy.deepcopy(BASE_CASE)
    doc["meta"] = meta
    return doc


def add_cases(corpus):
    def both(name, meta, expect, mentions, extra=()):
        p = corpus.write("kernel-cases/" + name + ".json", dumps(_case(meta)))
        for cmd, words in REPLAYS.items():
            corpus.add(f"kernel-cases.{name}.{cmd}", words + [p, "--backend", "cpu"] + list(extra), expect,
                       mentions)

    marker = corpus.path("kernel-cases/ran-marker")
    # A command that would leave a marker and then hang: refused untrusted.
    exec_spec = f"exec:touch '{marker}'; sleep {HANG}"
    exec_meta = {"property": "decode",
                 "kernel": {"name": "w", "version": "1", "adapter": "exec", "spec": exec_spec,
                            "isolate": False, "timeout_seconds": 86400, "cwd": corpus.path("kernel-cases")}}
    both("exec-untrusted", exec_meta, "reject", ["meta.kernel.spec", "--kernel SPEC", "--trust-case-kernel"])
    # --kernel names the kernel: the recorded command is not run (it would hang).
    both("exec-with-kernel-named", exec_meta, "ok", [], extra=("--kernel", "pav:cpu"))

    lib_spec = "lib:/nonexistent/libevil.so --defect x"
    both("lib-untrusted", {"property": "decode", "kernel": {"adapter": "lib", "spec": lib_spec}}, "reject",
         ["meta.kernel.spec", "libevil.so", "--trust-case-kernel"])
    # A case found under --isolate, before and since meta.kernel.isolate.
    both("lib-isolated-untrusted",
         {"property": "decode", "kernel": {"adapter": "lib (isolated)", "spec": lib_spec, "isolate": True}},
         "reject", ["meta.kernel.spec", "--trust-case-kernel"])
    both("lib-isolated-old-untrusted",
         {"property": "decode", "kernel": {"adapter": "lib (isolated)", "spec": lib_spec}},
         "reject", ["meta.kernel.spec", "--trust-case-kernel"])
    # Isolation of an exec: kernel is a contradiction: refused before it starts.
    hang_spec = f"exec:sleep {HANG}"
    both("exec-isolated-trusted",
         {"property": "decode", "kernel": {"adapter": "lib (isolated)", "spec": hang_spec, "isolate": True}},
         "reject", ["meta.kernel", "--isolate"], extra=("--trust-case-kernel",))
    # A recorded folder that does not exist here: refused, never run elsewhere.
    both("exec-cwd-missing-trusted",
         {"property": "decode", "kernel": {"adapter": "exec", "spec": hang_spec, "cwd": "/nonexistent/pav-found-here"}},
         "reject", ["meta.kernel.cwd"], extra=("--trust-case-kernel",))

    # A malformed meta.kernel is refused by name, not read as "no kernel"
    # (which would replay on pav's own kernels).
    malformed = [
        ("not-object", ["exec:x"], "meta.kernel"),
        ("no-spec", {"adapter": "lib"}, "meta.kernel.spec"),
        ("spec-number", {"spec": 5}, "meta.kernel.spec"),
        ("spec-unknown-scheme", {"spec": "ftp://example/k.so"}, "meta.kernel.spec"),
        ("adapter-number", {"spec": "pav:cpu", "adapter": 1}, "meta.kernel.adapter"),
        ("isolate-string", {"spec": lib_spec, "isolate": "yes"}, "meta.kernel.isolate"),
        ("timeout-zero", {"spec": "pav:cpu", "timeout_seconds": 0}, "meta.kernel.timeout_seconds"),
        ("timeout-huge", {"spec": "pav:cpu", "timeout_seconds": 1e300}, "meta.kernel.timeout_seconds"),
        ("timeout-string", {"spec": "pav:cpu", "timeout_seconds": "60"}, "meta.kernel.timeout_seconds"),
        ("cwd-relative", {"spec": "pav:cpu", "cwd": "build"}, "meta.kernel.cwd"),
        ("cwd-number", {"spec": "pav:cpu", "cwd": 3}, "meta.kernel.cwd"),
    ]
    for label, kernel, field in malformed:
        both(f"malformed.{label}", {"property": "decode", "kernel": kernel}, "reject", [field])

    # pav's own kernel recorded: it just opens, no trust needed.
    both("pav-kernel", {"property": "decode", "kernel": {"adapter": "pav", "spec": "pav:cpu"}}, "ok", [])
