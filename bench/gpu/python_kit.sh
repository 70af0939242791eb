#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package of a GPU build, for the GPU machine's own interpreter, with
# one copy per kept Python mutant of the nvidia preset: python_device_tests run
# there (bench/gpu/device_call.sh step p) on the package built here.
#
#   bench/gpu/python_kit.sh pack KIT HEADERS   # here, after an nvidia build (pav and _pav)
#
# HEADERS is what device_call.sh step h saved from the GPU machine
# (pyheaders.tgz, unpacked): usr/include/pythonX.Y, the multiarch pyconfig
# folder usr/include/<triplet>/pythonX.Y, and pybind11/include of the
# machine's pybind11. module.cpp is compiled again with the nvidia build's own
# command, those headers in place of this machine's interpreter's, and linked
# as the build links _pav (libstdc++ inside), named for that interpreter.
#
# KIT gets:
#   pkg/base/pav/       the package as built
#   pkg/NAME/pav/       the package with one mutant's defect: a patch of
#                       python/module.cpp is compiled and linked; a patch of
#                       python/pav/*.py only is applied to the .py files, and
#                       device_call.sh step p adds the base extension there
#   pkg/NAME/what       the patch's pav-mutant line
#   bin/pav, lib/       the nvidia build's pav (debug info stripped), libtbb and libfmt
#   src/                python/tests and examples/workers: PAV_SOURCE_DIR for the tests
# The mutants are every kept mutant (ci/mutants/AREA/NAME.patch) of the nvidia
# preset whose pav-tests names python_device_tests.
set -euo pipefail
mode=${1:-}
if [[ $mode != pack || $# -ne 3 ]]; then sed -n '2,25p' "$0"; exit 2; fi
kit=$2
[[ -d $3 ]] || { echo "python_kit: HEADERS: no folder '$3' (device_call.sh step h saves pyheaders.tgz)" >&2; exit 2; }
headers=$(cd "$3" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${PAV_NVIDIA_BUILD:-$root/build/nvidia}" && pwd)
so=$(ls "$build"/python/pav/_pav.*.so 2>/dev/null | head -1)
[[ -n $so && -x $build/pav ]] || { echo "python_kit: no pav and _pav in $build (cmake --build $build --target pav _pav)" >&2; exit 3; }
pyinc=$(ls -d "$headers"/usr/include/python3.* 2>/dev/null | head -1)
[[ -n $pyinc && -f $pyinc/Python.h && -f $headers/pybind11/include/pybind11/pybind11.h ]] ||
  { echo "python_kit: $headers lacks usr/include/python3.*/Python.h or pybind11/include" >&2; exit 3; }
ver=$(basename "$pyinc"); ver=${ver#python}
suffix=.cpython-${ver/./}-x86_64-linux-gnu.so

# The build's own compile and link commands for the extension.
compile=$(python3 - "$build/compile_commands.json" <<'PY'
import json, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("python/module.cpp"):
        print(e["command"]); break
PY
)
link=$(cd "$build" && ninja -t commands "python/pav/$(basename "$so")" | tail -1)
[[ -n $compile && $link == *module.cpp.o* ]] || { echo "python_kit: no compile or link command for _pav in $build" >&2; exit 3; }
[[ $compile == *-DPAV_HAVE_GPU=1* ]] || { echo "python_kit: $build is not a GPU build (the nvidia preset)" >&2; exit 3; }
# This interpreter's headers out, the GPU machine's in (its pyconfig.h includes
# <triplet/pythonX.Y/pyconfig.h>, found under usr/include).
compile=$(sed -E "s#-isystem [^ ]*/python3\.[0-9]+#-isystem $pyinc -isystem $headers/usr/include -isystem $headers/pybind11/include#" <<<"$compile")
[[ $compile == *"$pyinc"* ]] || { echo "python_kit: the compile command names no interpreter include folder" >&2; exit 3; }

rm -rf "$kit"; mkdir -p "$kit/bin" "$kit/lib" "$kit/pkg" "$kit/src/python" "$kit/src/examples"
kit=$(cd "$kit" && pwd)
work=$kit/.work; mkdir -p "$work"
# extension SOURCE_TREE OUT_SO: module.cpp of SOURCE_TREE compiled and linked as _pav.
n_ext=0
extension() {
  n_ext=$((n_ext + 1))
  local obj=$work/module-$n_ext.o c l
  c=$(sed -E "s# -o [^ ]+module\.cpp\.o -c [^ ]+/python/module\.cpp# -o $obj -c $1/python/module.cpp#" <<<"$compile")
  l=$(sed -E "s# -o python/pav/[^ ]+\.so # -o $2 #; s#python/CMakeFiles/_pav\.dir/module\.cpp\.o#$obj#" <<<"$link")
  [[ $c == *"$obj"* && $l == *"$obj"* && $l == *" -o $2 "* ]] || { echo "python_kit: cannot rewrite the build's commands" >&2; exit 3; }
  (cd "$build" && eval "$c" && eval "$l")
  objcopy --strip-debug "$2"
}
package() {  # package SOURCE_TREE DEST: the package's Python files and its extension
  mkdir -p "$2/pav"
  cp "$1"/python/pav/*.py "$2/pav/"
  extension "$1" "$2/pav/_pav$suffix"
}
cp -r "$root/python/tests" "$kit/src/python/"
cp -r "$root/examples/workers" "$kit/src/examples/"
objcopy --strip-debug "$build/pav" "$kit/bin/pav"
for l in libtbb.so.12 libfmt.so.9; do cp -L "/usr/lib/x86_64-linux-gnu/$l" "$kit/lib/"; done
package "$root" "$kit/pkg/base"
echo "python_kit: base package for Python $ver"
# shellcheck source=ci/mutant_lib.sh
source "$root/ci/mutant_lib.sh"
mapfile -t patches < <(mutant_patches "$root")
for patch in "${patches[@]}"; do
  [[ $(header "$patch" pav-preset) == nvidia && $(header "$patch" pav-tests) == *python_device_tests* ]] || continue
  name=$(basename "$patch" .patch)
  tree=$work/$name; rm -rf "$tree"; mkdir -p "$tree"
  cp -r "$root/python" "$tree/"
  changed=$(mutant_apply "$patch" "$tree") || { echo "python_kit: $name does not apply" >&2; exit 1; }
  if [[ -n $(grep -v '^python/pav/.*\.py$' <<<"$changed") ]]; then
    package "$tree" "$kit/pkg/$name"
  else  # Python files only: device_call.sh step p puts the base extension beside them
    mkdir -p "$kit/pkg/$name/pav"; cp "$tree"/python/pav/*.py "$kit/pkg/$name/pav/"
  fi
  header "$patch" pav-mutant >"$kit/pkg/$name/what"
  echo "python_kit: $name"
done
rm -rf "$work"
du -sh "$kit"
