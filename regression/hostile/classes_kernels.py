# SPDX-License-Identifier: Apache-2.0
"""Hostile kernels: workers (small Python scripts written here) and plugins
(test plugins of the build) that try to crash, hang or fool pav.

Every case runs pav against a kernel that misbehaves on purpose: replies
nested a million deep, bytes that are not UTF-8 in replies and stderr, an
out.npy that is a FIFO or a symlink to /dev/zero, a name of a megabyte,
negative strides sent to `pav kernel-worker`, a truncated copy of a plugin, a
plugin that calls exit(0) while it loads or decodes. The corpus' rules hold
for each (no signal, no hang, bounded output) and the exit code is the one the
finding calls for: 2 naming what is wrong for a kernel pav refuses, 1 with the
case saved for a kernel whose call failed.

The test plugins come from the build: the folder PAV_CORPUS_PLUGIN_DIR names,
else adapters/ beside the pav under test (build/NAME/pav ->
build/NAME/adapters/). A plugin that is not there is reported and its cases are
left out (a build without tests has none); the worker cases always run.
"""
import json
import os
import struct
import sys

PYTHON = "/usr/bin/python3"

# A narrow description a worker gives: one of everything pav needs.
DESCRIPTION = {
    "name": "hostile", "version": "1", "memory": "host",
    "q_dtypes": ["bf16"], "out_dtype": "same", "cache_dtypes": ["fp8_e4m3fn"],
    "v_layouts": ["plain"], "scale_kinds": ["none"], "block_sizes": [16], "head_dims": [64],
    "gqa_ratios": [1], "q_len": [1, 1], "max_num_seqs": 2, "max_kv_heads": 1, "max_context_len": 64,
    "split": "self", "check": False,
    "profile": {"q_quant": "none", "p_round": "none", "partial": "none"},
}

# The protocol loop of a worker: describe with DESCRIBE (bytes, one line),
# then answer every decode with on_decode(request) (bytes, one line).
WORKER = r'''
import json, os, sys
DESCRIBE = %(describe)r
def on_decode(req):
%(on_decode)s
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    req = json.loads(line)
    if req.get("op") == "describe":
        out.write(DESCRIBE + b"\n")
    elif req.get("op") == "decode":
        out.write(on_decode(req) + b"\n")
    elif req.get("op") == "quit":
        break
    else:
        out.write(json.dumps({"id": req.get("id"), "ok": False, "status": "error", "error": "?"}).encode() + b"\n")
    out.flush()
'''

OK_REPLY = '    return json.dumps({"id": req["id"], "ok": True}).encode()'


def worker(corpus, name, describe=None, on_decode=OK_REPLY):
    """Writes a worker script; returns the --kernel value that runs it."""
    if describe is None:
        describe = json.dumps({"ok": True, "protocol": 1, "kernel": DESCRIPTION}).encode()
    p = corpus.write(f"kernels/{name}.py", WORKER % {"describe": describe, "on_decode": on_decode})
    return f"exec:{PYTHON} {p}"


def fuzz_args(corpus, kernel, name, extra=(), cases=4):
    return ["fuzz", "--kernel", kernel, "--property", "decode", "--cases", str(cases), "--seed", "1",
            "--shrink-tries", "4", "--timeout", "5", "--quiet", "--save", corpus.path(f"kernels/saved-{name}")] + list(extra)


def plugin_dir(corpus):
    d = os.environ.get("PAV_CORPUS_PLUGIN_DIR")
    if d:
        return d
    return os.path.join(os.path.dirname(os.path.abspath(corpus.pav)), "adapters") if getattr(corpus, "pav", None) else ""


