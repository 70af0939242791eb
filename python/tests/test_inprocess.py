# SPDX-License-Identifier: Apache-2.0
"""pav's Python module: a Python kernel's faults are verdicts with their case
saved, replayed from Python and from the command line with the same verdict;
a clean stop; descriptions checked as pav checks a worker's; reports with the
command line's fields."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pav

SOURCE = os.environ.get("PAV_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PAV = os.environ.get("PAV_BINARY", "pav")
# A child process (pav's command line, a Python script, a nested pytest) takes
# a few seconds. Its limit is well under the 600 s CTest gives the whole of
# python_tests, so a child that hangs fails its own test with what it printed
# and the other tests still run and report, instead of CTest killing the lot
# with nothing said.
CHILD_TIMEOUT_S = 60
sys.path.insert(0, os.path.join(SOURCE, "examples", "workers"))
import numpy_decode  # noqa: E402

GOOD = numpy_decode.NumpyDecode()
DESCRIPTION = pav.Description(numpy_decode.DESCRIPTION)


# ---- kernels, each at the top level so a saved case replays through pav.serve

def decode_ok(call):
    return GOOD.decode(call)


def decode_in_place(call):
    out, lse = GOOD.decode(call)
    call.out[...] = pav.worker.narrow(np.asarray(out, dtype=np.float32), call.out_dtype)
    if call.want_lse:
        call.lse[...] = lse


def raises(call):
    raise ValueError("the kernel gave up")


def wrong_shape(call):
    out, lse = GOOD.decode(call)
    return out.reshape(out.shape[0], -1), lse


def wrong_dtype(call):
    out, lse = GOOD.decode(call)
    return out.astype(np.float64), lse


def not_contiguous(call):
    out, lse = GOOD.decode(call)
    wide = np.zeros(out.shape + (2,), dtype=np.float32)
    wide[..., 0] = out
    return wide[..., 0], lse


def writes_input(call):
    call.k_cache[...] = 0
    return GOOD.decode(call)


def nan_out(call):
    out, lse = GOOD.decode(call)
    out = np.array(out, dtype=np.float32)
    out.flat[0] = np.nan
    return out, lse


def writes_nothing(call):
    return None


def gqa_interleaved(call):
    return BAD_GQA.decode(call)


BAD_GQA = numpy_decode.NumpyDecode(defect="gqa-interleaved")


def run_cli(*args):
    return subprocess.run([PAV] + list(args), capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)


def run_script(template, **values):
    """A Python script in a child process; {tests} in it is this folder (to import test_inprocess)."""
    script = template.format(tests=os.path.dirname(os.path.abspath(__file__)), **values)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)


# ---- tests

@pytest.mark.parametrize("fn", [decode_ok, decode_in_place])
def test_a_correct_kernel_passes_written_in_place_or_returned(tmp_path, fn):
    report = pav.verify(fn, DESCRIPTION, checks=["decode", "reject"], cases=6, reject_cases=40, seed=11,
                        save_dir=str(tmp_path))
    assert report.passed, report.failure_text()
    assert report.exit_code == 0 and report.verdict == "PASS"
    assert [c["name"] for c in report.checks] == ["decode", "reject"]
    assert report.checks[0]["cases"] == 6
    assert report.saved_cases() == [] and os.listdir(tmp_path) == []


FAULTS = [
    (raises, "ValueError: the kernel gave up"),
    (wrong_shape, "out has shape"),
    (wrong_dtype, "out has dtype float64"),
    (not_contiguous, "out is not contiguous"),
    (writes_input, "read-only"),
    (nan_out, None),
    (writes_nothing, None),
    (gqa_interleaved, None),
]


@pytest.mark.parametrize("fn, words", FAULTS, ids=[f.__name__ for f, _ in FAULTS])
def test_each_fault_is_a_verdict_saved_and_replayed_from_python_and_the_cli(tmp_path, fn, words):
    report = pav.verify(fn, DESCRIPTION, checks=["decode"], cases=80, seed=5, save_dir=str(tmp_path))
    assert not report.passed and report.exit_code == 1 and report.verdict == "FAIL"
    text = report.failure_text()
    if words:
        assert words in text
    [case] = report.saved_cases()
    assert os.path.dirname(case) == str(tmp_path) and os.path.isfile(case) and case in text
    recorded = json.load(open(case))["meta"]["kernel"]
    assert recorded["adapter"] == "python" and recorded["spec"].startswith("exec:")

    again = pav.replay(case, fn, DESCRIPTION)
    assert not again.passed and again.exit_code == 1
    if words:
        assert words in again.failure_text()

    # The command line reruns it through the worker the case records.
    cli = run_cli("replay", case, "--trust-case-kernel", "--json")
    assert cli.returncode == 1, cli.stderr
    [verdict] = json.loads(cli.stdout)["cases"]
    assert verdict["passed"] is False
    if words:
        assert words in verdict["verdict"]
    # ... and the correct kernel passes the same case, in process and as a worker.
    assert pav.replay(case, decode_ok, DESCRIPTION).passed


def test_the_report_has_the_command_lines_fields(tmp_path):
    kernel = pav.Kernel(decode_ok, DESCRIPTION)
    ours = pav.verify(kernel, checks=["decode"], cases=3, seed=3, save_dir=str(tmp_path))
    cli = run_cli("verify", "--kernel", kernel.replay_spec, "--checks", "decode", "--decode-cases", "3",
                  "--seed", "3", "--save", str(tmp_path), "--quiet", "--json")
    assert cli.returncode == 0, cli.stderr
    theirs = json.loads(cli.stdout)
    assert list(ours.keys()) == list(theirs.keys())
    assert list(ours["checks"][0].keys()) == list(theirs["checks"][0].keys())
    assert ours["kernel"]["adapter"] == "python" and theirs["kernel"]["adapter"] == "exec"
    assert ours["kernel"]["spec"] == theirs["kernel"]["spec"] == kernel.replay_spec


def test_compare_gives_per_case_verdicts_and_mcnemar(tmp_path):
    report = pav.compare(decode_ok, gqa_interleaved, DESCRIPTION, DESCRIPTION, cases=40, seed=2,
                         out_dir=str(tmp_path))
    assert report.exit_code == 0
    text = json.dumps(report)
    assert "mcnemar" in text.lower()
    a = [json.loads(line) for line in open(tmp_path / "compare-a.jsonl")]
    b = [json.loads(line) for line in open(tmp_path / "compare-b.jsonl")]
    assert len(a) == len(b) == 40
    assert all(r["correct"] for r in a) and not all(r["correct"] for r in b)


def test_a_description_is_checked_as_a_workers_is():
    with pytest.raises(pav.UsageError, match="no_such_field"):
        pav.Description("k", no_such_field=1)
    with pytest.raises(pav.UsageError, match="head_dims"):
        pav.Description(DESCRIPTION, head_dims=[65])
    with pytest.raises(pav.UsageError, match="name"):
        pav.Description(None)
    assert pav.Description(DESCRIPTION, gqa_ratios=[1, 8]).gqa_ratios == [1, 8]


def test_a_description_is_read_as_every_json_input_is():
    """The description text goes through pav's shared JSON reader: its nesting
    and size limits, and errors that name the field."""
    check = pav.api._extension().check_description
    cases = [
        ("[" * 65 + "]" * 65, "description: .*nested deeper than 64 levels"),
        ('{"name": "k", "name": "k"}', "description: name: duplicate key"),
        ('{"name": "k", "q_dtypes": [', "description: .*malformed JSON"),
        ('"' + "x" * (64 << 20) + '"', "description: .* bytes, more than the limit of 67108864 bytes"),
        (json.dumps(dict(DESCRIPTION.fields, name=5)), "name: expected a string"),
    ]
    for text, why in cases:
        with pytest.raises(ValueError, match=why):
            check(text)
    assert json.loads(check(json.dumps(DESCRIPTION.fields)))["name"] == DESCRIPTION.fields["name"]


def test_a_kernel_needs_its_description_and_a_spec_takes_none():
    with pytest.raises(pav.UsageError, match="description"):
        pav.verify(decode_ok)
    with pytest.raises(pav.UsageError, match="not callable"):
        pav.Kernel(42, DESCRIPTION)
    if pav.api._extension().device_memory_unavailable():  # a CPU build: device memory cannot run here
        with pytest.raises(pav.CannotRun, match="works on device memory: .*no GPU"):
            pav.Kernel(decode_ok, pav.Description(DESCRIPTION, memory="device"))
    with pytest.raises(pav.UsageError, match="description is for a Python kernel"):
        pav.verify("pav:cpu", DESCRIPTION)


def test_a_bad_option_is_a_usage_error_and_every_kernel_is_unregistered_after_its_run(tmp_path):
    # The reason travels in the exception, not on stderr.
    with pytest.raises(pav.UsageError, match="unknown check 'no-such-check'"):
        pav.verify(decode_ok, DESCRIPTION, checks=["no-such-check"], save_dir=str(tmp_path))
    report = pav.verify(decode_ok, DESCRIPTION, checks=["decode"], cases=1, save_dir=str(tmp_path))
    assert report.passed
    last = "inproc:py%d" % (next(pav.api._keys) - 1)  # the key the run above registered
    ext = pav.api._extension()
    with pytest.raises(ext.BadInput, match="no kernel of that name"):
        ext.session("verify", {"kernel": [last], "checks": ["decode"], "decode_cases": 1})


def test_the_session_refuses_an_unknown_option_or_a_value_of_another_type():
    ext = pav.api._extension()
    with pytest.raises(ext.BadInput, match="verify: unknown option 'decode_case'"):
        ext.session("verify", {"decode_case": 1})
    with pytest.raises(ext.BadInput, match="verify: decode_cases: expected an integer, got str"):
        ext.session("verify", {"decode_cases": "1"})
    with pytest.raises(ext.BadInput, match="verify: seed: expected an integer in range"):
        ext.session("verify", {"seed": -1})
    with pytest.raises(ext.BadInput, match="verify: checks: expected a list of strings"):
        ext.session("verify", {"checks": "decode"})
    with pytest.raises(ext.BadInput, match=r"--decode-cases: expected 1..100000 \(or 0: a search\), got -1"):
        ext.session("verify", {"decode_cases": -1})
    with pytest.raises(ext.BadInput, match="--decode-seconds: expected 1..86400, got 0.5"):
        ext.session("verify", {"decode_seconds": 0.5})
    with pytest.raises(ext.BadInput, match="no run named 'verfy'"):
        ext.session("verfy", {})
    # An empty list of checks names none: refused, never the default checks.
    with pytest.raises(pav.UsageError, match="--checks: an empty list"):
        pav.verify("pav:cpu", checks=[])


def test_drift_runs_through_the_session_and_names_what_it_refuses(tmp_path):
    missing = str(tmp_path / "no-such-sweep.json")
    with pytest.raises(pav.UsageError, match="no-such-sweep.json"):
        pav.drift(sweep=missing)
    with pytest.raises(pav.UsageError, match="--cells: no cell 'nope'"):
        pav.drift(cells=["nope"])


def test_a_report_has_typed_fields(tmp_path):
    report = pav.verify(decode_ok, DESCRIPTION, checks=["decode"], cases=2, save_dir=str(tmp_path))
    assert (report.command, report.verdict, report.exit_code, report.passed, report.interrupted) == \
        ("verify", "PASS", 0, True, False)


def test_python_calls_the_session_api_not_the_command_line():
    # pav's Python face calls the session's functions: no argv, no temporary
    # report file, no command line linked in.
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sources = [os.path.join(here, "module.cpp")]
    sources += [os.path.join(here, "pav", f) for f in os.listdir(os.path.join(here, "pav")) if f.endswith(".py")]
    for path in sources:
        with open(path) as f:
            text = f.read()
        # The words are built, so this file does not name what it looks for.
        for word in ("run" + "_main", "#include \"" + "tools/", "--json" + "-out", "temp" + "file"):
            assert word not in text, "%s uses %s" % (path, word)
    assert not hasattr(pav.api._extension(), "run")


LEFT_REGISTERED_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    import pav, test_inprocess as t
    # As a run that never reached its unregistering would leave it: the kernel
    # outlives the interpreter and is destroyed with the registry at exit.
    pav.api._extension().register_kernel("left", object(), json.dumps(t.DESCRIPTION.fields), "python:left")
    print("REGISTERED", flush=True)
""")


