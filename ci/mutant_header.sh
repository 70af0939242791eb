# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts that read kept mutants (ci/mutants.sh, ci/gpu.sh,
# bench/gpu/build_mutants.sh, bench/gpu/python_kit.sh): one field of a
# ci/mutants/*.patch header. (bench/gpu/mutant_kit.sh runs from a kit away from
# the tree and keeps its own copy.)
#
# header PATCH FIELD: the value of the first "FIELD: value" line ("" if none).
header() { sed -n "s/^$2:[[:space:]]*//p" "$1" | head -1; }
