# SPDX-License-Identifier: Apache-2.0
"""pav's runs as Python functions. Each calls pav's session API in this
process (the same functions `pav verify`, `pav fuzz`, `pav replay` and `pav
compare` call), with Python kernels registered as in-process kernels under
test, and returns a Report holding the run's JSON report. pav's refusals and
failures to run are raised with their reason."""
import inspect
import itertools
import json
import os
import shlex
import sys

from pav import worker

_keys = itertools.count()


class UsageError(ValueError):
    """pav refused the request (exit 2): a bad option, description or case file;
    the message says which and why."""


class CannotRun(RuntimeError):
    """pav could not run (exit 3): an I/O error, no device, a case it could not
    save; the message says why."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM stopped the run; `report` is what ran."""

    def __init__(self, report):
        super().__init__("pav %s stopped by a signal: %s" % (report.get("command", ""), report.get("verdict", "")))
        self.report = report


def _extension():
    try:
        from pav import _pav
    except ImportError as e:
        raise ImportError(_extension_missing(e)) from None
    return _pav


def _extension_missing(error):
    """Why pav._pav did not import, and the fix: not built, or built for another Python."""
    import sysconfig
    here = os.path.dirname(os.path.abspath(__file__))
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    this = "Python %d.%d at %s" % (sys.version_info[0], sys.version_info[1], sys.executable)
    reinstall = ("reinstall pav with this interpreter (`%s -m pip install --no-build-isolation .` in pav's "
                 "source folder)" % sys.executable)
    built = sorted(f for f in os.listdir(here) if f.startswith("_pav.") and f.endswith(".so"))
    if built and "_pav" + suffix not in built:
        return ("pav's extension in %s (%s) was built for another Python; this is %s, which loads _pav%s: %s, "
                "or configure the build tree with -DPython3_EXECUTABLE=%s" % (
                    here, ", ".join(built), this, suffix, reinstall, sys.executable))
    if built:
        return "pav's extension %s/_pav%s does not load into %s: %s; %s" % (here, suffix, this, error, reinstall)
    return ("pav's extension (pav._pav) is not built or not on the path: install pav with pip (docs/python.md, "
            "\"Install\"), or build the project (cmake --build --preset cpu) and put build/cpu/python on "
            "PYTHONPATH: %s" % error)


def version():
    """'pav VERSION (commit ...)', as `pav --version` prints it."""
    return _extension().version()


class Description:
    """A kernel's description: the worker protocol's fields (docs/verify-your-kernel.md,
    "The description"), starting from the worker helper's defaults (host memory,
    bf16 and f16 q, lse written, a check entry, numerics profile none).
    pav checks it as it checks a worker's: a field it does not know, a value
    out of range or a broken rule raises UsageError naming the field.

        Description("my_decode", cache_dtypes=["bf16"], block_sizes=[16], head_dims=[128], gqa_ratios=[1, 8])
    """

    def __init__(self, name=None, **fields):
        if isinstance(name, Description):
            name = name.fields
        if isinstance(name, dict):
            fields = dict(name, **fields)
            name = fields.pop("name", None)
        if not name:
            raise UsageError("description: a name is needed")
        self.fields = worker.description(name, **fields)
        self.canonical = _canonical(self.fields)

    def __getattr__(self, field):
        fields = self.__dict__.get("fields", {})
        if field in fields:
            return fields[field]
        raise AttributeError(field)

    def __repr__(self):
        return "Description(%s)" % json.dumps(self.fields)


def _canonical(fields):
    """The description as pav reads it (its checks applied), without registering a kernel."""
    try:
        return json.loads(_extension().check_description(json.dumps(fields)))
    except ValueError as e:
        raise UsageError(str(e)) from None


class Kernel:
    """A Python decode as a kernel under test: fn(call) with its description.

    check: True (the default) refuses calls outside the description with the
    worker helper's check (pav.worker.check_call), as the example workers do;
    False declares no check entry; a callable check(request) -> None or a
    reason is the kernel's own. replay_spec: the --kernel text that runs the
    same kernel as a worker, recorded in saved cases so `pav replay` reruns
    them from the command line; by default, for a function at the top level
    of a file, `exec:python3 .../pav/serve.py FILE:NAME --description ...`.
    """

    def __init__(self, fn, description, check=True, replay_spec=None):
        if not callable(fn):
            raise UsageError("kernel: %r is not callable" % (fn,))
        d = Description(description, check=check is not False)
        if d.fields.get("memory", "host") == "device":
            why = _extension().device_memory_unavailable()
            if why:
                raise CannotRun("kernel %s works on device memory: %s" % (d.fields["name"], why))
        self.fn, self.description, self.check = fn, d, check
        self.replay_spec = replay_spec if replay_spec is not None else serve_spec(fn, d.fields)