def test_a_kernel_left_registered_does_not_hang_the_exit():
    r = run_script(LEFT_REGISTERED_SCRIPT)
    assert r.returncode == 0 and r.stdout == "REGISTERED\n", r.stdout + r.stderr


def test_a_kernel_without_a_file_records_a_python_name():
    kernel = pav.Kernel(lambda call: GOOD.decode(call), DESCRIPTION)
    assert kernel.replay_spec.startswith("python:")
    assert pav.Kernel(decode_ok, DESCRIPTION).replay_spec.startswith("exec:")


STOP_SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading
    sys.path.insert(0, {tests!r})
    import pav, test_inprocess as t
    previous = signal.getsignal(signal.SIGINT)
    def slow(call):
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start() if not hasattr(slow, "armed") else None
        slow.armed = True
        return t.decode_ok(call)
    try:
        pav.fuzz(slow, t.DESCRIPTION, cases=1000000, save_dir={save!r})
        print("NOT STOPPED")
    except pav.Interrupted as e:
        print("STOPPED", e.report["interrupted"], e.report["passed"], e.report["runs"][0]["cases"] > 0)
    print("HANDLER BACK", signal.getsignal(signal.SIGINT) is previous)
    again = pav.verify(t.decode_ok, t.DESCRIPTION, checks=["decode"], cases=3, save_dir={save!r})
    print("NEXT RUN", again.verdict, again.checks[0]["cases"])
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0.2) if hasattr(signal, "sigtimedwait") else None
        print("SIGINT IGNORED")
    except KeyboardInterrupt:
        print("SIGINT RAISED KEYBOARDINTERRUPT")
