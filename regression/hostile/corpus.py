#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The hostile-input corpus: malformed inputs for every pav command, generated
here (never hand-listed) and run against the real binary.

Every input is checked for what a gate that runs unattended owes its users:
  - no signal (a crash, an abort, a sanitizer report) and no hang (a timeout);
  - output of bounded size (messages quote short excerpts, never a whole value);
  - the exit code the input calls for: 2 for bad input, naming the field or
    option at fault; 1 where the input is well formed but describes a call the
    kernel must refuse; never 0 on an input that must be rejected.

Usage:
  corpus.py --pav PATH [--work DIR] [--size default|large] [--jobs N] [--filter TEXT] [--list]

Every input kind also gets seeded random damage (byte flips, truncations,
inserted tokens) where only the first two rules are asserted: --random N of
them (default 60: a few per kind; the sanitizer build runs fewer). --size large
is the big random set (the slow label runs it with --random 3000). Every case is
named; --filter runs those whose name contains TEXT. The corpus is rebuilt
under DIR (default: a temporary folder) each run.

Extra classes: every file classes_*.py beside this one (or in --classes-dir)
that defines add_cases(corpus) is imported, in name order, and called once
after the built-in classes, before the random set. A module that fails to
import, or whose add_cases raises, fails the whole run (exit 1, named): a class
never drops out silently. What a module may use:

  corpus.path(name)           the absolute path of name under the corpus folder
  corpus.write(name, content) writes str or bytes there (folders made), returns
                              the path; name it "<class>/<file>", e.g.
                              "kernels/bad-reply.json", so classes never collide
  corpus.add(name, args, expect, mentions=(), timeout=30.0)
                              one case: pav run with args (a list of str; a file
                              name may carry undecodable bytes as
                              os.fsdecode(b"...") gives them); name unique over
                              the corpus, "<class>.<what>" by convention
  corpus.rng                  a random.Random seeded once per run (reproducible)
  corpus.pav                  the pav under test (to make real inputs with it)
  corpus.run_pav(args)        runs it once while building (returns the
                              CompletedProcess), e.g. to write a real report
  Case expectations (expect): "reject" exit 2; "fail" exit 1; "refuse" exit 1
  or 2 (a call the kernel must refuse); "ok" exit 0; "any" only the first two
  rules. For reject, fail and refuse every string in mentions must appear in
  the output (stdout + stderr): name the field, option or file at fault.
  Helpers: dumps(value) (strings made with raw(TEXT) are written verbatim, for
  1e999 or NaN), with_field(doc, path, value), without_field(doc, path),
  BAD_TYPES, BAD_NUMBERS, the limits (MAX_DEPTH, MAX_JSON_FILE, ...).
