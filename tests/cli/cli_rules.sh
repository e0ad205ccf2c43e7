#!/usr/bin/env bash
# Issue 34 item 18: an unknown subcommand is named with the known ones; `weft simulate --json`
# writes the per-iteration summaries Python's weft.simulate returns.
set -uo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# Unknown subcommand: one line naming it and listing the known ones, exit 2.
"$WEFT" frobnicate --model tiny-vlm > "$tmp/out" 2> "$tmp/err"; rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL: weft frobnicate exited $rc, want 2"; fail=1; }
if [[ $(wc -l < "$tmp/err") -ne 1 ]] ||
   ! grep -Eq '^weft: error: unknown subcommand "frobnicate"; known: cost, data, .*compare, simulate, plan, .*import' "$tmp/err"; then
  echo "FAIL: unknown subcommand message:"; cat "$tmp/err"; fail=1
fi
# Escaped, one line.
"$WEFT" $'frob\nnicate' > /dev/null 2> "$tmp/err"; rc=$?
[[ $rc -eq 2 && $(wc -l < "$tmp/err") -eq 1 ]] && grep -Fq 'unknown subcommand "frob\nnicate"' "$tmp/err" ||
  { echo "FAIL: a newline in the subcommand"; cat "$tmp/err"; fail=1; }
# No subcommand at all, and known ones, behave as before.
"$WEFT" > /dev/null 2> "$tmp/err"; rc=$?
[[ $rc -eq 2 ]] && grep -q '^weft: error: A subcommand is required$' "$tmp/err" ||
  { echo "FAIL: weft without a subcommand"; cat "$tmp/err"; fail=1; }
"$WEFT" --version > /dev/null || { echo "FAIL: weft --version"; fail=1; }
"$WEFT" presets > /dev/null || { echo "FAIL: weft presets"; fail=1; }

# simulate --json: one summary per iteration with Python weft.simulate's keys; the job's
# samples/s (the "job:" line with DP > 1).
"$WEFT" simulate --model tiny-vlm --gpus 4 --iterations 2 --first-iteration 3 \
  --json "$tmp/s.json" > "$tmp/out" 2> "$tmp/err" || { echo "FAIL: simulate --json"; cat "$tmp/err"; fail=1; }
python3 - "$tmp/s.json" "$tmp/out" <<'PY' || fail=1
import json, re, sys
runs = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
keys = {"iteration", "iteration_time_s", "lower_bound_s", "bubble_ratio", "mfu", "samples_per_s",
        "tokens_per_s", "peak_memory_bytes", "oom", "plan_time_s", "recompute_used",
        "num_replicas", "slowest_replica", "notes", "data_warning"}
assert isinstance(runs, list) and len(runs) == 2, runs
assert [r["iteration"] for r in runs] == [3, 4], runs
for r in runs:
    assert set(r) == keys, sorted(set(r) ^ keys)
    assert r["iteration_time_s"] > 0 and r["lower_bound_s"] > 0 and 0 < r["mfu"] < 1, r
    assert r["num_replicas"] == 2 and not r["oom"], r
# The printed job line and the JSON agree.
printed = [float(x) for x in re.findall(r"job: ([0-9.e+-]+) samples/s", text)]
assert len(printed) == 2, text
for p, r in zip(printed, runs):
    assert abs(p - r["samples_per_s"]) <= 1e-3 * r["samples_per_s"], (p, r["samples_per_s"])
PY

exit $fail