def serve_spec(fn, fields):
    """`exec:` text that runs fn as a worker (pav.serve), or a `python:` name
    when fn cannot be found again from its file (a lambda, a closure, a bound
    method): a case saved then replays only from Python."""
    qual = getattr(fn, "__qualname__", "")
    module = inspect.getmodule(fn)
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    target = module
    for part in qual.split("."):
        target = getattr(target, part, None)
    if not path or not qual or "<" in qual or target is not fn:
        return "python:%s.%s" % (getattr(module, "__name__", "?"), qual or repr(fn))
    serve = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve.py")
    words = [sys.executable, serve, "%s:%s" % (os.path.abspath(path), qual), "--description",
             json.dumps(fields, separators=(",", ":"))]
    return "exec:" + " ".join(shlex.quote(w) for w in words)


class Report(dict):
    """A run's JSON report (the fields of `pav CMD --json`), with the fields
    every report has as typed attributes and the saved cases' paths at hand."""

    def __init__(self, data, exit_code):
        super().__init__(data)
        self.exit_code: int = int(exit_code)

    @property
    def command(self) -> str:
        """verify, fuzz, replay, compare or drift."""
        return str(self.get("command", ""))

    @property
    def verdict(self) -> str:
        """The run's verdict: PASS, FAIL, STOPPED (not a pass), ... ("" where the report has none)."""
        return str(self.get("verdict", ""))

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and bool(self.get("passed", True))

    @property
    def interrupted(self) -> bool:
        """A signal stopped the run before its budget was spent."""
        return bool(self.get("interrupted", False))

    def __getattr__(self, field):
        if field in self:
            return self[field]
        raise AttributeError(field)

    def saved_cases(self):
        """Paths of the counterexamples this run saved."""
        paths = []
        for run in _runs(self):
            failure = run.get("failure") or {}
            if failure.get("saved"):
                paths.append(failure["saved"])
        return paths

    def failure_text(self):
        """pav's verdict in a few lines: each failure, its seed and where its case is saved."""
        lines = ["pav %s: %s" % (self.get("command", ""), self.get("verdict", "exit %d" % self.exit_code))]
        for check in self.get("checks", []):
            if check.get("first_failure"):
                lines.append("  %s: %s" % (check["name"], check["first_failure"]))
        for run in self.get("runs", []):
            f = run.get("failure")
            if f:
                lines.append("  %s: seed %s: %s%s" % (run.get("property"), f.get("seed"), f.get("message"),
                                                      " (saved %s)" % f["saved"] if f.get("saved") else ""))
        for case in self.get("cases", []):
            if not case.get("passed", True):
                lines.append("  %s: %s" % (case.get("case"), case.get("verdict") or "FAIL"))
        return "\n".join(lines)


def _runs(report):
    for check in report.get("checks", []):
        detail = check.get("detail") or {}
        if isinstance(detail, dict) and "property" in detail:
            yield detail
    yield from report.get("runs", [])


class _Registered:
    """Kernels registered for one command; unregistered when it ends."""

    def __init__(self):
        self.keys = []

    def spec(self, kernel, description):
        """--kernel text for a Kernel, a callable with its description, or a spec string."""
        if isinstance(kernel, str):
            if description is not None:
                raise UsageError("a description is for a Python kernel, not for --kernel %s" % kernel)
            return kernel
        if not isinstance(kernel, Kernel):
            if description is None:
                raise UsageError("a Python kernel needs its description (pav.Description or a dict)")
            kernel = Kernel(kernel, description)
        elif description is not None:
            raise UsageError("the pav.Kernel has its description already")
        from pav.inprocess import Runner
        key = "py%d" % next(_keys)
        check = kernel.check if callable(kernel.check) else None
        runner = Runner(kernel.fn, kernel.description.fields, check)
        _extension().register_kernel(key, runner, json.dumps(kernel.description.fields), kernel.replay_spec)
        self.keys.append(key)
        return "inproc:" + key

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for key in self.keys:
            _extension().unregister_kernel(key)


def _run(run, options, quiet=True):
    """Runs one of pav's runs (verify, fuzz, replay, compare, drift) here,
    through the session API: the Report, or the error it stands for, raised
    with pav's reason."""
    ext = _extension()
    sys.stdout.flush()
    sys.stderr.flush()
    options = {k: v for k, v in options.items() if v is not None}
    try:
        rc, text, stopped = ext.session(run, options, quiet)
    except ext.BadInput as e:
        raise UsageError("pav %s: %s" % (run, e)) from None
    except ext.CannotRun as e:
        raise CannotRun("pav %s: %s" % (run, e)) from None
    report = Report(json.loads(text) if text != "null" else {}, rc)
    if stopped:
        raise Interrupted(report)
    if rc not in (0, 1):
        raise CannotRun("pav %s could not finish (exit %d): %s" % (run, rc, report.get("verdict", "no verdict")))
    return report


