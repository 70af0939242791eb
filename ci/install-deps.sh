#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every build and test dependency of pav from Debian 12 packages.
# Idempotent; run as root (or through sudo). Nothing is downloaded at build time.
#   PAV_DEPS_GPU=0    skip the HIP toolchain (hipcc, libamdhip64-dev, rocm-device-libs, libdlpack-dev)
#   PAV_DEPS_TORCH=1  also PyTorch (CPU), for the torch worker example's tests (labelled slow;
#                     without it they are not registered)
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build ccache pkg-config git rsync patch
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  libeigen3-dev libboost-math-dev nlohmann-json3-dev
  libcli11-dev libfmt-dev libtbb-dev
  gnuplot-nox
  python3-numpy
  python3-yaml
  python3-dev pybind11-dev python3-pytest
  python3-pip python3-setuptools python3-wheel python3-venv
  clang-15
)
# python3-yaml: the fleet runners' manifests are parsed in the CPU tests.
# python3-dev, pybind11-dev: the Python package's extension (python/);
# python3-pytest: its tests and the pytest example, in the CPU suite.
# python3-pip, -setuptools, -wheel, -venv: `pip install` of the package,
# offline (--no-build-isolation), into a venv (python_pip_install).
# clang-15: the sanitizer build (ci/sanitize.sh); its AddressSanitizer leaves
# UBSan's check data uninstrumented, so a sanitized pav starts in half the time
# GCC's takes, and it compiles the heaviest sanitized sources in up to half
# the time.
# The example workers run on Debian's /usr/bin/python3 (examples/workers/):
# NumPy always; PyTorch (CPU) on request, for the torch worker's slow tests.
if [[ "${PAV_DEPS_TORCH:-0}" != 0 ]]; then
  pkgs+=(python3-torch)
fi
if [[ "${PAV_DEPS_GPU:-1}" != 0 ]]; then
  pkgs+=(hipcc libamdhip64-dev rocm-device-libs libdlpack-dev)
fi
# libdlpack-dev: the DLPack header, for a GPU build's Python module (device
# tensors handed to an in-process kernel of device memory).

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
