#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks every #include of the source tree against the layering table
(ci/layers.txt): a production source may include its own area's headers and
what its area's line names; a test source may include any area.

Usage: ci/layers.py [--root DIR] [--table FILE]
Prints one line per forbidden include, FILE:LINE: "HEADER" (area A may not
include area B; TABLE: A: ...), and exits 1 when there is any; exits 2 when the
table is malformed or a source file lies in no area of it.
"""
import argparse
import os
import re
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


def main():
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(here.parent))
    ap.add_argument("--table", default=None)
    args = ap.parse_args()
    table = args.table or str(Path(args.root) / "ci" / "layers.txt")
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