def verify(kernel, description=None, checks=None, cases=None, seed=None, save_dir=None, reject_cases=None,
           stale_cases=None, seconds=None, quick=False, shapes=None, timeout=None, quiet=True):
    """`pav verify --kernel`: the decode check on generated calls the kernel
    claims, the reject check (with a check entry), the stale-plan check (for a
    kernel that runs pav's plan) and the quick drift sweep. checks: a list of
    those names; cases: a fixed number of decode calls (default: a search of
    `seconds`, 40 unless given); quick: the pre-commit run (64 decode calls,
    fewer reject and stale ones; a count also given keeps its own); shapes:
    the decode calls in that many shapes (`--shapes`; default 8 for a kernel
    whose description says compiles_per_shape, else 0: each call its own);
    timeout: seconds a call of the kernel may take (`--timeout`, default 60)
    before pav interrupts it and the call is a verdict. The first failure is
    shrunk and saved under save_dir (default ./counterexamples)."""
    with _Registered() as reg:
        return _run("verify", {"kernel": [reg.spec(kernel, description)], "checks": _names(checks),
                               "decode_cases": cases, "reject_cases": reject_cases, "stale_cases": stale_cases,
                               "decode_seconds": seconds, "quick": quick, "shapes": shapes, "seed": seed,
                               "save_dir": _path(save_dir), "timeout": timeout},
                    quiet)


def fuzz(kernel, description=None, cases=None, seconds=None, seed=None, properties=None, jobs=1, save_dir=None,
         keep_going=False, regions=False, shapes=0, shape_seed=None, timeout=None, quiet=True):
    """`pav fuzz --kernel`: the kernel's properties under a case budget
    (cases per property) or a time budget (seconds, all properties together);
    the first failure is shrunk and saved under save_dir. regions=True draws
    half the decode calls from the regions where decode bugs sit, as
    pav.verify does (`--regions`); shapes=N draws every decode call in one of
    N shapes drawn from shape_seed (default: seed), for a kernel that compiles
    per shape (`--shapes`, `--shape-seed`); timeout: seconds per call, as
    for pav.verify."""
    if (cases is None) == (seconds is None):
        raise UsageError("fuzz: give cases or seconds (one of them)")
    with _Registered() as reg:
        return _run("fuzz", {"kernel": [reg.spec(kernel, description)], "jobs": jobs,
                             "cases": cases if cases is not None else 0,
                             "minutes": seconds / 60.0 if seconds is not None else 0,
                             "properties": _names(properties), "keep_going": keep_going, "regions": regions,
                             "shapes": shapes, "shape_seed": shape_seed, "seed": seed, "save_dir": _path(save_dir),
                             "timeout": timeout}, quiet)


def replay(case, kernel, description=None, timeout=None):
    """`pav replay --kernel`: saved case files (a path or a list of paths)
    through the kernel and the reference, each with its verdict; timeout:
    seconds per call, as for pav.verify."""
    cases = [case] if isinstance(case, (str, os.PathLike)) else list(case)
    if not cases:
        raise UsageError("replay: no case file")
    with _Registered() as reg:
        return _run("replay", {"kernel": [reg.spec(kernel, description)], "files": [os.fspath(c) for c in cases],
                                "timeout": timeout})


def compare(kernel_a, kernel_b, description_a=None, description_b=None, cases=None, seed=None, out_dir=None,
            alpha=None, gate=False, timeout=None, quiet=True):
    """`pav compare`: two kernels on identical generated cases, per-case
    verdicts (compare-a.jsonl, compare-b.jsonl under out_dir) and McNemar's
    paired test; timeout: seconds per call, as for pav.verify."""
    with _Registered() as reg:
        return _run("compare", {"kernel": [reg.spec(kernel_a, description_a), reg.spec(kernel_b, description_b)],
                                "cases": cases, "seed": seed, "out_dir": _path(out_dir), "alpha": alpha,
                                "gate": gate, "timeout": timeout}, quiet)


def drift(kernel=None, description=None, sweep=None, cells=None, max_context=None, seeds=None, backend=None,
          timeout=None, quiet=True):
    """`pav drift`: does the decode error grow with the split ceiling? The
    sweep file (default: the built-in quick sweep) through the kernel, or
    through pav's own kernels when none is given; cells: names or indices;
    timeout: seconds per call, as for pav.verify."""
    with _Registered() as reg:
        options = {"sweep": _path(sweep), "max_context": max_context, "seeds": seeds, "backend": backend,
                   "cells": ",".join(_names(cells)) if cells is not None else None, "timeout": timeout}
        if kernel is not None:
            options["kernel"] = [reg.spec(kernel, description)]
        return _run("drift", options, quiet)


def _names(names):
    """A list of names (checks, properties) as the session takes it; a string is one name."""
    if names is None:
        return None
    if isinstance(names, str):
        return [names]
    return [str(n) for n in names]


def _path(path):
    return None if path is None else os.fspath(path)
