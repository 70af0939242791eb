# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts that read kept mutants (ci/mutants.sh,
# ci/mutants-refresh.sh, ci/gpu.sh, ci/fuzz-demo.sh, bench/gpu/build_mutants.sh,
# bench/gpu/python_kit.sh; bench/gpu/mutant_kit.sh carries it in its kit).
#
# header PATCH FIELD
#   The value of the first "FIELD: value" line of a patch's header ("" if none).
# mutant_patches ROOT
#   Every kept mutant, ROOT/ci/mutants/AREA/NAME.patch, one path a line, in
#   NAME order (the name is the file's base name, whatever its area).
# mutant_patch ROOT NAME
#   The path of the kept mutant NAME; exit 1 when there is none.
# mutant_apply [--dry-run] [--exact] PATCH TREE [OUT]
#   Applies PATCH by content: each hunk's pre-image (its context and removed
#   lines) must occur exactly once in its file, wherever the @@ line says it
#   was; it is replaced there by the hunk's post-image. A file the patch names
#   that is gone, or that no longer holds a hunk's text, is looked for among
#   TREE's files: the one file where every hunk of that file occurs exactly
#   once takes its place ("moved: OLD -> NEW"; files of the same extension
#   first, any file where none of those holds it). Zero or several places, for a
#   hunk or for a moved file, refuse the patch and say which hunk and why (the
#   closest text and the lines that differ, when a hunk's text is gone). Reads
#   TREE; writes the patched files under OUT (default TREE), only when every
#   hunk of every file is placed. Prints the files it changes (paths relative
#   to TREE), one a line; notes and refusals go to stderr.
#   Exit 0 applied (or would apply, --dry-run); 1 refused; 2 malformed;
#   3 (--exact only) applies, but not as written (a moved file, a hunk at
#   other lines, or a stale @@ count): ci/mutants-refresh.sh rewrites it.
header() { sed -n "s/^$2:[[:space:]]*//p" "$1" | head -1; }

mutant_patches() {
  find "$1/ci/mutants" -name '*.patch' -type f -printf '%f\t%p\n' 2>/dev/null | LC_ALL=C sort | cut -f2
}

mutant_patch() {
  local found
  found=$(find "$1/ci/mutants" -name "$2.patch" -type f 2>/dev/null | head -1)
  [[ -n $found ]] && echo "$found"
}

# The files of TREE a moved hunk may be looked for in: git's own list where TREE
# is the top of a work tree, else every file outside build/ and .git/; kept
# mutants never.
_mutant_tree_files() {
  if [[ $(git -C "$1" rev-parse --show-toplevel 2>/dev/null) == "$(cd "$1" && pwd -P)" ]]; then
    git -C "$1" ls-files -co --exclude-standard
  else
    (cd "$1" && find . \( -path ./build -o -path ./.git \) -prune -o -type f -printf '%P\n')
  fi | grep -v '^ci/mutants/'
}

