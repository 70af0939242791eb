#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks every #include of the source tree against the layering table
(ci/layers.txt): a production source may include its own area's headers and
what its area's line names; a test source may include any area.

Usage: ci/layers.py [--root DIR] [--table FILE] [--checked-mark FILE]
Prints one line per forbidden include, FILE:LINE: "HEADER" (area A may not
include area B; TABLE: A: ...), and exits 1 when there is any; exits 2 when the
table is malformed or a source file lies in no area of it.

The build runs this check as a step (pav_layering in CMakeLists.txt) and marks
its success by touching a file. --checked-mark FILE checks the step instead:
exit 0 when FILE is newer than the table and every source of the tree (the
build checked the tree as it is) and, with --ninja PROGRAM, when every target
that compiles anything in FILE's build folder waits for the step; 1 naming
what is newer, the targets that do not wait, or that FILE is missing.
"""
import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

SOURCE_SUFFIXES = {".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".hip"}
SKIP_DIRS = {"build", ".git"}
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')


class TableError(Exception):
    pass


def read_table(path):
    """{area: [allowed entries]}, in file order."""
    table = {}
    for number, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        area, sep, rest = line.partition(":")
        area = area.strip().rstrip("/")
        if not sep or not area or " " in area:
            raise TableError(f"{path}:{number}: expected 'AREA: ENTRIES', got '{raw}'")
        if area in table:
            raise TableError(f"{path}:{number}: area {area} listed twice")
        table[area] = [e.rstrip("/") for e in rest.split()]
    return table


def area_of(rel, areas):
    """The longest area that rel (a path relative to the root) lies in, or None."""
    best = None
    for a in areas:
        if (rel == a or rel.startswith(a + "/")) and (best is None or len(a) > len(best)):
            best = a
    return best


def is_test(rel):
    p = Path(rel)
    name = p.name
    return (name.endswith(("_test.cpp", "_gputest.cpp")) or name.startswith("test_")
            or "tests" in p.parts[:-1] or "testdata" in p.parts[:-1])


def sources(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for f in sorted(filenames):
            if Path(f).suffix in SOURCE_SUFFIXES:
                yield Path(dirpath, f).relative_to(root).as_posix()


def resolve(header, rel, root, areas):
    """The included file relative to the root, or None for a header from
    outside the tree (the platform, a third-party library). A header named
    under an area counts as that area's even where the file is missing (a
    generated header, or one a change is about to add)."""
    if header.startswith("pav/") and (root / "include" / header).is_file():
        return "include/" + header
    if (root / header).is_file():
        return Path(header).as_posix()
    local = (root / rel).parent / header
    if local.is_file():
        return os.path.relpath(local, root).replace(os.sep, "/")
    if area_of(header, areas) is not None:
        return header
    return None


def check(root, table_path, shown=None):
    table = read_table(table_path)
    table_path = shown or table_path
    root = Path(root)
    problems = []
    for area, entries in table.items():
        if not (root / area).is_dir():
            problems.append(f"{table_path}: area {area} is not a folder of the tree")
        for e in entries:
            if e not in table and not (root / e).is_file():
                problems.append(f"{table_path}: {area}: '{e}' is neither an area nor a file of the tree")
    if problems:
        raise TableError("\n".join(problems))
    unplaced, forbidden = [], []
    for rel in sources(root):
        area = area_of(rel, table)
        if area is None:
            unplaced.append(f"{rel}: in no area of {table_path}; give its folder a line there")
            continue
        if is_test(rel):
            continue
        allowed = table[area]
        try:
            lines = (root / rel).read_text(errors="replace").splitlines()
        except OSError as e:
            unplaced.append(f"{rel}: cannot be read ({e})")
            continue
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(1) or m.group(2)
            target = resolve(header, rel, root, table)
            if target is None:
                continue
            target_area = area_of(target, table)
            if target_area is None or target_area == area or target_area in allowed or target in allowed:
                continue
            forbidden.append(f'{rel}:{number}: "{header}" (area {area} may not include area {target_area}; '
                             f"{table_path}: {area}: {' '.join(allowed) or '(nothing)'})")
    if unplaced:
        raise TableError("\n".join(unplaced))
    return forbidden


# CMake's ninja generator gives every compiling target a phony step of this
# name that its objects wait for; the layering step must be among its inputs.
ORDER_PREFIX = "cmake_object_order_depends_target_"
ORDER_DEPENDS = re.compile(r"^build (" + ORDER_PREFIX + r"\S+): phony")


def check_mark(root, table, mark, ninja=None):
    """0 when the build's mark is newer than the table and every source, and
    (with ninja) every compiling target of the build waits for the step."""
    if ninja:
        build = mark.parent
        compiling = {m.group(1) for line in (build / "build.ninja").read_text().splitlines()
                     if (m := ORDER_DEPENDS.match(line))}
        query = subprocess.run([ninja, "-C", str(build), "-t", "query", "pav_layering"], capture_output=True,
                               text=True)
        waiting = {line.strip() for line in query.stdout.splitlines()}
        missing = sorted(t.removeprefix(ORDER_PREFIX) for t in compiling - waiting)
        if query.returncode != 0 or not compiling or missing:
            print(f"layers: {len(missing)} target(s) compile without waiting for the layering step "
                  f"(pav_layering): {', '.join(missing[:8]) or query.stderr.strip()}")
            return 1
    if not mark.is_file():
        print(f"layers: {mark} is missing: the build never ran the layering step (pav_layering)")
        return 1
    at = mark.stat().st_mtime
    newer = [str(table)] if table.stat().st_mtime > at else []
    newer += [rel for rel in sources(root) if (root / rel).stat().st_mtime > at]
    if newer:
        print(f"layers: {len(newer)} file(s) changed after the build's layering step ran "
              f"({', '.join(newer[:5])}{', ...' if len(newer) > 5 else ''}): build again")
        return 1
    print(f"layers: the build checked the tree as it is ({mark})")
    return 0


def main():
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(here.parent))
    ap.add_argument("--table", default=None)
    ap.add_argument("--checked-mark", default=None)
    ap.add_argument("--ninja", default=None)
    args = ap.parse_args()
    table = args.table or str(Path(args.root) / "ci" / "layers.txt")
    if args.checked_mark:
        return check_mark(Path(args.root), Path(table), Path(args.checked_mark), args.ninja)
    try:
        shown = os.path.relpath(table, args.root)
    except ValueError:
        shown = table
    try:
        forbidden = check(args.root, table, shown)
    except TableError as e:
        print(e, file=sys.stderr)
        return 2
    for f in forbidden:
        print(f)
    if forbidden:
        print(f"layers: {len(forbidden)} forbidden include(s)")
        return 1
    print("layers: every include follows the table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
