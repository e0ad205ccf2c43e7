#!/usr/bin/env bash
# weft bench dip: every experiment with tiny budgets (exit 0, markdown table shape, JSON, SVG);
# bad input (unknown experiment, bad flag values) exits 2 with one line on stderr.
set -euo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# run <experiment> <expected table header prefix> <min table rows> [flags...]
run() {
  local e="$1" header="$2" rows="$3"; shift 3
  "$WEFT" bench dip "$e" --quiet --threads 1 --json "$tmp/$e.json" --figure-dir "$tmp/fig" "$@" \
    > "$tmp/$e.md"
  grep -qF "$header" "$tmp/$e.md" || { echo "$e: no table header '$header'"; cat "$tmp/$e.md"; exit 1; }
  # Rows of the first table under the header: lines starting with "|" after the separator.
  local n
  n=$(awk -v h="$header" 'index($0, h) == 1 {on = 1; next} on && /^\|---/ {next}
                          on && /^\|/ {n++; next} on {exit} END {print n + 0}' "$tmp/$e.md")
  [ "$n" -ge "$rows" ] || { echo "$e: $n table rows < $rows"; cat "$tmp/$e.md"; exit 1; }
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['experiment']==sys.argv[2], d" \
    "$tmp/$e.json" "$e"
}
run search "| searcher | threads |" 3 --model tiny-vlm --budget-s 0.1 --seeds 1
grep -q "Answer (measured)" "$tmp/search.md"
ls "$tmp/fig/dip_search_tiny-vlm.svg" > /dev/null
run scalability "| microbatches |" 2 --model tiny-vlm --sweep 4,8 --budget-s 0.1 --seeds 1,2
run subbatch "| encoder B |" 2 --model tiny-vlm --sweep 1,4 --iterations 1 --budget-s 0.05
grep -q "(§4 choice)" "$tmp/subbatch.md"
run memory "| strategy | iteration s |" 3 --model tiny-vlm --budget-s 0.05
grep -q "<svg" "$tmp/fig/dip_memory_tiny-vlm.svg"
run xl "| setup |" 1 --model tiny-vlm --iterations 1 --budget-s 0.05
run e2e "| setup |" 1 --model tiny-vlm --iterations 1 --budget-s 0.05
run ablation "| setup |" 1 --model tiny-vlm --iterations 1 --budget-s 0.05
grep -q "Step check" "$tmp/ablation.md"
run dynamic "| iteration |" 2 --model tiny-vlm --iterations 2 --budget-s 0.05

# Bad input: exit code 2 and exactly one line on stderr naming the problem.
bad() {  # expected-substring, args...
  local want="$1"; shift
  set +e
  "$WEFT" bench dip "$@" --quiet > /dev/null 2> "$tmp/err.txt"; local rc=$?
  set -e
  [ "$rc" = 2 ] || { echo "bench dip $*: expected exit 2, got $rc"; cat "$tmp/err.txt"; exit 1; }
  [ "$(wc -l < "$tmp/err.txt")" = 1 ] || { echo "bench dip $*: not one line"; cat "$tmp/err.txt"; exit 1; }
  grep -q -- "$want" "$tmp/err.txt" || { echo "bench dip $*: no '$want'"; cat "$tmp/err.txt"; exit 1; }
}
bad "no-such" no-such
bad "threads" search --threads 0
bad "budget-s" search --budget-s -3
bad "\-\-seeds" search --seeds 1,x
bad "\-\-sweep" scalability --sweep 8,-1
bad "budget-s" search --budget-s abc
bad "no-such-model" memory --model no-such-model
"$WEFT" bench dip --help | grep "Example" >/dev/null
"$WEFT" bench dip --help | grep "scalability" >/dev/null
echo "bench dip smoke ok"