def add_worker_cases(corpus):
    # Replies nested a million deep: refused by pav's bounded reader, no crash.
    deep = b'{"ok":true,"kernel":' + b"[" * 1000000
    corpus.add("kernels.worker.describe-nested-deep", ["verify", "--kernel", worker(corpus, "deep", deep)],
               "reject", ["nested deeper than 64 levels"])
    corpus.add("kernels.worker.describe-duplicate-key",
               ["verify", "--kernel", worker(corpus, "dupkey", b'{"ok":true,"ok":false,"kernel":{}}')],
               "reject", ["duplicate key"])
    # A describe reply that is not UTF-8: refused, and the quote of it is cleaned.
    corpus.add("kernels.worker.describe-not-utf8",
               ["verify", "--kernel", worker(corpus, "notutf8", b'{"ok":true,"kernel":{"name":"\xff\xfe"}}')],
               "reject", ["describe reply is not JSON"])
    # A name of a megabyte: refused by its size, the message short.
    long_name = dict(DESCRIPTION, name="n" * 1000000)
    corpus.add("kernels.worker.name-a-megabyte",
               ["verify", "--kernel",
                worker(corpus, "longname", json.dumps({"ok": True, "kernel": long_name}).encode())],
               "reject", ["name: 1000000 bytes, more than 256"])
    # A G or a minimum q_len a case file cannot hold: refused at describe time.
    for label, field, value, mention in [("group-256", "gqa_ratios", [1, 256], "gqa_ratios: 256 outside 1..128"),
                                         ("q-len-20", "q_len", [20, 20], "q_len: minimum 20 > 16")]:
        d = dict(DESCRIPTION, **{field: value})
        corpus.add(f"kernels.worker.describe-{label}",
                   ["verify", "--kernel", worker(corpus, label, json.dumps({"ok": True, "kernel": d}).encode())],
                   "reject", [mention])
    # Outputs that are not regular files: a FIFO nobody writes (pav must not
    # wait on it), a symlink to /dev/zero (never read).
    fifo = ('    p = os.path.join(req["dir"], "out.npy")\n    os.mkfifo(p)\n' + OK_REPLY)
    corpus.add("kernels.worker.output-fifo", fuzz_args(corpus, worker(corpus, "fifo", on_decode=fifo), "fifo"),
               "fail", ["out.npy: a FIFO"], timeout=120)
    zero = ('    os.symlink("/dev/zero", os.path.join(req["dir"], "out.npy"))\n' + OK_REPLY)
    corpus.add("kernels.worker.output-devzero", fuzz_args(corpus, worker(corpus, "zero", on_decode=zero), "zero"),
               "fail", ["out.npy: a symbolic link"], timeout=120)
    # Text that is not UTF-8 in stderr and in a reply line: the failure is
    # reported and its case saved (exit 1), never lost to a report that
    # cannot be written (exit 3).
    stderr = ('    sys.stderr.buffer.write(b"\\xe2\\x82" + b"x" * 3000 + b"\\xff\\xfe\\xc0\\xaf cut \\xe2\\n")\n'
              '    sys.stderr.flush()\n    os._exit(9)\n    return b""')
    corpus.add("kernels.worker.stderr-not-utf8",
               fuzz_args(corpus, worker(corpus, "stderr", on_decode=stderr), "stderr"),
               "fail", ["worker exited with status 9"], timeout=120)
    garbage = '    return b"\\xff\\xfe not json \\xe2\\x82"'
    corpus.add("kernels.worker.reply-not-utf8",
               fuzz_args(corpus, worker(corpus, "garbage", on_decode=garbage), "garbage"),
               "fail", ["a reply line that is not JSON"], timeout=120)


# pav kernel-worker sent a check with a negative table stride: a worker script
# asks it, prints the reply to stderr and exits 3, so pav (exit 2) quotes what
# kernel-worker said; a kernel-worker that crashed instead says nothing of it.
PROBE = r'''
import json, subprocess, sys
pav = %(pav)r
child = subprocess.Popen([pav, "kernel-worker", "--kernel", "pav:cpu --path uniform"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
bt = {"dtype": "i32", "shape": [1, 2], "strides": [-4, 1], "values": [0, 0]}
lens = {"dtype": "i32", "shape": [1], "strides": [1], "values": [5]}
check = {"op": "check", "id": 1, "args": {"q_len": 1, "softmax_scale": 0.125},
         "tensors": {"block_tables": bt, "context_lens": lens}}
child.stdin.write((json.dumps(check) + "\n").encode())
child.stdin.flush()
reply = child.stdout.readline()
child.stdin.close()
rc = child.wait()
sys.stderr.write("kernel-worker replied %%r and exited %%d\n" %% (reply.decode("utf-8", "replace").strip(), rc))
sys.exit(3)
'''