""")


def test_ctrl_c_stops_the_run_with_its_summary_and_gives_pythons_handler_back(tmp_path):
    r = run_script(STOP_SCRIPT, save=str(tmp_path))
    assert "STOPPED True False True" in r.stdout, r.stdout + r.stderr
    assert "HANDLER BACK True" in r.stdout and "SIGINT RAISED KEYBOARDINTERRUPT" in r.stdout
    assert "NEXT RUN PASS 3" in r.stdout  # an earlier stop does not stop the next run
    assert "stopped by SIGINT" in r.stdout + r.stderr


# ---- one call at a time unless the kernel says it is thread-safe

class _Overlap:
    """Counts how many calls are inside the kernel at once. time.sleep lets
    the GIL go, as NumPy's large operations and a GPU framework's waits do."""

    def __init__(self):
        import threading
        self.lock, self.inside, self.most = threading.Lock(), 0, 0

    def __call__(self, call):
        import time
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        time.sleep(0.01)
        with self.lock:
            self.inside -= 1
        return GOOD.decode(call)


@pytest.mark.parametrize("thread_safe", [False, True])
def test_a_kernel_not_declared_thread_safe_gets_one_call_at_a_time(tmp_path, thread_safe):
    kernel = _Overlap()
    report = pav.fuzz(kernel, pav.Description(DESCRIPTION, thread_safe=thread_safe), cases=12, seed=9, jobs=4,
                      properties=["decode"], save_dir=str(tmp_path))
    assert report.passed, report.failure_text()
    if thread_safe:
        assert kernel.most > 1  # the jobs do overlap: the check below can fail
    else:
        assert kernel.most == 1


def test_scratch_a_kernel_declares_is_poisoned_before_each_call(tmp_path):
    """A Python kernel that keeps scratch declares it and gives poison_scratch(): pav fills it
    with NaN before every call, so a read of a slot the call did not write is NaN on that call
    (the NumPy worker's stale-empty-split defect, found in a handful of cases). Declared without
    poison_scratch(), every call is a fault naming it."""
    stale = numpy_decode.NumpyDecode(defect="stale-empty-split")

    def decode(call):
        return stale.decode(call)

    decode.poison_scratch = stale.poison_scratch
    declared = pav.Description(numpy_decode.DESCRIPTION, scratch=True)
    report = pav.fuzz(decode, declared, cases=100, seed=1, save_dir=str(tmp_path / "found"))
    assert not report.passed and "NaN" in report.failure_text(), report.failure_text()
    assert report["runs"][0]["cases"] <= 20, report["runs"][0]["cases"]

    def no_poison(call):
        return stale.decode(call)

    report = pav.verify(no_poison, declared, checks=["decode"], cases=3, seed=1, save_dir=str(tmp_path / "fault"))
    assert not report.passed and "has no poison_scratch()" in report.failure_text(), report.failure_text()


def test_a_kept_call_or_a_late_thread_writes_where_pav_no_longer_reads():
    """A kernel that keeps the call and writes its out during the next call, and a thread that
    writes out after its call returned: the writes land in memory the kept arrays own, never
    pav's heap (it was corrupted: malloc aborted), and the verdicts are of what each call returned."""
    r = run_script(textwrap.dedent("""
        import sys, tempfile, threading, time
        sys.path.insert(0, {tests!r})
        import numpy as np
        import pav
        from test_inprocess import GOOD, DESCRIPTION
        kept, late = [], []
        def decode(call):
            for old in kept:
                old.out[...] = 7.0  # a call that returned long ago
            kept[:] = [call]
            out = call.out
            def write_later():
                time.sleep(0.002)
                out[...] = 3.0
            t = threading.Thread(target=write_later)
            t.start()
            late.append(t)
            return GOOD.decode(call)
        report = pav.verify(decode, DESCRIPTION, checks=["decode"], cases=40, seed=2, save_dir=tempfile.mkdtemp())
        for t in late:
            t.join()
        print("passed", report.passed, report.failure_text()[:300])
    """))
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "passed True" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


def test_a_thread_that_keeps_writing_call_out_never_reaches_what_the_kernel_returned(tmp_path):
    """A kernel that returns its output while a thread of its keeps writing call.out: what pav
    takes is what the kernel returned, stored where the thread cannot write (it was stored into
    call.out and copied back from there, so the thread's writes between the two were taken)."""
    import threading
    import time
    writers = []

    def decode(call):
        out = call.out
        end = time.monotonic() + 0.02

        def keep_writing():
            while time.monotonic() < end:
                out[...] = 3
                time.sleep(0)

        t = threading.Thread(target=keep_writing)
        t.start()
        writers.append(t)
        result = GOOD.decode(call)
        time.sleep(0.001)  # the writer has the GIL now and then, before and after the return
        return result

    report = pav.verify(decode, DESCRIPTION, checks=["decode"], cases=20, seed=5, save_dir=str(tmp_path))
    for t in writers:
        t.join()
    assert report.passed, report.failure_text()


def test_a_kernel_that_calls_os_exit_is_a_verdict_not_the_end_of_the_process():
    """os._exit in a kernel ended the process with its code and no verdict. During the call it
    is the kernel's defect, named, and the process goes on; elsewhere os._exit exits as always."""
    r = run_script(textwrap.dedent("""
        import os, sys, tempfile
        sys.path.insert(0, {tests!r})
        import pav
        from test_inprocess import GOOD, DESCRIPTION
        calls = []
        def decode(call):
            calls.append(1)
            if len(calls) == 3:
                os._exit(0)
            return GOOD.decode(call)
        report = pav.verify(decode, DESCRIPTION, checks=["decode"], cases=20, seed=2, save_dir=tempfile.mkdtemp())
        print("passed", report.passed, report.failure_text()[:400])
        sys.stdout.flush()
        os._exit(5)  # outside a kernel's call: the process ends with this code
    """))
    assert r.returncode == 5, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "passed False" in r.stdout and "the kernel called os._exit(0)" in r.stdout, r.stdout[-2000:]


@pytest.mark.parametrize("where", ["full", "closed-pipe"])
def test_output_that_cannot_be_written_is_an_exception_not_an_abort(tmp_path, where):
    """pav's output to a full disk (/dev/full) or a pipe whose reader has gone: the run ends with
    CannotRun naming the stream and the reason, and the run's verdict; the interpreter goes on
    (it aborted, SIGABRT, when the write's exception met this module's own C++ runtime)."""
    script = textwrap.dedent("""
        import sys
        import pav
        try:
            pav.verify("pav:cpu", checks=["decode"], cases=2, seed=3, quiet=False, save_dir={save!r})
        except pav.CannotRun as e:
            sys.stderr.write("raised: %s\\n" % e)
            sys.exit(7)
        sys.exit(0)
    """).format(save=str(tmp_path))
    if where == "full":
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-c", script], stdout=full, stderr=subprocess.PIPE, text=True,
                               timeout=CHILD_TIMEOUT_S)
        reason = "stdout: No space left on device"
    else:
        read_end, write_end = os.pipe()
        os.close(read_end)  # nobody reads: a write fails with EPIPE (Python ignores SIGPIPE)
        try:
            r = subprocess.run([sys.executable, "-c", script], stdout=write_end, stderr=subprocess.PIPE, text=True,
                               timeout=CHILD_TIMEOUT_S)
        finally:
            os.close(write_end)
        reason = "stdout: Broken pipe"
    assert r.returncode == 7, (r.returncode, r.stderr[-2000:])
    assert "raised: pav verify: could not write pav's output (%s); the run's verdict: PASS" % reason in r.stderr, \
        r.stderr[-2000:]


