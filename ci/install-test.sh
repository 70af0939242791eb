#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs a built pav tree into a temporary prefix and builds a small project
# against it with find_package(pav) (ci/install-consumer/), then runs it.
# Usage: install-test.sh BUILD_DIR VERSION WORKDIR
set -euo pipefail
(($# == 3)) || { echo "usage: $0 BUILD_DIR VERSION WORKDIR" >&2; exit 2; }
build=$1 version=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
echo "installed: $(grep -c '' "$work/install.log") lines of install log"
# Test helpers and GPU sources are not part of the installed interface.
if find "$work/prefix/include" -name '*_test*' -o -name 'test_*' -o -name hip | grep .; then
  echo "install-test: FAIL: test or GPU files installed"
  exit 1
fi
test -f "$work/prefix/include/pav/kernel_abi.h"
cmake -S "$here/install-consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DPAV_EXPECTED_VERSION="$version" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer"
"$work/consumer/consumer"
echo "install-test: PASS"