"""
import argparse
import concurrent.futures
import copy
import glob
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Limits pav states in kernels/limits.hpp (the corpus probes both sides).
MAX_BATCH = 4096
MAX_CU = 4096
MAX_BUDGET = 1 << 20
MAX_KV_HEADS = 1024
MAX_JSON_FILE = 64 << 20
MAX_JSONL_LINE = 16 << 20
MAX_DEPTH = 64
MAX_PRELUDE = 256  # a case's earlier calls (kMaxPrelude, properties/case/case_format.hpp)
I32_MAX = 2**31 - 1
OUTPUT_LIMIT = 64 * 1024  # bytes of stdout + stderr any one run may print

RAW = "\u0000raw:"  # marks a value written verbatim (1e999, NaN, ...) by dumps()


def dumps(value):
    """JSON text of value; strings starting with RAW are written verbatim."""
    text = json.dumps(value)
    out = []
    i = 0
    marker = json.dumps(RAW)[1:-1]
    while True:
        j = text.find('"' + marker, i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        end = text.find('"', j + 1 + len(marker))
        out.append(text[i:j])
        out.append(json.loads(text[j:end + 1])[len(RAW):])
        i = end + 1


def raw(text):
    return RAW + text


BASE_CASE = {
    "format": "pav-case/1",
    "lens": [5, 300],
    "q_len": 1,
    "hkv": 1,
    "group": 2,
    "head_dim": 64,
    "block_size": 16,
    "v_layout": "plain",
    "q_dtype": "bf16",
    "cache_dtype": "fp8_e4m3fn",
    "scales": "per_tensor",
    "options": {"arch": "sm90", "compute": "fp8_e4m3fn", "partial": "f32", "cu": 8},
    "path": "planned",
    "seed": 3,
}

BASE_SWEEP = {
    "format": "pav-drift-sweep/1",
    "name": "corpus",
    "contexts": [1000],
    "batches": [1, 2],
    "heads": [{"hkv": 1, "group": 2}],
    "head_dim": 64,
    "block_size": 16,
    "q_len": 1,
    "ceilings": [8, 32],
    "partials": ["f32"],
    "cu": 32,
    "seeds": 2,
    "shorter": {"ratio_p50": 2.0, "ratio_p90": 4.0, "min_len": 1},
    "growth": {"alpha": 0.01, "min_relative_growth": 0.1},
}

BAD_TYPES = [("string", "x"), ("bool", True), ("null", None), ("array", [1]), ("object", {"a": 1})]
BAD_NUMBERS = [("overflow", raw("1e999")), ("nan", raw("NaN")), ("inf", raw("Infinity")),
               ("neg-overflow", raw("-1e999"))]


def with_field(doc, path, value):
    """A deep copy of doc with path (a list of keys) set to value (None path entry: delete)."""
    d = copy.deepcopy(doc)
    node = d
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value
    return d


def without_field(doc, path):
    d = copy.deepcopy(doc)
    node = d
    for k in path[:-1]:
        node = node[k]
    del node[path[-1]]
    return d


class Case:
    def __init__(self, name, args, expect, mentions=(), timeout=30.0, stdin=None):
        self.name = name
        self.args = args
        # "reject": exit 2; "fail": exit 1 (well formed, and the verdict is not a
        # pass); "refuse": exit 1 or 2 (a valid-looking call the kernel must
        # refuse); "ok": exit 0; "any": only no signal, no hang, bounded output.
        self.expect = expect
        self.mentions = list(mentions)
        self.timeout = timeout


class Corpus:
    def __init__(self, root, seed=20240601, pav=None):
        self.root = root
        self.cases = []
        self.rng = random.Random(seed)
        self.names = set()
        self.pav = pav

    def run_pav(self, args, timeout=120):
        """Runs the pav under test once while the corpus is built (not a case)."""
        env = dict(os.environ)
        env.setdefault("PAV_COUNTEREXAMPLE_DIR", self.path("counterexamples"))
        return subprocess.run([self.pav] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=timeout, env=env)

    def path(self, name):
        return os.path.join(self.root, name)

    def write(self, name, content):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
        return p

    def add(self, name, args, expect, mentions=(), timeout=30.0):
        assert name not in self.names, name
        self.names.add(name)
        self.cases.append(Case(name, args, expect, mentions, timeout))

    # ---- case files: replay, gate and fuzz --replay read them -------------------------

    def case_file(self, name, text, expect, mentions, commands=("replay", "gate", "fuzz")):
        p = self.write("case/" + name + ".json", text)
        for cmd in commands:
            args = {"replay": ["replay", p, "--backend", "cpu"],
                    "gate": ["gate", p],
                    "fuzz": ["fuzz", "--replay", p, "--backend", "cpu"]}[cmd]
            e = expect
            if isinstance(expect, dict):
                e = expect.get(cmd)
                if e is None:
                    continue
            self.add(f"case.{name}.{cmd}", args, e, mentions)

    def case_docs(self):
        base = BASE_CASE
        self.case_file("valid", dumps(base), "ok", ())
        uniform = with_field(base, ["path"], "uniform")
        self.case_file("valid-uniform", dumps(uniform), "ok", ())

        # Every field: wrong types, numbers JSON cannot hold, out of range on both sides.
        int_fields = {
            ("q_len",): (1, 16), ("hkv",): (1, MAX_KV_HEADS), ("group",): (1, 128),
            ("head_dim",): (16, 4096), ("block_size",): (16, 4096),
            ("max_partitions",): (0, MAX_CU), ("workgroup_budget",): (0, MAX_BUDGET),
            ("q_row_pad",): (0, 1 << 20), ("spare_blocks",): (1, 1 << 20),
            ("options", "cu"): (1, MAX_CU), ("options", "partition_size"): (1, 1 << 20),
            ("options", "uniform_partitions"): (0, 1 << 20), ("options", "sliding_window"): (0, I32_MAX),
        }
        for path, (lo, hi) in int_fields.items():
            field = ".".join(path)
            for label, v in BAD_TYPES + BAD_NUMBERS + [("real", 1.5), ("below", lo - 1), ("above", hi + 1),
                                                       ("2pow63", raw(str(2**63))), ("2pow64", raw(str(2**64))),
                                                       ("min-int64-minus-1", raw(str(-2**63 - 1)))]:
                if label == "null" and path == ("options", "cu"):
                    pass
                self.case_file(f"{field}.{label}", dumps(with_field(base, list(path), v)), "reject", [field])
        for path in [("head_dim",), ("block_size",)]:
            self.case_file(f"{path[0]}.not-multiple-of-16", dumps(with_field(base, list(path), 24)), "reject",
                           [path[0]])
        choice_fields = {("format",): "pav-case/3", ("cache", "layout"): "nchw", ("cache", "page_table"): "tree",
                         ("cache", "kv"): "interleaved", ("cache", "v_scales"): "per_row", ("v_layout",): "diagonal", ("q_dtype",): "f32",
                         ("cache_dtype",): "fp4_e2m1", ("scales",): "per_row", ("path",): "both",
                         ("options", "arch"): "sm80", ("options", "compute"): "fp4", ("options", "partial"): "fp4"}
        for path, bad in choice_fields.items():
            field = ".".join(path)
            for label, v in [("unknown", bad), ("number", 5), ("null", None), ("array", ["bf16"])]:
                self.case_file(f"{field}.{label}", dumps(with_field(base, list(path), v)), "reject", [field])
        for path in [("options", "alibi"), ("options", "sinks"), ("options", "q_prequantized")]:
            field = ".".join(path)
            for label, v in [("number", 1), ("string", "true"), ("null", None)]:
                self.case_file(f"{field}.{label}", dumps(with_field(base, list(path), v)), "reject", [field])
        for label, v in [("negative", -1.0), ("huge", 1e5), ("string", "0.1"), ("overflow", raw("1e999")),
                         ("bool", False)]:
            self.case_file(f"options.softmax_scale.{label}", dumps(with_field(base, ["options", "softmax_scale"], v)),
                           "reject", ["options.softmax_scale"])
        for label, v in [("negative", -1), ("2pow64", raw(str(2**64))), ("string", "1"), ("real", 1.5)]:
            self.case_file(f"seed.{label}", dumps(with_field(base, ["seed"], v)), "reject", ["seed"])
        self.case_file("name.number", dumps(with_field(base, ["name"], 5)), "reject", ["name"])

        # lens: the batch both sides of its limit, int32 both sides, element types.
        for label, v, field in [("empty", [], "lens"), ("4097", [1] * (MAX_BATCH + 1), "lens"),
                                ("above-int32", [5, I32_MAX + 1], "lens[1]"),
                                ("below-int32", [-2**31 - 1], "lens[0]"), ("real", [5, 2.5], "lens[1]"),
                                ("string", ["5"], "lens[0]"), ("nested", [[5]], "lens[0]"),
                                ("null", [None], "lens[0]"), ("object", {"0": 5}, "lens"),
                                ("overflow", [5, raw("1e999")], "lens[1]"), ("missing", None, "lens")]:
            doc = without_field(base, ["lens"]) if v is None else with_field(base, ["lens"], v)
            self.case_file(f"lens.{label}", dumps(doc), "reject", [field])

        # Sizes that would allocate for seconds (or overflow) are refused up front.
        for label, doc, field in [
            ("len-int32-max", with_field(base, ["lens"], [I32_MAX]), "lens"),
            ("len-104M", with_field(base, ["lens"], [104_000_000] * 4), "lens"),
            ("big-heads", with_field(with_field(with_field(base, ["hkv"], 256), ["group"], 128), ["head_dim"], 4096),
             "group"),
            ("spare-blocks", with_field(base, ["spare_blocks"], 1 << 20), "spare_blocks"),
            ("q-row-pad", with_field(with_field(base, ["q_row_pad"], 1 << 20), ["lens"], [1] * 4096), "q_row_pad"),
        ]:
            self.case_file(f"memory.{label}", dumps(doc), "reject", [field])

        # Inline tensors inconsistent with the shapes; negative ids.
        per_token = with_field(base, ["scales"], "per_token")
        for n in (1, 2, 3):
            doc = with_field(per_token, ["tensors"], {"k_scale": [0.03] * n, "v_scale": [0.03] * n})
            self.case_file(f"tensors.per-token-scale-{n}", dumps(doc), "reject", ["tensors.k_scale"])
        tensor_cases = [
            ("k-scale-alone", {"k_scale": [0.03]}, "tensors.v_scale"),
            ("scale-sizes-differ", {"k_scale": [0.03], "v_scale": [0.03, 0.03]}, "tensors.v_scale"),
            ("scale-overflows-float", {"k_scale": [1e39], "v_scale": [0.03]}, "tensors.k_scale[0]"),
            ("scale-nan", {"k_scale": [raw("NaN")], "v_scale": [0.03]}, "tensors.k_scale[0]"),
            ("scale-string", {"k_scale": ["0.03"], "v_scale": [0.03]}, "tensors.k_scale[0]"),
            ("q-bits-short", {"q_bits": [0, 1, 2]}, "tensors.q_bits"),
            ("q-bits-65536", {"q_bits": [65536]}, "tensors.q_bits[0]"),
            ("k-codes-256", {"k_codes": [256]}, "tensors.k_codes[0]"),
            ("k-codes-short", {"k_codes": [1, 2, 3]}, "tensors.k_codes"),
            ("block-table-negative", {"block_tables": [0, -1]}, "tensors.block_tables[1]"),
            ("block-table-ragged", {"block_tables": [0, 1, 2]}, "tensors.block_tables"),
            ("block-table-huge-id", {"block_tables": [I32_MAX, I32_MAX]}, "tensors.block_tables"),
            ("block-table-too-narrow", {"block_tables": [0, 1]}, "tensors.block_tables"),
            ("unknown-tensor", {"o_bits": [1]}, "tensors.o_bits"),
            ("not-an-object", [1, 2], "tensors"),
            ("empty-array", {"q_bits": []}, "tensors.q_bits"),
        ]
        for label, tensors, field in tensor_cases:
            self.case_file(f"tensors.{label}", dumps(with_field(base, ["tensors"], tensors)), "reject", [field])
        none_scales = with_field(with_field(base, ["scales"], "none"), ["tensors"], {"k_scale": [1.0], "v_scale": [1.0]})
        self.case_file("tensors.scale-with-none", dumps(none_scales), "reject", ["tensors.k_scale"])

        # Sentinels: shape, negative and out-of-batch ids.
        for label, v, field in [("not-array", "x", "sentinels"), ("short", [[0]], "sentinels[0]"),
                                ("long", [[0, 1, 2]], "sentinels[0]"), ("negative-seq", [[-1, 0]], "sentinels[0][0]"),
                                ("seq-past-batch", [[2, 0]], "sentinels[0][0]"),
                                ("negative-token", [[0, -1]], "sentinels[0][1]"),
                                ("token-past-int32", [[0, I32_MAX + 1]], "sentinels[0][1]"),
                                ("too-many", [[0, 0]] * (MAX_BATCH + 1), "sentinels")]:
            self.case_file(f"sentinels.{label}", dumps(with_field(base, ["sentinels"], v)), "reject", [field])

        # meta: the fields pav reads back.
        meta_cases = [
            ("not-object", [1], "meta", "reject"),
            ("property-number", {"property": 5}, "meta.property", "reject"),
            ("prior-lens-size", {"property": "planner", "prior_lens": [1]}, "meta.prior_lens", "reject"),
            ("prior-lens-type", {"property": "planner", "prior_lens": "1,2"}, "meta.prior_lens", "reject"),
            ("seq-negative", {"property": "batch-invariance", "seq": -1}, "meta.seq", "reject"),
            ("seq-past-batch", {"property": "batch-invariance", "seq": 2}, "meta.seq", "reject"),
            ("with-plan-string", {"property": "gate-mirror", "with_plan": "yes"}, "meta.with_plan", "reject"),
            ("variant-string", {"property": "gate-mirror", "variant": "0"}, "meta.variant", "reject"),
        ]
        for label, meta, field, expect in meta_cases:
            self.case_file(f"meta.{label}", dumps(with_field(base, ["meta"], meta)), expect, [field])
        # Semantic meta the property itself refuses: replay and fuzz --replay read meta, gate does not.
        for label, meta, field in [("violate-unknown", {"property": "gate-mirror", "violate": "nope"}, "meta.violate"),
                                   ("variant-out-of-range",
                                    {"property": "gate-mirror", "violate": "block_size", "variant": 99},
                                    "meta.variant")]:
            self.case_file(f"meta.{label}", dumps(with_field(base, ["meta"], meta)),
                           {"replay": "reject", "fuzz": "reject", "gate": "ok"}, [field] * 0 + [field],
                           commands=("replay", "fuzz"))

        # Calls the kernel must refuse: never run on a wrong buffer, never pass.
        partial = with_field(base, ["options", "partial"], "fp8_e4m3fn")
        self.case_file("refuse.partial-fp8", dumps(partial), {"replay": "refuse", "fuzz": "refuse", "gate": "ok"},
                       ["scratch_dtype"])
        self.case_file("refuse.partial-fp8-uniform", dumps(with_field(partial, ["path"], "uniform")),
                       {"replay": "refuse", "fuzz": "refuse", "gate": "ok"}, ["scratch_dtype"])
        split = with_field(with_field(base, ["path"], "uniform"), ["options", "uniform_partitions"], 1 << 20)
        self.case_file("refuse.uniform-partitions-2pow20", dumps(split),
                       {"replay": "refuse", "fuzz": "refuse", "gate": "ok"}, ["partition_count"])
        ceiling = with_field(base, ["max_partitions"], 9)  # > cu 8
        self.case_file("max-partitions-above-cu", dumps(ceiling), {"replay": "reject", "fuzz": "refuse", "gate": "ok"},
                       ["max_partitions"])

        # Structure: unknown fields, duplicates, nesting, truncation, garbage.
        self.case_file("unknown-field", dumps(with_field(base, ["lenz"], [1])), "reject", ["lenz"])
        self.case_file("unknown-option", dumps(with_field(base, ["options", "cus"], 8)), "reject", ["options.cus"])
        text = dumps(base)
        self.case_file("duplicate-key", text[:-1] + ', "hkv": 2}', "reject", ["hkv"])
        self.case_file("top-level-array", "[" + text + "]", "reject", ["expected an object"])
        self.case_file("empty", "", "reject", ["malformed JSON"])
        self.case_file("whitespace", " \n\t ", "reject", ["malformed JSON"])
        self.case_file("trailing-garbage", text + " x", "reject", ["malformed JSON"])
        for cut in sorted({1, 2, len(text) // 3, len(text) // 2, len(text) - 2, len(text) - 1}):
            self.case_file(f"truncated-at-{cut}", text[:cut], "reject", ["malformed JSON"])
        self.case_file("deep-100k-lens", text.replace('"lens": [5, 300]', '"lens": ' + "[" * 100000 + "]" * 100000),
                       "reject", ["nested deeper than 64"])
        self.case_file("deep-100k-meta", text[:-1] + ', "meta": ' + '{"a":' * 100000 + "1" + "}" * 100000 + "}",
                       "reject", ["nested deeper than 64"])
        self.case_file("deep-65-meta", text[:-1] + ', "meta": ' + '{"a":' * (MAX_DEPTH) + "1" + "}" * MAX_DEPTH + "}",
                       "reject", ["nested deeper than 64"])
        self.case_file("deep-63-meta", text[:-1] + ', "meta": ' + '{"a":' * (MAX_DEPTH - 2) + "1" +
                       "}" * (MAX_DEPTH - 2) + "}", "ok", (), commands=("replay",))
        big = "y" * 50_000_000
        self.case_file("huge-format-string", text.replace('"pav-case/1"', '"' + big + '"'), "reject", ["format"],
                       commands=("replay",))
        self.case_file("huge-unknown-key", text[:-1] + ', "' + big + '": 1}', "reject", ["unknown field"],
                       commands=("replay",))
        self.case_file("invalid-utf8", text.replace('"pav-case/1"', '"pav-\xff\xfe"').encode("latin-1"), "reject",
                       ["format"])
        self.case_file("nul-bytes", text.replace('"plain"', '"pl\u0000ain"'), "reject", ["v_layout"])
        # A sequence (pav-case/2): earlier calls, each a case of its own, 1 to 64 of them.
        def sequence(prelude, fmt="pav-case/2"):
            return dumps(dict(base, format=fmt, prelude=prelude))
        self.case_file("prelude.under-format-1", sequence([base], "pav-case/1"), "reject", ["prelude"])
        self.case_file("prelude.empty", sequence([]), "reject", ["prelude"])
        self.case_file(f"prelude.{MAX_PRELUDE + 1}-calls", sequence([base] * (MAX_PRELUDE + 1)), "reject", ["prelude"])
        self.case_file("prelude.not-an-array", sequence({"lens": [1]}), "reject", ["prelude"])
        self.case_file("prelude.call-not-an-object", sequence([7]), "reject", ["prelude[0]"])
        self.case_file("prelude.nested", sequence([dict(base, prelude=[base])]), "reject", ["prelude"])
        self.case_file("prelude.bad-call-field", sequence([base, dict(base, q_len=0)]), "reject", ["prelude[1]", "q_len"])
        self.case_file(f"prelude.{MAX_PRELUDE}-calls", sequence([base] * MAX_PRELUDE), "ok", (), commands=("replay",))
        # low_spare_blocks (a cache past element 2^31, for kernels that declare
        # large_cache). The count pav writes, 2^31 / 1024 for this page, makes a
        # 4.3 GB case: past the 1 GiB of a case on pav's kernels and in pav gate
        # (it was built: 12-64 s, 4.5-5 GB). Any other count is refused by the reader.
        low = 2 ** 31 // (base["hkv"] * base["head_dim"] * base["block_size"])
        self.case_file("low-spare-blocks.large", dumps(dict(base, low_spare_blocks=low)), "reject",
                       ["low_spare_blocks", "more than the limit of 1073741824", "large_cache"])
        for label, v in [("one", 1), ("one-more", low + 1), ("2pow31", 2 ** 31)]:
            self.case_file(f"low-spare-blocks.{label}", dumps(dict(base, low_spare_blocks=v)), "reject",
                           ["low_spare_blocks", f"must be 0 or {low}"])
        self.case_file("raw-nul", b"\x00" * 64, "reject", ["malformed JSON"])
        garbage = bytes(self.rng.randrange(256) for _ in range(4096))
        self.case_file("binary-garbage", garbage, "reject", ["malformed JSON"])
        self.case_file("bom", "\ufeff" + text, "ok", (), commands=("replay",))
        # A 65 MiB file is refused by its size, before it is read.
        p = self.path("case/oversize.json")
        with open(p, "wb") as f:
            f.truncate(MAX_JSON_FILE + 1)
        for cmd, args in [("replay", ["replay", p]), ("gate", ["gate", p]), ("fuzz", ["fuzz", "--replay", p])]:
            self.add(f"case.oversize.{cmd}", args, "reject", ["more than the limit"], timeout=10)

    # ---- files that are not files ---------------------------------------------------------

    def special_paths(self):
        d = self.path("a-directory")
        os.makedirs(d, exist_ok=True)
        missing = self.path("no-such-file.json")
        fifo = self.path("a-fifo")
        os.mkfifo(fifo)
        good_jsonl = self.write("special/good.jsonl", '{"id": 1, "correct": true}\n')
        good_bench = self.write("special/good.json", '{"latency_ms": [1, 2]}')
        for label, p in [("directory", d), ("missing", missing), ("fifo", fifo), ("dev-null", "/dev/null")]:
            for cmd, args in [("replay", ["replay", p]), ("gate", ["gate", p]), ("fuzz", ["fuzz", "--replay", p]),
                              ("drift", ["drift", "--sweep", p, "--list"]),
                              ("mcnemar", ["mcnemar", good_jsonl, p]),
                              ("bench-compare", ["bench-compare", good_bench, p]),
                              ("trace-stats", ["trace-stats", p])]:
                self.add(f"path.{label}.{cmd}", args, "reject", [os.path.basename(p)], timeout=10)

    # ---- drift sweeps ---------------------------------------------------------------------

    def sweep_docs(self):
        base = BASE_SWEEP

        def sweep(name, doc_text, expect, mentions):
            p = self.write("sweep/" + name + ".json", doc_text)
            self.add(f"sweep.{name}", ["drift", "--sweep", p, "--list"], expect, mentions)

        sweep("valid", dumps(base), "ok", ())
        int_fields = {("cu",): (1, MAX_CU), ("head_dim",): (64, 1024), ("block_size",): (16, 128), ("q_len",): (1, 16),
                      ("seeds",): (2, 10000), ("workgroup_budget",): (0, MAX_BUDGET),
                      ("seed",): (0, 2**62), ("lengths_seed",): (0, 2**62), ("shorter", "min_len"): (1, 2**30)}
        for path, (lo, hi) in int_fields.items():
            field = ".".join(path)
            for label, v in BAD_TYPES + BAD_NUMBERS + [("real", 1.5), ("below", lo - 1), ("above", hi + 1),
                                                       ("2pow64", raw(str(2**64)))]:
                sweep(f"{field}.{label}", dumps(with_field(base, list(path), v)), "reject", [field])
        real_fields = {("kv_scale",): (1e-6, 1e6), ("q_std",): (1e-6, 1e3), ("control_epsilon",): (0, 1e6),
                       ("shorter", "ratio_p50"): (1.0, 1e6), ("growth", "alpha"): (1e-12, 0.5),
                       ("growth", "min_relative_growth"): (0.0, 100.0)}
        for path, (lo, hi) in real_fields.items():
            field = ".".join(path)
            for label, v in BAD_TYPES + BAD_NUMBERS + [("below", lo - 1 if lo == 0 else lo / 2), ("above", hi * 2)]:
                sweep(f"{field}.{label}", dumps(with_field(base, list(path), v)), "reject", [field])
        for key, bad in [("contexts", [0]), ("contexts", [I32_MAX + 1]), ("batches", [0]),
                         ("batches", [MAX_BATCH + 1]), ("ceilings", [8]), ("ceilings", [32, 8]),
                         ("ceilings", [8, 33]), ("partials", ["fp8_e4m3fn"]), ("partials", ["f32", "f32"]),
                         ("heads", [{"hkv": 0, "group": 1}]), ("heads", [{"hkv": 1}]),
                         ("heads", [{"hkv": 1, "group": 1, "x": 1}]), ("contexts", []), ("contexts", "1000"),
                         ("contexts", [raw("1e999")]), ("contexts", [[1000]])]:
            sweep(f"{key}.{self.rng.randrange(10**9)}", dumps(with_field(base, [key], bad)), "reject", [key])
        for key, bad in [("arch", "gfx90a"), ("arch", 5), ("q_dtype", "f32"), ("reference_precision", "fp16"),
                         ("reference_precision", 5), ("uniform_baseline", 1), ("name", ""), ("name", 5),
                         ("description", 5), ("format", "pav-drift-sweep/2"), ("shorter", [1]),
                         ("growth", "x"), ("bogus", 1)]:
            sweep(f"{key}.{self.rng.randrange(10**9)}", dumps(with_field(base, [key], bad)), "reject", [key])
        sweep("missing-contexts", dumps(without_field(base, ["contexts"])), "reject", ["contexts"])
        # A sweep whose cells could never be held in memory is refused, not started.
        huge = with_field(with_field(base, ["contexts"], [I32_MAX]), ["batches"], [MAX_BATCH])
        p = self.write("sweep/huge-cells.json", dumps(huge))
        self.add("sweep.huge-cells.run", ["drift", "--sweep", p, "--no-progress"], "reject", ["contexts"], timeout=20)
        text = dumps(base)
        sweep("deep", text[:-1] + ', "description": ' + "[" * 100000 + "]" * 100000 + "}", "reject",
              ["nested deeper than 64"])
        sweep("duplicate-key", text[:-1] + ', "cu": 64}', "reject", ["cu"])
        sweep("truncated", text[: len(text) // 2], "reject", ["malformed JSON"])
        sweep("garbage", bytes(self.rng.randrange(256) for _ in range(2048)), "reject", ["malformed JSON"])

    # ---- JSONL accuracy runs (mcnemar) ------------------------------------------------------

    def jsonl_docs(self):
        good = self.write("jsonl/a.jsonl", "".join(json.dumps({"id": f"q{i}", "correct": i % 3 != 0}) + "\n"
                                                   for i in range(20)))
        good2 = self.write("jsonl/b.jsonl", "".join(json.dumps({"id": f"q{i}", "correct": i % 4 != 0}) + "\n"
                                                    for i in range(20)))
        self.add("mcnemar.valid", ["mcnemar", good, good2], "ok")

        def bad(name, lines, mentions):
            p = self.write("jsonl/" + name + ".jsonl", lines)
            self.add(f"mcnemar.{name}", ["mcnemar", good, p], "reject", [os.path.basename(p)] + mentions)

        rows = [json.dumps({"id": f"q{i}", "correct": True}) for i in range(20)]

        def replace_row(i, text):
            r = list(rows)
            r[i] = text
            return "\n".join(r) + "\n"

        for label, v in [("float", 1.5), ("bool", True), ("null", None), ("array", [1]), ("object", {"a": 1}),
                         ("overflow", raw("1e999"))]:
            bad(f"id-{label}", replace_row(3, dumps({"id": v, "correct": True})), [":4: id"])
        for label, v in [("int", 1), ("string", "yes"), ("null", None), ("overflow", raw("1e999"))]:
            bad(f"correct-{label}", replace_row(3, dumps({"id": "q3", "correct": v})), [":4: correct"])
        bad("missing-id", replace_row(5, '{"correct": true}'), [":6: id"])
        bad("missing-correct", replace_row(5, '{"id": "q5"}'), [":6: correct"])
        bad("duplicate-id", replace_row(5, '{"id": "q4", "correct": true}'), [":6: id"])
        big = "z" * 10_000_000  # under the line limit: read, refused, quoted short
        bad("huge-duplicate-id", json.dumps({"id": big, "correct": True}) + "\n" +
            json.dumps({"id": big, "correct": False}) + "\n", [":2: id"])
        bad("huge-unknown-id", "\n".join(rows[:19] + [json.dumps({"id": big, "correct": True})]) + "\n", ["id"])
        bad("overflow-in-ignored-field", replace_row(2, '{"id": "q2", "correct": true, "score": 1e999}'),
            [":3: score"])
        bad("deep-in-ignored-field", replace_row(2, '{"id": "q2", "correct": true, "x": ' + "[" * 100000 +
                                                 "]" * 100000 + "}"), [":3: x", "nested deeper than 64"])
        bad("duplicate-key", replace_row(2, '{"id": "q2", "correct": true, "correct": false}'), [":3: correct"])
        bad("truncated-line", replace_row(7, '{"id": "q7", "corr'), [":8:", "malformed JSON"])
        bad("not-object", replace_row(0, "[1, 2]"), [":1:", "expected an object"])
        bad("empty", "\n\n", ["empty file"])
        bad("garbage", bytes(self.rng.randrange(256) for _ in range(2048)), ["malformed JSON"])
        bad("nul-line", replace_row(1, "\x00\x00"), [":2:", "malformed JSON"])
        p = self.path("jsonl/long-line.jsonl")
        with open(p, "w") as f:
            f.write('{"id": "q0", "correct": true, "pad": "' + "p" * (MAX_JSONL_LINE + 16) + '"}\n')
        self.add("mcnemar.long-line", ["mcnemar", good, p], "reject", ["long-line.jsonl:1", "line longer than"])
        # Options.
        for label, args, mention in [
            ("counts-negative", ["--counts", "-1,2"], "--counts"),
            ("counts-overflow", ["--counts", f"{2**63 - 1},1"], "--counts"),
            ("counts-2pow63", ["--counts", f"{2**63},1"], "--counts"),
            ("counts-real", ["--counts", "1.5,2"], "--counts"),
            ("counts-nan", ["--counts", "nan,1"], "--counts"),
            ("counts-one", ["--counts", "5"], "--counts"),
            ("counts-three", ["--counts", "1,2,3"], "--counts"),
            ("counts-empty", ["--counts", ""], "--counts"),
            ("confidence-nan", [good, good2, "--confidence", "nan"], "confidence"),
            ("confidence-zero", [good, good2, "--confidence", "0"], "confidence"),
            ("confidence-one", [good, good2, "--confidence", "1"], "confidence"),
            ("confidence-inf", [good, good2, "--confidence", "inf"], "confidence"),
            ("variant-count", [good, good2, good, "--variant", "A,B"], "variant"),
            ("one-file", [good], "two files"),
        ]:
            self.add(f"mcnemar.option.{label}", ["mcnemar"] + args, "reject", [mention])

    # ---- bench runs (bench-compare) ---------------------------------------------------------

    def bench_docs(self):
        good = self.write("bench/a.json", json.dumps({"latency_ms": [10.0 + i % 7 for i in range(50)]}))
        good2 = self.write("bench/b.json", json.dumps({"latency_ms": [11.0 + i % 5 for i in range(50)]}))
        self.add("bench.valid", ["bench-compare", good, good2, "--resamples", "200"], "ok")

        def bad(name, text, mentions):
            p = self.write("bench/" + name + ".json", text)
            self.add(f"bench.{name}", ["bench-compare", good, p, "--resamples", "200"], "reject",
                     [os.path.basename(p)] + mentions)

        for label, v, field in [("string", ["1"], "latency_ms[0]"), ("zero", [1, 0], "latency_ms[1]"),
                                ("negative", [-1], "latency_ms[0]"), ("overflow", [raw("1e999")], "latency_ms[0]"),
                                ("nan", [raw("NaN")], "latency_ms[0]"), ("null", [None], "latency_ms[0]"),
                                ("nested", [[1]], "latency_ms[0]"), ("empty", [], "latency_ms"),
                                ("not-array", 5, "latency_ms")]:
            bad(f"latency-{label}", dumps({"latency_ms": v}), [field])
        for label, v in [("negative", -1), ("real", 2.5), ("2pow63", raw(str(2**63))), ("string", "5")]:
            bad(f"completed-{label}", dumps({"latency_ms": [1], "completed": v}), ["completed"])
        for label, v in [("zero", 0), ("negative", -1), ("string", "5"), ("overflow", raw("1e999"))]:
            bad(f"duration-{label}", dumps({"latency_ms": [1], "duration_s": v}), ["duration_s"])
        bad("missing", "{}", ["latency_ms"])
        bad("deep", '{"latency_ms": [1], "x": ' + "[" * 100000 + "]" * 100000 + "}", ["nested deeper than 64"])
        bad("truncated", '{"latency_ms": [1, 2', ["malformed JSON"])
        bad("garbage", bytes(self.rng.randrange(256) for _ in range(1024)), ["malformed JSON"])
        for label, args, mention in [
            ("seed-negative", ["--seed", "-1"], "--seed"),
            ("seed-text", ["--seed", "x"], "--seed"),
            ("resamples-zero", ["--resamples", "0"], "--resamples"),
            ("resamples-negative", ["--resamples", "-5"], "--resamples"),
            ("confidence-nan", ["--confidence", "nan"], "--confidence"),
            ("confidence-one", ["--confidence", "1"], "--confidence"),
            ("max-count-diff-nan", ["--max-count-diff", "nan"], "--max-count-diff"),
            ("max-count-diff-negative", ["--max-count-diff", "-0.5"], "--max-count-diff"),
            ("max-count-diff-two", ["--max-count-diff", "2"], "--max-count-diff"),
        ]:
            self.add(f"bench.option.{label}", ["bench-compare", good, good2] + args, "reject", [mention])
        # The bootstrap's work, resamples x samples, is limited (kMaxBootstrapDraws,
        # 2^30): past it the run is refused before the first draw. Two runs of
        # 2,000,000 samples at the default 2000 resamples took 6 minutes.
        many = self.write("bench/many.json", json.dumps({"latency_ms": [10.0 + i % 7 for i in range(300000)]}))
        self.add("bench.draws.samples", ["bench-compare", many, many], "reject",
                 ["bootstrap draws, more than the limit of 1073741824", "--resamples 1789 or fewer"], timeout=10)
        some = self.write("bench/some.json", json.dumps({"latency_ms": [10.0 + i % 7 for i in range(600)]}))
        self.add("bench.draws.resamples", ["bench-compare", some, some, "--resamples", "1000000"], "reject",
                 ["bootstrap draws, more than the limit of 1073741824", "--resamples 894784 or fewer"], timeout=10)

    # ---- traces (trace-stats) ---------------------------------------------------------------

    def trace_docs(self):
        good = self.write("trace/good.jsonl", '{"context_lens": [100, 5000]}\n{"context_lens": [7]}\n')
        self.add("trace.valid", ["trace-stats", good], "ok")

        def bad(name, text, mentions):
            p = self.write("trace/" + name + ".jsonl", text)
            self.add(f"trace.{name}", ["trace-stats", p], "reject", [os.path.basename(p)] + mentions)

        for label, v, field in [("above-int32", [I32_MAX + 1], "context_lens[0]"),
                                ("below-int32", [-2**31 - 1], "context_lens[0]"),
                                ("real", [1, 2.5], "context_lens[1]"), ("string", ["1"], "context_lens[0]"),
                                ("overflow", [raw("1e999")], "context_lens[0]"), ("empty", [], "context_lens"),
                                ("not-array", {"a": 1}, "context_lens"), ("null", None, "context_lens")]:
            bad(f"lens-{label}", '{"context_lens": [1]}\n' + dumps({"context_lens": v}) + "\n", [":2: " + field])
        bad("missing", '{"lens": [1]}\n', [":1: context_lens"])
        bad("deep", '{"context_lens": ' + "[" * 100000 + "]" * 100000 + "}\n", ["nested deeper than 64"])
        bad("garbage", bytes(self.rng.randrange(256) for _ in range(1024)), ["malformed JSON"])
        bad("empty", "", ["empty file"])
        for label, args, mention in [
            ("budget-zero", ["--budget", "0"], "--budget"),
            ("budget-negative", ["--budget", "-1"], "--budget"),
            ("budget-2pow63", ["--budget", str(2**63)], "--budget"),
            ("budget-nan", ["--budget", "nan"], "--budget"),
            ("max-partitions-zero", ["--max-partitions", "0"], "--max-partitions"),
            ("max-partitions-huge", ["--max-partitions", str(2**63)], "--max-partitions"),
        ]:
            self.add(f"trace.option.{label}", ["trace-stats", good] + args, "reject", [mention])

    # ---- options of the other commands ------------------------------------------------------

    def option_cases(self):
        case = self.write("opt/case.json", dumps(BASE_CASE))
        plan = ["plan", "--lengths", "5,0,9000", "--kv-heads", "1", "--cu", "8"]
        self.add("plan.valid", plan, "ok")
        self.add("plan.valid-limits", ["plan", "--lengths", ",".join([str(I32_MAX)] * MAX_BATCH), "--kv-heads",
                                       str(MAX_KV_HEADS), "--cu", str(MAX_CU), "--budget", str(MAX_BUDGET),
                                       "--json"], "ok", timeout=60)

        def plan_opt(label, replace, mention):
            args = list(plan)
            for k, v in replace.items():
                if k in args:
                    args[args.index(k) + 1] = v
                else:
                    args += [k, v]
            self.add(f"plan.option.{label}", args, "reject", [mention])

        for label, v in [("empty", ""), ("text", "a"), ("above-int32", str(I32_MAX + 1)), ("trailing-comma", "5,"),
                         ("real", "5.5"), ("batch-4097", ",".join(["1"] * (MAX_BATCH + 1))), ("nan", "nan")]:
            plan_opt(f"lengths-{label}", {"--lengths": v}, "lengths")
        for label, v in [("zero", "0"), ("negative", "-1"), ("above", str(MAX_KV_HEADS + 1)), ("2pow63", str(2**63)),
                         ("text", "x")]:
            plan_opt(f"kv-heads-{label}", {"--kv-heads": v}, "kv")
        for label, v in [("zero", "0"), ("above", str(MAX_CU + 1)), ("2e8", "200000000"), ("2pow63", str(2**63)),
                         ("nan", "nan")]:
            plan_opt(f"cu-{label}", {"--cu": v}, "cu")
        plan_opt("max-partitions-above-cu", {"--max-partitions": "9"}, "--max-partitions")
        plan_opt("max-partitions-negative", {"--max-partitions": "-1"}, "max")
        for label, v in [("empty", ""), ("negative", "-1"), ("above", str(MAX_BUDGET + 1)), ("2pow63", str(2**63))]:
            plan_opt(f"budget-{label}", {"--budget": v}, "budget")
        plan_opt("policy-unknown", {"--policy": "greedy"}, "policy")
        # The planner's largest products: the longest batch on the biggest part, at the limits.
        self.add("plan.huge-lengths-huge-cu", ["plan", "--lengths", ",".join([str(I32_MAX)] * MAX_BATCH), "--kv-heads",
                                                "1", "--cu", "200000000"], "reject", ["cu"])

        fuzz = ["fuzz", "--backend", "cpu", "--property", "planner", "--cases", "1", "--quiet"]
        for label, extra, mention in [
            ("minutes-nan", ["--minutes", "nan"], "--minutes"),
            ("minutes-inf", ["--minutes", "inf"], "--minutes"),
            ("minutes-negative", ["--minutes", "-1"], "--minutes"),
            ("shrink-minutes-nan", ["--shrink-minutes", "nan"], "--shrink-minutes"),
            ("cases-zero", ["--cases", "0"], "--cases"),
            ("seed-negative", ["--seed", "-1"], "--seed"),
            ("seed-2pow64", ["--seed", str(2**64)], "--seed"),
            ("jobs-zero", ["--jobs", "0"], "--jobs"),
            ("shard-bad", ["--shard", "1/1"], "--shard"),
            ("shard-text", ["--shard", "x"], "--shard"),
            ("property-unknown", ["--property", "nope"], "--property"),
            ("backend-unknown", ["--backend", "tpu"], "--backend"),
        ]:
            self.add(f"fuzz.option.{label}", fuzz + extra, "reject", [mention], timeout=30)
        verify = ["verify", "--backend", "cpu", "--plan-cases", "1", "--decode-cases", "1", "--quiet"]
        for label, extra, mention in [
            ("seed-negative", ["--seed", "-1"], "--seed"),
            ("seed-text", ["--seed", "x"], "--seed"),
            ("plan-cases-zero", ["--plan-cases", "0"], "--plan-cases"),
            ("decode-cases-zero", ["--decode-cases", "0"], "--decode-cases"),
            ("backend-unknown", ["--backend", "tpu"], "--backend"),
        ]:
            self.add(f"verify.option.{label}", verify + extra, "reject", [mention])
        for label, extra, mention in [
            ("planned-decode-2", ["--planned-decode", "2"], "--planned-decode"),
            ("work-plan-text", ["--work-plan", "yes"], "--work-plan"),
            ("site-unknown", ["--site", "middle"], "--site"),
        ]:
            self.add(f"gate.option.{label}", ["gate", case] + extra, "reject", [mention])
        self.add("replay.option.path-unknown", ["replay", case, "--path", "diagonal"], "reject", ["--path"])
        sweep = self.write("opt/sweep.json", dumps(BASE_SWEEP))
        for label, extra, mention in [
            ("seeds-one", ["--seeds", "1"], "--seeds"),
            ("max-context-zero", ["--max-context", "0"], "--max-context"),
            ("cells-unknown", ["--cells", "999k/b9"], "--cells"),
        ]:
            self.add(f"drift.option.{label}", ["drift", "--sweep", sweep, "--list"] + extra, "reject", [mention])
        self.add("cli.unknown-command", ["frobnicate"], "reject", ["unknown command"])
        self.add("cli.no-command", [], "reject", [])

    # ---- shard reports (report merge, fuzz --resume) ------------------------------------------

    def real_reports(self):
        """Two shards of one campaign written by the pav under test, and a resumed segment."""
        if hasattr(self, "_reports"):
            return self._reports
        made = []
        for i in range(2):
            p = self.path(f"report/real-s{i}.json")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            r = self.run_pav(["fuzz", "--backend", "cpu", "--property", "planner,gate-mirror", "--cases", "3",
                              "--seed", "11", "--shard", f"{i}/2", "--quiet", "--save", self.path("report/ce"),
                              "--report", p])
            if r.returncode != 0:
                raise RuntimeError(f"pav fuzz could not write the corpus's shard report {i}/2 (exit {r.returncode}): "
                                   + (r.stderr or r.stdout)[:400].decode("utf-8", "replace"))
            with open(p) as f:
                made.append(json.load(f))
        self._reports = made
        return made

    def report_docs(self):
        s0, s1 = self.real_reports()
        p0 = self.write("report/s0.json", json.dumps(s0, indent=1))

        def merge(name, doc_or_text, expect, mentions, extra=(), timeout=30.0):
            text = doc_or_text if isinstance(doc_or_text, (str, bytes)) else dumps(doc_or_text)
            p = self.write("report/" + name + ".json", text)
            self.add(f"report.{name}", ["report", "merge", p0, p] + list(extra), expect, mentions, timeout)
            return p

        def stopped(r):
            r = copy.deepcopy(r)
            r["interrupted"], r["signal"], r["passed"], r["exit_code"] = True, "SIGTERM", False, 3
            r["runs"][-1]["interrupted"] = True
            return r

        def failed(r):
            r = copy.deepcopy(r)
            first = r["properties"][0]
            run = r["runs"][0]
            run["passed"] = False
            run["failure"] = {"seed": 12, "size": 1, "first_message": "m", "message": "m", "shrunk_case": "d",
                              "reproduced": True, "case_id": first + "-0123456789ab", "shrink_hit_limit": False,
                              "saved": None, "save_error": None, "reproduce": "pav fuzz"}
            r["runs"] = r["runs"][:1]
            for q in r["properties"][1:]:
                r["resume"][q] = r["resumed"][q]
            r["passed"], r["exit_code"] = False, 1
            return r

        merge("valid", s1, "ok", ())
        merge("valid-json", s1, "ok", (), extra=["--json"])
        # A file name that is not UTF-8 goes into the fleet report replaced, never thrown on.
        odd = self.write(os.fsdecode(b"report/s1-\xff\xfe.json"), dumps(s1))
        self.add("report.file-name-not-utf8", ["report", "merge", p0, odd, "--json"], "ok")
        self.add("report.file-name-not-utf8-text", ["report", "merge", p0, odd], "ok")

        # Consistent reports that are not a pass: exit 1, the shard named with why.
        stop = merge("stopped", stopped(s1), "fail", ["shard 1/2", "did not complete", "SIGTERM"])
        before = stopped(s1)
        before["runs"] = []
        before["resume"] = copy.deepcopy(before["resumed"])
        merge("stopped-before-first-property", before, "fail", ["shard 1/2", "did not complete", "not reached"])
        merge("failure", failed(s1), "fail", ["shard 1/2", "found a failure"])
        merge("failure-json", failed(s1), "fail", ["shard 1/2", "found a failure"], extra=["--json"])
        huge_host = stopped(s1)
        huge_host["host"] = "h" * 10_000_000
        merge("stopped-huge-host", huge_host, "fail", ["shard 1/2", "did not complete"])
        # A stopped segment continued by --resume: the shard completes with the later segment.
        cont = self.path("report/stopped-continued.json")
        r = self.run_pav(["fuzz", "--backend", "cpu", "--resume", stop, "--cases", "2", "--quiet", "--save",
                          self.path("report/ce"), "--report", cont])
        if r.returncode != 0:
            raise RuntimeError(f"pav fuzz --resume of a stopped report exited {r.returncode}: "
                               + (r.stderr or r.stdout)[:400].decode("utf-8", "replace"))
        self.add("report.stopped-then-resumed", ["report", "merge", p0, stop, cont], "ok")
        self.add("report.stopped-then-resumed-reversed", ["report", "merge", cont, p0, stop], "ok")

        # Reports that contradict themselves: exit 2, naming the file and field.
        contradictions = [
            ("interrupted-exit-0", lambda r: r.update(interrupted=True), ["exit_code"]),
            ("exit-137", lambda r: r.update(exit_code=137), ["exit_code", "137"]),
            ("exit-137-passed-false", lambda r: r.update(exit_code=137, passed=False), ["exit_code", "137"]),
            ("exit-2", lambda r: r.update(exit_code=2, passed=False), ["exit_code"]),
            ("exit-3-not-stopped", lambda r: r.update(exit_code=3, passed=False), ["exit_code"]),
            ("passed-false-exit-0", lambda r: r.update(passed=False), ["passed"]),
            ("runs-empty", lambda r: r.update(runs=[]), ["resume.planner"]),
            ("runs-empty-streams-unmoved", lambda r: r.update(runs=[], resume=copy.deepcopy(r["resumed"])),
             ["runs", "no run of property"]),
            ("runs-swapped", lambda r: r.update(runs=r["runs"][::-1]), ["runs[0].property"]),
            ("runs-repeated", lambda r: r.update(runs=r["runs"] + r["runs"][:1]), ["runs"]),
            ("cases-negative", lambda r: r["runs"][0].update(cases=-1), ["runs[0].cases"]),
            ("cases-per-job-negative", lambda r: r["runs"][0].update(cases_per_job=[-3]),
             ["runs[0].cases_per_job[0]"]),
            ("cases-not-the-sum", lambda r: r["runs"][0].update(cases=2), ["runs[0].cases", "cases_per_job"]),
            ("cases-not-the-stream", lambda r: r["runs"][0].update(cases=2, cases_per_job=[2]),
             ["runs[0].cases", "seed stream"]),
            ("budget-not-spent", lambda r: r["budget"].update(cases_per_property=4), ["runs[0].cases", "budget"]),
            ("budget-none", lambda r: r["budget"].update(cases_per_property=None, minutes=None), ["budget"]),
            ("seeds-from", lambda r: r["runs"][0]["seeds"]["from"].update(next_case=1), ["runs[0].seeds.from"]),
            ("seeds-to", lambda r: r["runs"][0]["seeds"]["to"].update(next_case=2), ["runs[0].seeds.to"]),
            ("run-interrupted-alone", lambda r: r["runs"][0].update(interrupted=True), ["interrupted"]),
            ("run-passed-false", lambda r: r["runs"][0].update(passed=False), ["runs[0].passed"]),
            ("wall-negative", lambda r: r.update(wall_seconds=-1), ["wall_seconds"]),
            ("jobs-zero", lambda r: r.update(jobs=0), ["jobs"]),
            ("properties-twice", lambda r: r.update(properties=["planner", "planner"]), ["properties"]),
        ]
        for label, change, mentions in contradictions:
            doc = copy.deepcopy(s1)
            change(doc)
            merge(f"contradiction.{label}", doc, "reject", [os.path.basename(self.path(f"report/contradiction.{label}.json"))] + mentions)
        for label, change, mentions in [
            ("failure-exit-0", lambda r: r.update(exit_code=0, passed=True), ["exit_code"]),
            ("failure-run-passed", lambda r: r["runs"][0].update(passed=True), ["runs[0].passed"]),
            ("failure-case-id-null", lambda r: r["runs"][0]["failure"].update(case_id=None), ["case_id"]),
            ("failure-seed-negative", lambda r: r["runs"][0]["failure"].update(seed=-1), ["failure.seed"]),
            ("failure-interrupted", lambda r: (r["runs"][0].update(interrupted=True), r.update(interrupted=True)),
             ["runs[0].interrupted"]),
        ]:
            doc = failed(s1)
            change(doc)
            merge(f"contradiction.{label}", doc, "reject", mentions)

        # Every field of its type.
        fields = {"format": "string", "pav_version": "string", "source_commit": "string", "backend": "string",
                  "host": "string", "device": "string", "base_seed": "int", "shard_index": "int",
                  "shard_count": "int", "jobs": "int", "exit_code": "int", "wall_seconds": "number",
                  "cpu_seconds": "number", "passed": "bool", "interrupted": "bool", "properties": "array",
                  "runs": "array", "resumed": "object", "resume": "object", "budget": "object", "kernel": "kernel"}
        run_fields = {"property": "string", "cases": "int", "seconds": "number", "cpu_seconds": "number",
                      "cases_per_job": "array", "interrupted": "bool", "passed": "bool", "seeds": "object"}
        valid_as = {"string": {"string"}, "int": set(), "number": set(), "bool": {"bool"}, "array": {"array"},
                    "object": {"object"}, "kernel": {"object", "null"}}
        for path, kind in [([k], v) for k, v in fields.items()] + [(["runs", 0, k], v) for k, v in run_fields.items()]:
            field = ".".join(str(x) for x in path).replace("runs.0.", "runs[0].")
            for label, v in BAD_TYPES + BAD_NUMBERS + [("negative", -1)]:
                if label in valid_as[kind] or (label == "negative" and kind not in ("int", "number")):
                    continue
                doc = copy.deepcopy(s1)
                node = doc
                for k in path[:-1]:
                    node = node[k]
                node[path[-1]] = v
                mention = "format" if field == "format" else field
                merge(f"type.{field}.{label}", doc, "reject", [mention])
            doc = copy.deepcopy(s1)
            node = doc
            for k in path[:-1]:
                node = node[k]
            del node[path[-1]]
            merge(f"missing.{field}", doc, "reject", [path[-1] if isinstance(path[-1], str) else field])

        # The kernel field nested past the reader's limit (recursion) and other structure damage.
        text = dumps(s1)
        for label, depth in [("100k", 100000), ("65", MAX_DEPTH)]:
            deep = text.replace('"kernel": null', '"kernel": ' + '{"a":' * depth + "1" + "}" * depth)
            assert deep != text
            merge(f"kernel-deep-{label}", deep, "reject", ["nested deeper than 64"])
        deep_arrays = text.replace('"kernel": null', '"kernel": {"a": ' + "[" * 100000 + "]" * 100000 + "}")
        p = merge("kernel-deep-arrays", deep_arrays, "reject", ["nested deeper than 64"])
        self.add("report.resume-kernel-deep", ["fuzz", "--backend", "cpu", "--resume", p, "--cases", "1", "--quiet",
                                               "--save", self.path("report/ce")], "reject", ["--resume", "nested deeper than 64"])
        runs_deep = text.replace('"runs": [', '"runs": [' + "[" * 100000 + "]" * 100000 + ", ", 1)
        merge("runs-deep", runs_deep, "reject", ["nested deeper than 64"])
        merge("kernel-not-utf8", text.replace('"kernel": null', '"kernel": {"name": "k\xff\xfe"}').encode("latin-1"),
              "reject", ["kernel"])
        other_kernel = copy.deepcopy(s1)
        other_kernel["kernel"] = {"name": "k" * 1_000_000}
        merge("kernel-huge-other-campaign", other_kernel, "reject", ["does not belong", "kernel"])
        merge("duplicate-key", text[:-1] + ', "jobs": 1}', "reject", ["jobs"])
        merge("overflow-seed", text.replace('"base_seed": 11', '"base_seed": 1e999'), "reject", ["base_seed"])
        merge("truncated", text[: len(text) // 2], "reject", ["malformed JSON"])
        merge("empty", "", "reject", ["malformed JSON"])
        merge("garbage", bytes(self.rng.randrange(256) for _ in range(2048)), "reject", ["malformed JSON"])
        resume_bad = copy.deepcopy(s1)
        resume_bad["interrupted"] = True
        p = self.write("report/resume-contradiction.json", dumps(resume_bad))
        self.add("report.resume-contradiction", ["fuzz", "--backend", "cpu", "--resume", p, "--cases", "1", "--quiet",
                                                 "--save", self.path("report/ce")], "reject", ["--resume", "exit_code"])
        # Files that are not files.
        d = self.path("report/a-directory")
        os.makedirs(d, exist_ok=True)
        fifo = self.path("report/a-fifo")
        os.mkfifo(fifo)
        for label, p in [("directory", d), ("fifo", fifo), ("missing", self.path("report/none.json")),
                         ("dev-null", "/dev/null")]:
            self.add(f"report.path.{label}", ["report", "merge", p0, p], "reject", [os.path.basename(p)], timeout=10)
            self.add(f"report.path.{label}.resume", ["fuzz", "--backend", "cpu", "--resume", p, "--cases", "1",
                                                     "--quiet", "--save", self.path("report/ce")], "reject",
                     [os.path.basename(p)], timeout=10)

    # ---- extra class modules (classes_*.py) -------------------------------------------------

    def extra_classes(self, folder):
        """Imports every classes_*.py of folder that defines add_cases(corpus), in name order, and calls it."""
        loaded = []
        for path in sorted(glob.glob(os.path.join(folder, "classes_*.py"))):
            name = os.path.splitext(os.path.basename(path))[0]
            try:
                spec = importlib.util.spec_from_file_location("pav_hostile_" + name, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules.setdefault("corpus", sys.modules[__name__])
                spec.loader.exec_module(module)
            except Exception as e:
                raise RuntimeError(f"{path}: the class module does not import: {type(e).__name__}: {e}") from e
            add = getattr(module, "add_cases", None)
            if not callable(add):
                continue
            before = len(self.cases)
            try:
                add(self)
            except Exception as e:
                raise RuntimeError(f"{path}: add_cases failed: {type(e).__name__}: {e}") from e
            loaded.append((name, len(self.cases) - before))
        return loaded

    # ---- the large, random set (slow) -------------------------------------------------------

    def random_docs(self, count):
        """Seeded random damage to every input kind; only 'no signal, no hang, bounded output'."""
        if not os.path.exists(self.path("report/s0.json")):
            self.write("report/s0.json", json.dumps(self.real_reports()[0]))
        kinds = [
            ("case", dumps(BASE_CASE), lambda p: ["replay", p, "--backend", "cpu"]),
            ("sweep", dumps(BASE_SWEEP), lambda p: ["drift", "--sweep", p, "--list"]),
            ("bench", json.dumps({"latency_ms": [1, 2, 3], "completed": 3, "duration_s": 1.0}),
             lambda p: ["bench-compare", p, p, "--resamples", "50"]),
            ("trace", '{"context_lens": [100, 5000]}\n{"context_lens": [7]}\n', lambda p: ["trace-stats", p]),
            ("jsonl", '{"id": "a", "correct": true}\n{"id": "b", "correct": false}\n', lambda p: ["mcnemar", p, p]),
            ("report", json.dumps(self.real_reports()[1]),
             lambda p: ["report", "merge", self.path("report/s0.json"), p]),
        ]
        tokens = [b"1e999", b"-1", b"NaN", b"null", b"[", b"{", b"\"", b"\x00", b"\xff", b"9223372036854775808",
                  b"4097", b"0", b"[[[[", b"}", b",", b"2147483648", b"true"]
        for i in range(count):
            kind, text, argv = kinds[i % len(kinds)]
            data = bytearray(text.encode())
            for _ in range(1 + self.rng.randrange(4)):
                op = self.rng.randrange(4)
                at = self.rng.randrange(len(data) + 1)
                if op == 0 and data:
                    data[min(at, len(data) - 1)] = self.rng.randrange(256)
                elif op == 1:
                    data[at:at] = self.rng.choice(tokens)
                elif op == 2:
                    del data[at:at + self.rng.randrange(1, 8)]
                else:
                    data = data[:at]
            p = self.write(f"random/{kind}-{i}.json", bytes(data))
            self.add(f"random.{kind}.{i}", argv(p), "any")


def run_case(pav, case, env):
    t0 = time.monotonic()
    try:
        proc = subprocess.run([pav] + case.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              timeout=case.timeout, env=env)
    except subprocess.TimeoutExpired as e:
        return case, None, b"", b"", time.monotonic() - t0
    return case, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0


def judge(case, rc, out, err):
    """The list of rules this run broke (empty: it passed)."""
    problems = []
    if rc is None:
        return [f"hung: no exit within {case.timeout:.0f} s"]
    if rc < 0:
        problems.append(f"killed by signal {signal.Signals(-rc).name}")
    elif rc >= 128:
        problems.append(f"exit {rc} (a signal or an abort)")
    text = (out + err).decode("utf-8", "replace")
    if b"ERROR: AddressSanitizer" in err or b"runtime error:" in err or b"LeakSanitizer" in err:
        problems.append("sanitizer report")
    printed = len(err) + (len(out) if case.expect != "ok" else 0)  # a plan's own output may be long
    if printed > OUTPUT_LIMIT:
        problems.append(f"printed {printed} bytes (more than {OUTPUT_LIMIT}): an excerpt was not cut")
    want = {"reject": {2}, "fail": {1}, "refuse": {1, 2}, "ok": {0}, "any": {0, 1, 2, 3}}[case.expect]
    if rc is not None and 0 <= rc < 128 and rc not in want:
        if rc == 0 and case.expect in ("reject", "fail", "refuse"):
            problems.append("exit 0 on an input that must be rejected")
        else:
            problems.append(f"exit {rc}, expected {sorted(want)}")
    if case.expect in ("reject", "fail", "refuse"):
        for m in case.mentions:
            if m not in text:
                problems.append(f"output does not name '{m}'")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pav", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--size", choices=["default", "large"], default="default")
    ap.add_argument("--random", type=int, default=None,
                    help="seeded random inputs (default: 60, or 600 with --size large)")
    ap.add_argument("--classes-dir", default=os.path.dirname(os.path.abspath(__file__)),
                    help="where the extra class modules (classes_*.py) are found")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--filter", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="multiply every input's hang limit (an instrumented build runs each input several times "
                         "slower; a hang is still a hang)")
    ap.add_argument("--expect-count", type=int, default=None,
                    help="fail unless exactly this many inputs are selected (a check that a class is present)")
    args = ap.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="pav-hostile-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    corpus = Corpus(work, pav=args.pav)
    try:
        corpus.case_docs()
        corpus.special_paths()
        corpus.sweep_docs()
        corpus.jsonl_docs()
        corpus.bench_docs()
        corpus.trace_docs()
        corpus.option_cases()
        corpus.report_docs()
        extra = corpus.extra_classes(args.classes_dir)
        corpus.random_docs(args.random if args.random is not None else 600 if args.size == "large" else 60)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"hostile corpus: could not build the corpus: {e}", flush=True)
        return 1
    if not args.time_scale >= 1.0:
        print(f"hostile corpus: --time-scale {args.time_scale} is below 1 (it can only lengthen a hang limit)",
              flush=True)
        return 2
    cases = [c for c in corpus.cases if args.filter in c.name]
    for c in cases:
        c.timeout *= args.time_scale
    if args.expect_count is not None and len(cases) != args.expect_count:
        print(f"hostile corpus: {len(cases)} inputs selected by --filter '{args.filter}', expected "
              f"{args.expect_count}", flush=True)
        return 1
    if args.list:
        for c in cases:
            print(f"{c.name:60} {c.expect:7} {' '.join(c.mentions)}")
        return 0

    env = dict(os.environ)
    env.setdefault("PAV_COUNTEREXAMPLE_DIR", os.path.join(work, "counterexamples"))
    print(f"hostile corpus: {len(cases)} inputs under {work}, {args.jobs} at a time, hang limits x{args.time_scale:g}, "
          f"pav {args.pav}; extra classes: "
          + (", ".join(f"{n} ({k} inputs)" for n, k in extra) or "none"), flush=True)
    t0 = time.monotonic()
    failures = []
    slowest = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for case, rc, out, err, secs in pool.map(lambda c: run_case(args.pav, c, env), cases):
            slowest.append((secs, case.name))
            problems = judge(case, rc, out, err)
            if problems:
                failures.append(case.name)
                shown = (err or out)[:600].decode("utf-8", "replace")
                print(f"FAIL {case.name}: {'; '.join(problems)}\n  pav {' '.join(a[:80] for a in case.args)}\n"
                      f"  exit {rc}; output: {shown.strip()}", flush=True)
    by_expect = {}
    for c in cases:
        by_expect[c.expect] = by_expect.get(c.expect, 0) + 1
    by_class = {}
    for secs, name in slowest:
        k = name.split(".")[0]
        n, total = by_class.get(k, (0, 0.0))
        by_class[k] = (n + 1, total + secs)
    slowest.sort(reverse=True)
    print(f"hostile corpus: {len(cases) - len(failures)} of {len(cases)} passed in {time.monotonic() - t0:.1f} s "
          f"({', '.join(f'{n} {k}' for k, n in sorted(by_expect.items()))}); slowest: "
          + ", ".join(f"{n} {s:.2f} s" for s, n in slowest[:3]))
    print("hostile corpus: seconds by class (inputs, run time summed over jobs): "
          + ", ".join(f"{k} {n} {t:.1f} s" for k, (n, t) in sorted(by_class.items(), key=lambda kv: -kv[1][1])))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