def test_a_kernel_that_compiles_per_shape_gets_its_calls_in_a_few_shapes(tmp_path):
    """A description that says compiles_per_shape (a Triton or torch.compile kernel) gets its
    decode calls in 8 shapes unless shapes= says otherwise; the report counts the shapes used."""
    jit = pav.Description(numpy_decode.DESCRIPTION, compiles_per_shape=True)
    report = pav.verify(decode_ok, jit, checks=["decode"], cases=40, seed=3, save_dir=str(tmp_path))
    [check] = report["checks"]
    assert report.passed and report["shapes"] == 8, report["shapes"]
    assert 1 <= check["detail"]["shapes"] <= 8, check["detail"]["shapes"]
    free = pav.verify(decode_ok, jit, checks=["decode"], cases=40, seed=3, shapes=0, save_dir=str(tmp_path))
    assert free["shapes"] == 0 and free["checks"][0]["detail"]["shapes"] > 8, free["checks"][0]["detail"]["shapes"]
    plain = pav.verify(decode_ok, DESCRIPTION, checks=["decode"], cases=10, seed=3, save_dir=str(tmp_path))
    assert plain["shapes"] == 0
    two = pav.fuzz(decode_ok, DESCRIPTION, cases=20, seed=3, shapes=2, shape_seed=8, save_dir=str(tmp_path))
    assert two["shapes"] == 2 and two["shape_seed"] == 8 and two["runs"][0]["shapes"] <= 2