# The hunks' parser and placer. Records, tab-separated, on stdout:
#   M  message                     malformed patch
#   S  old  resolved  status  exact   per file (status ok, absent, gone, twice, overlap)
#   E  old  message                 why a file's hunks do not place
#   N  old  message                 a hunk placed at other lines than written
#   L  old  line                    the longest pre-image line of each hunk (to look for a moved file)
_mutant_awk() {  # PATCH TREE OUT MODE REMAP ONLY
  awk -v patch="$1" -v tree="$2" -v out="$3" -v mode="$4" -v remap="$5" -v only="$6" '
function fail(msg) { print "M\t" msg; bad = 1 }
function q(s) { return "\x27" s "\x27" }
BEGIN {
  n = split(remap, rp, "\n")
  for (i = 1; i <= n; i++) { k = index(rp[i], "\t"); if (k) map[substr(rp[i], 1, k - 1)] = substr(rp[i], k + 1) }
  ns = 0; want_pre = want_post = 0; lineno = 0
  while ((r = (getline line < patch)) > 0) {
    lineno++
    if (want_pre > 0 || want_post > 0) {
      c = substr(line, 1, 1); t = substr(line, 2)
      if (line == "") { c = " "; t = "" }
      if (c == "\\") continue
      if (c == " " || c == "-") {
        if (want_pre == 0) { fail("line " lineno ": hunk " nh[ns] " of " path[ns] " has more lines than its @@ line counts"); break }
        pre[ns, nh[ns], ++npre[ns, nh[ns]]] = t; want_pre--
        if (c == "-") removed[ns, nh[ns], npre[ns, nh[ns]]] = 1
      }
      if (c == " " || c == "+") {
        if (c == "+" && want_post == 0) { fail("line " lineno ": hunk " nh[ns] " of " path[ns] " has more lines than its @@ line counts"); break }
        if (c == " " && want_post == 0) { fail("line " lineno ": hunk " nh[ns] " of " path[ns] " has more lines than its @@ line counts"); break }
        post[ns, nh[ns], ++npost[ns, nh[ns]]] = t; want_post--
      }
      if (c != " " && c != "-" && c != "+") { fail("line " lineno ": hunk " nh[ns] " of " path[ns] " ends before the lines its @@ line counts"); break }
      continue
    }
    if (ns == 0 && line ~ /^pav-(mutant|tests):[ \t]*[^ \t]/) { split(line, kv, ":"); has[kv[1]] = 1; continue }
    if (line ~ /^diff --git /) { ns++; nh[ns] = 0; path[ns] = ""; continue }
    if (ns == 0) continue
    if (line ~ /^\+\+\+ /) {
      p = substr(line, 5); sub(/\t.*/, "", p); sub(/^b\//, "", p); path[ns] = p
      if (p == "/dev/null") { fail("line " lineno ": deletes a file; a mutant changes lines of files that exist"); break }
      continue
    }
    if (line ~ /^@@ /) {
      if (path[ns] == "") { fail("line " lineno ": a hunk before its +++ line"); break }
      if (!match(line, /^@@ -[0-9]+(,[0-9]+)? \+[0-9]+(,[0-9]+)? @@/)) { fail("line " lineno ": not a @@ -A,B +C,D @@ line"); break }
      h = ++nh[ns]; hdr[ns, h] = substr(line, 1, RLENGTH)
      split(substr(line, 5, RLENGTH - 7), f2, " ")
      split(f2[1], o, ","); split(substr(f2[2], 2), nn, ",")
      ostart[ns, h] = o[1] + 0; ocount[ns, h] = (2 in o) ? o[2] + 0 : 1
      nstart[ns, h] = nn[1] + 0; ncount[ns, h] = (2 in nn) ? nn[2] + 0 : 1
      want_pre = ocount[ns, h]; want_post = ncount[ns, h]; npre[ns, h] = npost[ns, h] = 0
      continue
    }
    if (line ~ /^[-+ ]/ && line !~ /^--- /) { fail("line " lineno ": a diff line outside any hunk"); break }
  }
  if (r < 0) { fail("cannot read " patch); exit }
  if (!bad && (want_pre > 0 || want_post > 0)) fail("hunk " nh[ns] " of " path[ns] " ends before the lines its @@ line counts")
  if (!bad && !("pav-mutant" in has)) fail("no pav-mutant header")
  if (!bad && !("pav-tests" in has)) fail("no pav-tests header")
  if (!bad && ns == 0) fail("no diff --git section")
  for (s = 1; s <= ns && !bad; s++) {
    if (path[s] == "") fail("diff section " s " names no file (+++ line)")
    else if (nh[s] == 0) fail(path[s] ": no hunk")
    for (h = 1; h <= nh[s] && !bad; h++)
      if (npre[s, h] == 0) fail(path[s] " hunk " h ": no context or removed line to place it by")
  }
  if (bad) exit
  for (s = 1; s <= ns; s++) {
    if (only != "" && path[s] != only) continue
    old = path[s]; res = (old in map) ? map[old] : old
    for (h = 1; h <= nh[s]; h++) {
      best = ""
      for (j = 1; j <= npre[s, h]; j++) if (length(pre[s, h, j]) > length(best)) best = pre[s, h, j]
      print "L\t" old "\t" best
    }
    file = tree "/" res; nf = 0
    while ((r = (getline line < file)) > 0) fl[++nf] = line
    close(file)
    if (r < 0) { print "S\t" old "\t" res "\tabsent\t0"; continue }
    status = "ok"; exact = (res == old); delta = 0; last = 0
    for (h = 1; h <= nh[s]; h++) {
      m = npre[s, h]; cnt = 0; where = ""
      for (i = 1; i + m - 1 <= nf; i++) {
        if (fl[i] != pre[s, h, 1]) continue
        for (j = 2; j <= m && fl[i + j - 1] == pre[s, h, j]; j++) ;
        if (j > m) { cnt++; at[s, h] = i; where = where (cnt > 1 ? ", " : "") i }
      }
      what = "hunk " h " (" hdr[s, h] ")"
      if (cnt > 1) {
        status = "twice"
        print "E\t" old "\t" what ": its text occurs " cnt " times in " res " (lines " where "); a defect must land on one place: give the hunk more context"
      } else if (cnt == 0) {
        if (status == "ok") status = "gone"
        print "E\t" old "\t" what ": its text is not in " res
        bi = 0; bs = 0
        for (i = 1; i + m - 1 <= nf; i++) {
          sc = 0; for (j = 1; j <= m; j++) if (fl[i + j - 1] == pre[s, h, j]) sc++
          if (sc > bs) { bs = sc; bi = i }
        }
        if (2 * bs >= m) {
          print "E\t" old "\t  closest at line " bi " (" bs " of " m " lines the same):"
          for (j = 1; j <= m; j++) if (fl[bi + j - 1] != pre[s, h, j]) {
            print "E\t" old "\t    line " (bi + j - 1) ": the hunk has " q(pre[s, h, j])
            print "E\t" old "\t    " sprintf("%" length("line " (bi + j - 1)) "s", "") "  the file has " q(fl[bi + j - 1])
          }
        }
        delete inside; for (i = 1; i <= nf; i++) inside[fl[i]] = 1
        for (j = 1; j <= m; j++) if ((s, h, j) in removed && !(pre[s, h, j] in inside))
          print "E\t" old "\t  the line it changes is nowhere in " res ": " q(pre[s, h, j])
      } else {
        if (at[s, h] <= last) { status = "overlap"; print "E\t" old "\t" what ": placed at line " at[s, h] ", before or inside the hunk above it" }
        last = at[s, h] + m - 1
        if (at[s, h] != ostart[s, h] || nstart[s, h] != at[s, h] + delta) {
          exact = 0
          if (at[s, h] != ostart[s, h]) print "N\t" old "\t" what ": written for line " ostart[s, h] ", found at line " at[s, h] (res == old ? "" : " of " res)
        }
        delta += npost[s, h] - npre[s, h]
      }
    }
    print "S\t" old "\t" res "\t" status "\t" exact
    if (status != "ok" || mode != "apply") continue
    dest = out "/" res; i = 1
    for (h = 1; h <= nh[s]; h++) {
      for (; i < at[s, h]; i++) print fl[i] > dest
      for (j = 1; j <= npost[s, h]; j++) print post[s, h, j] > dest
      i = at[s, h] + npre[s, h]
    }
    for (; i <= nf; i++) print fl[i] > dest
    if (nf == 0 && npost[s, nh[s]] == 0) printf "" > dest
    close(dest)
  }
}'
}

mutant_apply() {
  local dry=0 exact_only=0
  while [[ ${1:-} == --* ]]; do
    case $1 in --dry-run) dry=1 ;; --exact) exact_only=1 ;; *) echo "mutant_apply: unknown option $1" >&2; return 2 ;; esac
    shift
  done
  local patch=$1 tree=$2 out=${3:-$2} name report remap="" files="" old res st ex cand c l kind rest scope
  local exact=1 refused=0 line msgs="" notes="" moves="" resolved=""
  local -a sections=() hits lines
  local -A seen=() longest=() errs=()
  name=${patch##*/}; name=${name%.patch}
  report=$(_mutant_awk "$patch" "$tree" "$out" check "" "")
  while IFS= read -r line; do
    kind=${line%%$'\t'*}; rest=${line#*$'\t'}
    case $kind in
      M) msgs+="$name: malformed: $rest"$'\n' ;;
      S) sections+=("$rest") ;;
      E) errs[${rest%%$'\t'*}]+="$name: ${rest%%$'\t'*}: ${rest#*$'\t'}"$'\n' ;;
      N) notes+="$name: ${rest%%$'\t'*}: ${rest#*$'\t'}"$'\n' ;;
      L) longest[${rest%%$'\t'*}]+="${rest#*$'\t'}"$'\n' ;;
    esac
  done <<<"$report"
  [[ -z $msgs ]] || { printf '%s' "$msgs" >&2; return 2; }
  for line in "${sections[@]}"; do
    IFS=$'\t' read -r old res st ex <<<"$line"
    if [[ $st == absent || $st == gone ]]; then
      # Look for the one file that now holds every hunk's text, exactly once
      # each: among the files of the old one's extension, then among all.
      mapfile -t lines <<<"${longest[$old]%$'\n'}"
      [[ -n $files ]] || files=$(_mutant_tree_files "$tree")
      hits=()
      for scope in same any; do
        if [[ $scope == same ]]; then
          [[ ${old##*/} == *.* ]] || continue
          cand=$(grep -F -e ".${old##*.}" <<<"$files" | grep -E "\.${old##*.}\$")
        else
          cand=$files
        fi
        cand=$(cd "$tree" && grep -v -x -F -e "$old" <<<"$cand" | tr '\n' '\0' | xargs -0r grep -lxF -e "${lines[0]}" -- 2>/dev/null)
        for l in "${lines[@]:1}"; do
          [[ -n $cand ]] || break
          cand=$(cd "$tree" && tr '\n' '\0' <<<"$cand" | xargs -0r grep -lxF -e "$l" -- 2>/dev/null)
        done
        while read -r c; do
          [[ -n $c ]] || continue
          [[ $(_mutant_awk "$patch" "$tree" "$out" check "$old"$'\t'"$c" "$old") == *$'\nS\t'*$'\tok\t'* ]] && hits+=("$c")
        done < <(LC_ALL=C sort <<<"$cand")
        ((${#hits[@]} == 0)) || break
      done
      if ((${#hits[@]} == 1)); then
        moves+="$name: moved: $old -> ${hits[0]}"$'\n'
        remap+="$old"$'\t'"${hits[0]}"$'\n'
        continue
      fi
      if ((${#hits[@]} > 1)); then
        echo "$name: $old: its hunks' text is in several files (${hits[*]}); a defect must land on one place: give the hunks more context" >&2
      elif [[ $st == absent ]]; then
        echo "$name: $old does not exist, and no file of the tree holds the text of every one of its hunks exactly once" >&2
      fi
    fi
    if [[ $st != ok ]]; then
      printf '%s' "${errs[$old]:-}" >&2
      refused=1
    fi
    [[ $ex == 1 ]] || exact=0
  done
  ((refused)) && return 1
  if [[ -n $remap ]]; then
    exact=0 sections=() notes=""
    while IFS= read -r line; do
      [[ $line == S$'\t'* ]] && sections+=("${line#S$'\t'}")
      [[ $line == N$'\t'* ]] && { line=${line#N$'\t'}; notes+="$name: ${line%%$'\t'*}: ${line#*$'\t'}"$'\n'; }
    done < <(_mutant_awk "$patch" "$tree" "$out" check "$remap" "")
  fi
  for line in "${sections[@]}"; do
    IFS=$'\t' read -r old res st ex <<<"$line"
    [[ $st == ok ]] || { echo "$name: $old does not place in $res" >&2; return 1; }
    [[ -z ${seen[$res]:-} ]] || { echo "$name: two of its files land on $res" >&2; return 1; }
    seen[$res]=1
    resolved+="$res"$'\n'
  done
  printf '%s' "$moves$notes" >&2
  if ((!dry)); then
    for res in "${!seen[@]}"; do [[ $res != */* ]] || mkdir -p "$out/${res%/*}"; done
    report=$(_mutant_awk "$patch" "$tree" "$out" apply "$remap" "")
    [[ $(grep -c $'^S\t.*\tok\t' <<<"$report") -eq ${#sections[@]} ]] || { echo "$name: did not apply" >&2; return 1; }
  fi
  printf '%s' "$resolved"
  ((exact_only && !exact)) && return 3
  return 0
}
