# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# Sourced by bench/gpu/build_mutants.sh and mutant_kit.sh (which carries it in
# its kit): which HIP sources a GPU mutant changes.
#
# mutant_sources TREE FILE...: the kernels/hip/*.hip files, relative to TREE,
# to compile again for a mutant that changed FILE... (mutant_apply's list):
# those files and those that include a header among them, directly or through
# other headers. One per line.
mutant_sources() {
  local tree=$1 f seen=" " found
  local -a todo=("${@:2}") out=()
  while ((${#todo[@]})); do
    f=${todo[0]}
    todo=("${todo[@]:1}")
    [[ $seen == *" $f "* ]] && continue
    seen+="$f "
    if [[ $f == *.hip ]]; then
      out+=("$f")
    else
      mapfile -t found < <(cd "$tree" && grep -l -F "#include \"$f\"" kernels/hip/*.hip kernels/hip/*.hpp kernels/*.hpp 2>/dev/null)
      todo+=("${found[@]}")
    fi
  done
  ((${#out[@]})) && printf '%s\n' "${out[@]}"
}