def test_verify_searches_for_its_seconds_unless_quick_or_a_count_is_given(tmp_path):
    searched = pav.verify(decode_ok, DESCRIPTION, checks=["decode"], seconds=1, save_dir=str(tmp_path))
    [check] = searched["checks"]
    assert searched.passed and check["budget"] == "search of 1 s" and check["detail"]["seconds"] >= 0.9
    quick = pav.verify(decode_ok, DESCRIPTION, checks=["decode"], quick=True, save_dir=str(tmp_path))
    assert quick["quick"] is True and quick["checks"][0]["budget"] == "64 cases" and quick["checks"][0]["cases"] == 64
    fixed = pav.verify(decode_ok, DESCRIPTION, checks=["decode"], quick=True, cases=3, save_dir=str(tmp_path))
    assert fixed["checks"][0]["budget"] == "3 cases"


def test_a_kernels_long_text_is_bounded_in_what_pav_prints_reports_and_saves(tmp_path, capfd):
    """A 1 MiB exception message (and a 1 MiB refusal reason) from a Python kernel: what pav
    prints, reports and saves keeps its head and tail within the limits of docs/limits.md, as for
    a worker's."""
    long_text = "x" * (1 << 20)

    def raises_long(call):
        raise ValueError(long_text)

    report = pav.verify(raises_long, DESCRIPTION, checks=["decode"], cases=3, seed=5, save_dir=str(tmp_path))
    assert not report.passed and "ValueError: xxx" in report.failure_text()
    printed = capfd.readouterr()
    assert len(printed.err) + len(printed.out) < 200_000, len(printed.err) + len(printed.out)
    assert "characters left out" in printed.err
    [case] = report.saved_cases()
    assert os.path.getsize(case) < 100_000, os.path.getsize(case)
    assert len(json.dumps(report["checks"])) < 100_000

    def refuses_long(request):
        return long_text

    report = pav.verify(pav.Kernel(decode_ok, DESCRIPTION, check=refuses_long), checks=["reject"], reject_cases=5,
                        seed=5, save_dir=str(tmp_path / "r"))
    assert "xxx" in json.dumps(report["checks"]) and len(json.dumps(report["checks"])) < 100_000
    for case in report.saved_cases():
        assert os.path.getsize(case) < 100_000, os.path.getsize(case)


