#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `pip install` of pav's Python package from the checkout into fresh venvs,
# offline (--no-index, --no-build-isolation: Debian's setuptools and wheel):
#  1. a venv over Debian's NumPy and pytest (--system-site-packages) gets pav
#     (pav.lifecycle too), from the venv and not the build tree, and runs the
#     pytest example with pav's plugin;
#  2. an extension there renamed to another Python's suffix is an import error
#     that names the fix;
#  3. a venv without NumPy is refused at install, naming the fix.
# The extension builds in BUILD_DIR, a fresh folder beside the presets' build
# folders (the same depth below the source root), so the compiler cache serves
# it from the cpu build's objects.
# Usage: pip-install-test.sh SOURCE_DIR BUILD_DIR WORKDIR [PYTHON]
set -euo pipefail
(($# == 3 || $# == 4)) || { echo "usage: $0 SOURCE_DIR BUILD_DIR WORKDIR [PYTHON]" >&2; exit 2; }
src=$(cd "$1" && pwd) build=$2 work=$3 python=${4:-/usr/bin/python3}
fail() { echo "pip-install-test: FAIL: $*"; exit 1; }
rm -rf "$work" "$build"
mkdir -p "$work"
unset PYTHONPATH PYTHONHOME PIP_REQUIRE_VIRTUALENV
export PAV_PIP_BUILD_DIR=$build PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
pip_install() { "$1/bin/python" -m pip install -q --no-index --no-build-isolation "$src"; }

# 1. Installed and used from a venv of its own.
"$python" -m venv --system-site-packages "$work/venv"
t0=$SECONDS
pip_install "$work/venv" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "pip install into the venv"; }
echo "pip-install-test: installed into a fresh venv in $((SECONDS - t0)) s"
cd "$work"  # not the source folder: `import pav` must find the venv's copy
where=$("$work/venv/bin/python" -c 'import pav, pav.lifecycle; print(pav.__file__); print(pav.version())') ||
  fail "import pav from the venv"
echo "$where"
[[ $(head -1 <<<"$where") == "$work/venv/"* ]] || fail "pav was imported from outside the venv: $where"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider -p pav.pytest_plugin "$src/examples/pytest" ||
  fail "the pytest example in the venv"

# 2. An extension of another Python: a clear import error naming the fix.
pkg=$(dirname "$(head -1 <<<"$where")")
for so in "$pkg"/_pav.*.so; do mv "$so" "$pkg/_pav.cpython-39-x86_64-linux-gnu.so"; done
if out=$("$work/venv/bin/python" -c 'import pav; pav.version()' 2>&1); then
  fail "pav loaded without its extension"
fi
grep -q "built for another Python" <<<"$out" && grep -q -- "-m pip install --no-build-isolation" <<<"$out" ||
  fail "an extension for another Python is not named with the fix: $out"

# 3. No NumPy in the venv: refused at install, naming the fix.
"$python" -m venv "$work/bare"
if pip_install "$work/bare" >"$work/bare.log" 2>&1; then
  fail "pip installed pav into a venv without NumPy"
fi
grep -q "NumPy is not importable" "$work/bare.log" && grep -q -- "--system-site-packages" "$work/bare.log" ||
  { cat "$work/bare.log"; fail "a venv without NumPy is not refused with the fix"; }
! compgen -G "$work/bare/lib/python3*/site-packages/pav" >/dev/null ||
  fail "pav was installed into the venv without NumPy"
echo "pip-install-test: PASS"
