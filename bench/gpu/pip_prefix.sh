#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pav's C++ dependencies as a prefix, for `pip install` of the GPU build on a
# host that has the toolchain, Python and pybind11 but none of Debian's packages
# (docs/python.md, "Install").
#
#   bench/gpu/pip_prefix.sh pack DIR    # here: Debian 12, ci/install-deps.sh's packages, nvcc
#
# DIR/usr gets, copied from this machine's packages with their Debian layout,
# what the nvidia preset's build of the extension _pav reads from them, no more:
#   usr/include/                the headers of fmt, nlohmann_json, TBB, Eigen, Boost,
#                               rapidcheck and DLPack that its objects include (the
#                               compiler's dependency records of a throwaway build,
#                               build/pip-prefix-scan, tests and bench off), and the
#                               files the find_path calls of CMakeLists.txt look for
#   usr/lib/x86_64-linux-gnu/cmake/, usr/share/cmake/
#                               the config files its find_package calls read (fmt,
#                               nlohmann_json, CLI11, TBB, rapidcheck), unchanged:
#                               they compute their prefix from their own place
#   usr/lib/x86_64-linux-gnu/   the libraries those configs name: libfmt and libtbb*
#                               with their soname links, librapidcheck.a
# On the host, with DIR copied to a folder outside the checkout (CMake refuses
# an exported include folder inside the source tree), say /opt/pavdeps:
#   CMAKE_PREFIX_PATH=/opt/pavdeps/usr PAV_PRESET=nvidia python3 -m pip install --no-build-isolation --no-deps -v .
# At run time the extension loads libfmt.so.9 and libtbb.so.12 through its
# RUNPATH, /opt/pavdeps/usr/lib/x86_64-linux-gnu where the build found them: keep
# that folder where it is (or name a copy in LD_LIBRARY_PATH). They need glibc
# 2.34 and the libstdc++ of GCC 11 or later. PAV_PREFIX_SCAN names another
# throwaway build folder. Exit 2: bad usage; 3: a missing package or a check failed.
set -euo pipefail
mode=${1:-}
if [[ $mode != pack || $# -ne 2 ]]; then sed -n '2,29p' "$0"; exit 2; fi
root=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "pip_prefix: $*" >&2; exit 3; }

# The packages packed, and those the host brings itself (its C library, compiler,
# Python and pybind11; nvcc's headers are under /usr/local/cuda).
ours=(libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5
      libeigen3-dev libboost1.74-dev librapidcheck-dev libdlpack-dev)
is_ours() { [[ " ${ours[*]} " == *" $1 "* ]]; }
host_re='^(libc6-dev|linux-libc-dev|libgcc-[0-9]+-dev|libstdc\+\+-[0-9]+-dev|libpython3\.[0-9]+-dev|pybind11-dev)$'
for p in "${ours[@]}" pybind11-dev python3-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || die "the package $p is not installed (ci/install-deps.sh)"
done
[[ -x /usr/local/cuda/bin/nvcc ]] || die "no /usr/local/cuda/bin/nvcc: the scan builds the nvidia preset"

mkdir -p "$2"
out=$(cd "$2" && pwd)
[[ $out != / && $out != "$root" ]] || die "DIR must be a folder of its own, not $out"
rm -rf "${out:?}/usr"
scan=${PAV_PREFIX_SCAN:-$root/build/pip-prefix-scan}
rm -rf "$scan"
log=$(mktemp); owners=$(mktemp); check=$(mktemp -d)
trap 'rm -rf "$scan" "$log" "$owners" "$check"' EXIT

# The throwaway build: configured as setup.py configures it, _pav alone built
# (the compiler cache serves it from an nvidia build's objects).
echo "pip_prefix: building _pav in $scan (nvidia preset) for its dependency records"
if ! CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 cmake -S "$root" -B "$scan" --preset nvidia -DPAV_PYTHON_REQUIRED=ON \
    -DPAV_BUILD_TESTS=OFF -DPAV_BUILD_BENCH=OFF >"$log" 2>&1 ||
   ! CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 cmake --build "$scan" --target _pav >>"$log" 2>&1; then
  tail -40 "$log" >&2; die "the throwaway build failed (its output's end is above)"
fi
so=$(cd "$scan" && ls python/pav/_pav.*.so)
link=$(cd "$scan" && ninja -t commands "$so" | tail -1)

# Every absolute file the objects of _pav include (ninja's deps log) and every
# library its link names, with the package that owns it.
{ (cd "$scan" && ninja -t deps) | awk '$1 ~ /^\// {print $1}'
  tr ' ' '\n' <<<"$link" | grep -E '^/usr/lib/.*\.(so[.0-9]*|a)$' || true
} | python3 -c 'import os, sys; print("\n".join(sorted({os.path.normpath(l.strip()) for l in sys.stdin})))' |
  grep -v '^/usr/local/cuda' | xargs -r dpkg -S >"$owners" 2>"$log" || { cat "$log" >&2; die "a file the build read belongs to no package"; }
files=()
while IFS=$'\t' read -r pkg path; do
  pkg=${pkg%%:*}
  if is_ours "$pkg"; then files+=("${path#/}")
  elif ! [[ $pkg =~ $host_re ]]; then die "the build reads $path of $pkg, which neither this prefix packs nor the host brings"
  fi
done < <(sed -E 's/^(.*): (\/.*)$/\1\t\2/' "$owners")
# What the find_path calls of CMakeLists.txt look for, included or not.
files+=(usr/include/eigen3/Eigen/Core usr/include/boost/math/distributions/binomial.hpp usr/include/dlpack/dlpack.h)

# The find_package calls' config folders, as the throwaway configure found them.
configs=()
for name in fmt nlohmann_json CLI11 TBB rapidcheck; do
  dir=$(sed -n "s/^${name}_DIR:PATH=//p" "$scan/CMakeCache.txt")
  [[ $dir == /usr/* && -d $dir ]] || die "$name's config folder is '$dir', not a Debian one under /usr"
  mapfile -t -O ${#configs[@]} configs < <(find "$dir" -type f)
done
files+=("${configs[@]#/}")
# The libraries those configs name (all of them: a config checks that each
# exists), each with the links to it beside it (soname and .so).
libdir=/usr/lib/x86_64-linux-gnu
mapfile -t libs < <(grep -hoE 'IMPORTED_LOCATION_[A-Z]+ "[^"]*/lib/x86_64-linux-gnu/[^"/]+"' "${configs[@]}" |
                    sed -E 's#.*/([^/"]+)"$#\1#' | sort -u)
for lib in "${libs[@]}"; do
  [[ -f $libdir/$lib && ! -L $libdir/$lib ]] || die "a config names $libdir/$lib, which is not a file there"
  files+=("${libdir#/}/$lib")
  for l in "$libdir/${lib%%.*}".*; do
    if [[ -L $l && $(readlink -f "$l") == "$libdir/$lib" ]]; then files+=("${l#/}"); fi
  done
done
printf '%s\0' "${files[@]}" | sort -zu | (cd / && xargs -0 cp -a --parents -t "$out")

# The copies compute their prefix from where they lie; the only /usr paths in
# them sit in the guard that applies when a file is at its Debian place.
bad=$(grep -rnE '/usr' "$out/usr/lib/x86_64-linux-gnu/cmake" "$out/usr/share/cmake" |
      grep -vE '^[^:]*:[0-9]+: *#|_realOrig "/usr/|set\((PACKAGE_PREFIX_DIR|_IMPORT_PREFIX) "/usr' || true)
[[ -z $bad ]] || die "config files name /usr outside their relocation guard: $bad"
# Every library the link named is in the prefix.
for l in $(tr ' ' '\n' <<<"$link" | grep -E '^/usr/lib/.*\.(so[.0-9]*|a)$'); do
  owner=$(dpkg -S "$l" | sed 's/:.*//')
  if is_ours "$owner" && [[ ! -f $out$l ]]; then die "the link names $l, which is not in the prefix"; fi
done

# The configs, read from the prefix alone: every target's include folders and
# library files lie inside it.
cat >"$check/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(pip_prefix_check NONE)
set(CMAKE_LIBRARY_ARCHITECTURE x86_64-linux-gnu)  # set by a C++ project
foreach(p fmt nlohmann_json CLI11 TBB rapidcheck)
  find_package(${p} CONFIG REQUIRED NO_DEFAULT_PATH PATHS ${PREFIX})
endforeach()
foreach(t fmt::fmt nlohmann_json::nlohmann_json CLI11::CLI11 TBB::tbb rapidcheck)
  foreach(prop INTERFACE_INCLUDE_DIRECTORIES IMPORTED_LOCATION_NONE)
    get_target_property(v ${t} ${prop})
    foreach(f ${v})
      if(f AND (NOT f MATCHES "^${PREFIX}/" OR NOT EXISTS ${f}))
        message(FATAL_ERROR "${t} ${prop}: ${f} is not a file of ${PREFIX}")
      endif()
    endforeach()
  endforeach()
endforeach()
find_path(eigen Eigen/Core PATH_SUFFIXES eigen3 REQUIRED NO_DEFAULT_PATH PATHS ${PREFIX}/include)
find_path(boost boost/math/distributions/binomial.hpp REQUIRED NO_DEFAULT_PATH PATHS ${PREFIX}/include)
find_path(dlpack dlpack/dlpack.h REQUIRED NO_DEFAULT_PATH PATHS ${PREFIX}/include)
CMAKE
cmake -S "$check" -B "$check/build" -DPREFIX="$out/usr" >"$log" 2>&1 || { cat "$log" >&2; die "the prefix's configs do not load from $out/usr"; }

for d in $(cd "$out/usr/include" && ls); do
  printf 'pip_prefix: %-28s %5s files\n' "usr/include/$d" "$(find "$out/usr/include/$d" -type f | wc -l)"
done
echo "pip_prefix: $(find "$out/usr/lib" "$out/usr/share" -name '*.cmake' | wc -l) config files; libraries:" \
  "$(cd "$out/usr/lib/x86_64-linux-gnu" && find . -maxdepth 1 ! -type d -printf '%P ' | tr ' ' '\n' | sort | xargs)"
bytes=$(du -sb "$out/usr" | cut -f1)
(( bytes < 30 * 1024 * 1024 )) || die "$out/usr holds $bytes bytes, over the 30 MiB it should stay under"
echo "pip_prefix: $out/usr: $(du -sh "$out/usr" | cut -f1) ($bytes bytes)"