# ---- a call that does not return: the timeout, its own thread, a stop

def spins(call):
    while True:
        pass


def sleeps(call):
    import time
    time.sleep(3600)


def fails_off_the_main_thread(call):
    """Wrong (NaN) unless called on the interpreter's main thread: a failure
    that depends on the thread a kernel runs on."""
    import threading
    out, lse = GOOD.decode(call)
    if threading.current_thread() is not threading.main_thread():
        out = np.full(out.shape, np.nan, dtype=np.float32)
    return out, lse


def test_a_call_that_does_not_return_is_interrupted_at_the_timeout_and_is_a_verdict(tmp_path):
    """A kernel that spins past the timeout is interrupted (KernelInterrupted raised in it): the
    call is a verdict naming the timeout, the case is shrunk and saved, and it replays to the same
    verdict. One that sleeps, where Python cannot raise in it, is left running on its thread and
    is a verdict too; the kernel's next call runs on another thread."""
    report = pav.verify(spins, DESCRIPTION, checks=["decode"], cases=1, seed=2, timeout=0.3,
                        save_dir=str(tmp_path))
    text = report.failure_text()
    assert not report.passed and "did not return within 0.3 s (the timeout); pav interrupted it" in text, text
    failure = report.checks[0]["detail"]["failure"]
    saved = failure["saved"]
    assert "--timeout 0.3" in failure["reproduce"]
    again = pav.replay(saved, spins, DESCRIPTION, timeout=0.3)
    assert not again.passed and "pav interrupted it" in again.failure_text(), again.failure_text()
    import time
    t0 = time.monotonic()
    asleep = pav.replay(saved, sleeps, DESCRIPTION, timeout=0.3)
    took = time.monotonic() - t0
    assert not asleep.passed and "left it running on a thread of its own" in asleep.failure_text()
    assert took < 10, took  # the timeout and the grace period, not the hour it sleeps
    assert pav.replay(saved, decode_ok, DESCRIPTION, timeout=0.3).passed