def add_kernel_worker_cases(corpus):
    pav = getattr(corpus, "pav", None)
    if not pav:
        return
    p = corpus.write("kernels/probe-negative-stride.py", PROBE % {"pav": os.path.abspath(pav)})
    corpus.add("kernels.kernel-worker.negative-stride", ["verify", "--kernel", f"exec:{PYTHON} {p}"], "reject",
               ["strides[0] = -4 < 0", "exited 0", "worker exited with status 3"])


def add_plugin_cases(corpus):
    d = plugin_dir(corpus)
    lib = lambda name: os.path.join(d, f"lib{name}.so")
    have = lambda name: d and os.path.isfile(lib(name))
    missing = [n for n in ("pav_cpu_kernel", "pav_fault_exit_load", "pav_fault_exit_decode", "pav_fault_bad_text")
               if not have(n)]
    if missing:
        print(f"classes_kernels: no {', '.join(missing)} under '{d}' (set PAV_CORPUS_PLUGIN_DIR): their cases left out",
              file=sys.stderr)
    if have("pav_cpu_kernel"):
        whole = open(lib("pav_cpu_kernel"), "rb").read()
        # Where the loadable segments end (the file goes on with debug sections).
        phoff, = struct.unpack_from("<Q", whole, 32)
        phentsize, phnum = struct.unpack_from("<HH", whole, 54)
        load_end = 0
        for i in range(phnum):
            p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", whole, phoff + i * phentsize)
            if p_type == 1:  # PT_LOAD
                load_end = max(load_end, p_offset + p_filesz)
        for label, keep in [("header-only", 64), ("4k", 4096), ("half-loaded", load_end // 2),
                            ("last-byte-missing", load_end - 1)]:
            p = corpus.write(f"kernels/libtruncated-{label}.so", whole[:keep])
            corpus.add(f"kernels.plugin.truncated-{label}", ["verify", "--kernel", f"lib:{p}"], "reject",
                       [p, "not a loadable shared library"])
        p = corpus.write("kernels/libnot-elf.so", b"#" * 200)
        corpus.add("kernels.plugin.not-elf", ["verify", "--kernel", f"lib:{p}"], "reject", [p, "not an ELF file"])
    if have("pav_fault_exit_load"):
        # In process the exit guard ends pav with 3 (the corpus has no
        # expectation for 3 alone: "any" checks no signal and no hang; the
        # CTest KernelCli.PluginExit.* check the 3). Isolated: the child's 3 is
        # a worker that exited while describing itself, exit 2.
        corpus.add("kernels.plugin.exit0-while-loading", ["verify", "--kernel", f"lib:{lib('pav_fault_exit_load')}"],
                   "any")
        corpus.add("kernels.plugin.exit0-while-loading-isolated",
                   ["verify", "--isolate", "--kernel", f"lib:{lib('pav_fault_exit_load')}"], "reject",
                   ["worker exited with status 3", "called exit(0)"])
    if have("pav_fault_exit_decode"):
        k = f"lib:{lib('pav_fault_exit_decode')} --path uniform"
        corpus.add("kernels.plugin.exit0-in-decode", fuzz_args(corpus, k, "exit-decode", cases=60), "any",
                   timeout=120)
        corpus.add("kernels.plugin.exit0-in-decode-isolated",
                   fuzz_args(corpus, k, "exit-decode-isolated", ["--isolate"], cases=60), "fail",
                   ["worker exited with status 3"], timeout=180)
    if have("pav_fault_bad_text"):
        k = f"lib:{lib('pav_fault_bad_text')} --path uniform"
        corpus.add("kernels.plugin.text-not-utf8", fuzz_args(corpus, k, "bad-text", cases=60), "fail",
                   ["kernel error: fault plugin says"], timeout=120)


def add_cases(corpus):
    add_worker_cases(corpus)
    add_kernel_worker_cases(corpus)
    add_plugin_cases(corpus)
