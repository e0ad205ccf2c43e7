#!/usr/bin/env bash
# Issue 34 item 11: one rule for every output path (docs/cli.md "Output paths"): a missing folder
# is made only inside an existing one; deeper missing paths exit 2 with one line naming the flag,
# the folder and the rule, before any work, and nothing is created. A run that fails removes the
# folder it made.
set -uo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
rule='weft creates a missing output folder only inside an existing one'

# refused FLAG_LABEL FOLDER -- weft args...: exit 2, one line, and $tmp/no (the missing parent)
# still does not exist.
refused() {
  local label="$1" folder="$2"; shift 3
  local rc
  (cd "$tmp/cwd" && timeout 120 "$WEFT" "$@") > "$tmp/out" 2> "$tmp/err"; rc=$?
  if [[ $rc -ne 2 ]]; then echo "FAIL (exit $rc, want 2): weft $*"; cat "$tmp/err"; fail=1; fi
  if [[ $(wc -l < "$tmp/err") -ne 1 ]] ||
     ! grep -Fq -- "weft: error: $label \"$folder\": missing, and so is its folder" "$tmp/err" ||
     ! grep -Fq -- "$rule" "$tmp/err"; then
    echo "FAIL (message): weft $*"; cat "$tmp/err"; fail=1
  fi
  if [[ -e "$tmp/no" ]]; then echo "FAIL (created $tmp/no): weft $*"; fail=1; rm -rf "$tmp/no"; fi
}
mkdir -p "$tmp/cwd"
"$WEFT" plan --model tiny-vlm --out "$tmp/p.json" > /dev/null || { echo "FAIL: plan"; exit 1; }
n="$tmp/no/x"  # two missing levels

# Every output flag of every subcommand.
refused "--out directory" "$n" -- data gen --profile laion --n 1 --out "$n/d.jsonl"
refused "--out directory" "$n" -- data profile mixed --model tiny-vlm --samples 2 --out "$n/s.jsonl"
refused "--out directory" "$n" -- plan --model tiny-vlm --out "$n/p.json"
refused "--out-dir" "$n" -- plan --model tiny-vlm --iterations 2 --out-dir "$n"
refused "--out-dir" "$n/" -- plan --model tiny-vlm --iterations 2 --out-dir "$n/"
refused "--emit-mimo-config directory" "$n" -- plan --model tiny-vlm --out "$tmp/p.json" --emit-mimo-config "$n/m.yaml"
refused "--trace directory" "$n" -- simulate --model tiny-vlm --trace "$n/t.json"
refused "--svg directory" "$n" -- simulate --model tiny-vlm --svg "$n/t.svg"
refused "--json directory" "$n" -- simulate --model tiny-vlm --json "$n/s.json"
refused "--json directory" "$n" -- compare --model tiny-vlm --strategies gpipe --iterations 1 --quiet --json "$n/c.json"
refused "--report directory" "$n" -- compare --model tiny-vlm --strategies gpipe --iterations 1 --quiet --report "$n/r.html"
refused "--trace-dir" "$n" -- compare --model tiny-vlm --strategies gpipe --iterations 1 --quiet --trace-dir "$n"
refused "--json directory" "$n" -- cp --tokens 4096 --mask EE --ranks 2 --json "$n/cp.json"
refused "--out directory" "$n" -- import hf "$2/tests/data/hf/llama3-8b/config.json" --out "$n/m.yaml"
refused "--out directory" "$n" -- optimize --model tiny-vlm --strategy dflop --out "$n/p.yaml"
refused "--out directory" "$n" -- profile --model tiny-vlm --out "$n/p.json"
refused "--json directory" "$n" -- bench dip search --seeds 1 --quiet --json "$n/b.json"
refused "--markdown directory" "$n" -- bench dip search --seeds 1 --quiet --markdown "$n/b.md"
refused "--figure-dir" "$n" -- bench dip search --seeds 1 --quiet --figure-dir "$n"
refused "--out directory" "$n" -- export --plan "$tmp/p.json" --out "$n/s.csv"

# One missing level inside an existing folder is made (a relative one too).
(cd "$tmp/cwd" && "$WEFT" data gen --profile laion --n 1 --out sub/d.jsonl) > /dev/null 2>&1 ||
  { echo "FAIL: data gen --out sub/d.jsonl"; fail=1; }
[[ -f "$tmp/cwd/sub/d.jsonl" ]] || { echo "FAIL: sub/d.jsonl not written"; fail=1; }
"$WEFT" plan --model tiny-vlm --iterations 2 --out-dir "$tmp/plans/" > /dev/null 2>&1 ||
  { echo "FAIL: plan --out-dir $tmp/plans/"; fail=1; }
[[ -f "$tmp/plans/plan_1.json" ]] || { echo "FAIL: plans/plan_1.json not written"; fail=1; }

# A run that fails after the check leaves no folder behind (the plan does not fit memory).
"$WEFT" plan --model vlm-l --pp 1 --strategy megatron-1f1b --out "$tmp/oom/p.json" > /dev/null 2>&1
[[ $? -eq 2 ]] || { echo "FAIL: the out-of-memory plan did not exit 2"; fail=1; }
[[ -e "$tmp/oom" ]] && { echo "FAIL: a failed plan left $tmp/oom"; fail=1; }

exit $fail