def test_the_timeout_is_bounded_as_on_the_command_line(tmp_path):
    for bad in (0, -1, 0.001, 86401):
        with pytest.raises(pav.UsageError, match=r"timeout: expected seconds in \[0.01, 86400\]"):
            pav.verify(decode_ok, DESCRIPTION, checks=["decode"], cases=1, timeout=bad, save_dir=str(tmp_path))
    assert pav.verify(decode_ok, DESCRIPTION, checks=["decode"], cases=1, timeout=0.01 * 100,
                      save_dir=str(tmp_path)).passed


def test_every_call_of_a_kernel_not_declared_thread_safe_runs_on_one_thread(tmp_path):
    """The search's jobs, the shrink and the saving call the kernel on one thread of its own, so
    a failure that depends on the thread is found, shrunk, saved and replayed as one; before, the
    jobs' threads failed and the caller's thread, where pav shrinks, passed: reported, never saved."""
    import threading
    seen = set()

    def records(call):
        seen.add(threading.get_ident())
        return GOOD.decode(call)

    assert pav.fuzz(records, DESCRIPTION, cases=8, jobs=3, seed=4, properties=["decode"],
                    save_dir=str(tmp_path)).passed
    assert len(seen) == 1 and threading.get_ident() not in seen, seen
    report = pav.fuzz(fails_off_the_main_thread, DESCRIPTION, cases=20, jobs=2, seed=4, properties=["decode"],
                      save_dir=str(tmp_path / "found"))
    failure = report["runs"][0]["failure"]
    assert not report.passed and failure.get("saved"), report.failure_text()
    assert not pav.replay(failure["saved"], fails_off_the_main_thread, DESCRIPTION).passed


SLOW_STOP_SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading, time
    sys.path.insert(0, {tests!r})
    import pav, test_inprocess as t
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        pav.verify(t.{kernel}, t.DESCRIPTION, checks=["decode"], cases=5, save_dir={save!r})
        print("NOT STOPPED")
    except pav.Interrupted as e:
        print("STOPPED", e.report["verdict"], round(time.monotonic() - t0) < 10)
    print("SAVED", sorted(os.listdir({save!r})) if os.path.isdir({save!r}) else [])
""")


@pytest.mark.parametrize("kernel", ["spins", "sleeps"])
def test_a_stop_during_a_call_that_does_not_return_ends_the_run_without_a_verdict_on_that_call(tmp_path, kernel):
    """SIGINT during a call that would take an hour: the call is interrupted (or left running
    after the grace period), the run stops within seconds, and the cut-short call is no FAIL and
    saves no case (it used to wait for the call: 37-77 s for a slow worker)."""
    r = run_script(SLOW_STOP_SCRIPT, kernel=kernel, save=str(tmp_path / "saved"))
    assert "STOPPED STOPPED (not a pass) True" in r.stdout, r.stdout + r.stderr
    assert "SAVED []" in r.stdout, r.stdout


class _FailsThenSpins:
    """Wrong on its first `wrong` calls, then spins: a stop asked while pav shrinks that
    failure lands in the shrink's re-check of the case (wrong=1) or in a candidate's call (2)."""

    def __init__(self, wrong):
        self.calls, self.wrong = 0, wrong

    def __call__(self, call):
        self.calls += 1
        if self.calls <= self.wrong:  # a finite wrong value: no second look at the call (NaN gets one)
            out, lse = GOOD.decode(call)
            out = np.array(out, dtype=np.float32)
            out.flat[0] += 1000.0
            return out, lse
        spins(call)


FAILS_ONCE_THEN_SPINS = _FailsThenSpins(1)
FAILS_TWICE_THEN_SPINS = _FailsThenSpins(2)

SHRINK_STOP_SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading
    sys.path.insert(0, {tests!r})
    import pav, test_inprocess as t
    threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        pav.verify(t.{kernel}, t.DESCRIPTION, checks=["decode"], cases=5, seed=3, save_dir={save!r})
        print("NOT STOPPED")
    except pav.Interrupted as e:
        failure = e.report["checks"][0]["detail"]["failure"]
        print("STOPPED", e.report["verdict"], failure["message"] == failure["first_message"])
        print("MESSAGE", failure["message"])
""")


@pytest.mark.parametrize("kernel", ["FAILS_ONCE_THEN_SPINS", "FAILS_TWICE_THEN_SPINS"])
def test_a_stop_during_the_shrink_keeps_the_failure_as_found_not_the_cut_short_call(tmp_path, kernel):
    """The failure is found, SIGINT arrives while the shrink's re-check of the case or a
    candidate's call is running: that call is interrupted and taken for nothing, and the case is
    saved as found with its own failure (cut short by the stop, the re-check's or the candidate's
    verdict became the saved failure, with the stop's message)."""
    r = run_script(SHRINK_STOP_SCRIPT, kernel=kernel, save=str(tmp_path))
    assert "STOPPED FAIL True" in r.stdout, r.stdout + r.stderr
    assert "asked to stop" not in r.stdout.split("MESSAGE", 1)[1], r.stdout


def test_a_stop_during_a_workers_call_kills_the_worker_and_ends_the_run(tmp_path):
    """The same from the command line through a worker (exec:): the worker is killed at the stop,
    not waited for to its timeout."""
    import time
    spec = pav.Kernel(sleeps, DESCRIPTION).replay_spec  # exec: pav.serve on this file's sleeps
    p = subprocess.Popen([PAV, "verify", "--kernel", spec, "--checks", "decode", "--decode-cases", "3",
                          "--timeout", "600", "--save", str(tmp_path / "saved")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)  # the worker started and is in its first call
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=CHILD_TIMEOUT_S)
    assert time.monotonic() - t0 < 10
    assert p.returncode == 3 and "STOPPED (not a pass)" in out, out + err
    assert not os.path.isdir(tmp_path / "saved") or not os.listdir(tmp_path / "saved")
