#!/usr/bin/env bash
# Issue 34 item 12: --gpus that is not a multiple of a node's GPUs is the GPUs asked for (a partial
# last node) in every command, said in one note; the job's GPU count never rounds up silently.
set -uo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
"$WEFT" compare --model tiny-vlm --cluster a100 --gpus 20 --strategies megatron-1f1b --pp 2 --sequences 20 \
  --iterations 1 --quiet --json "$tmp/c.json" > "$tmp/out" 2> "$tmp/err" || { echo "FAIL: compare --gpus 20"; cat "$tmp/err"; fail=1; }
grep -q '| 20 GPUs |' "$tmp/out" || { echo "FAIL: compare header"; head -2 "$tmp/out"; fail=1; }
grep -q '^note: .*20 GPUs = 2 nodes of 8 + 1 node of 4' "$tmp/out" || { echo "FAIL: compare note"; cat "$tmp/out"; fail=1; }
python3 -c "import json,sys; j=json.load(open('$tmp/c.json')); assert j['num_gpus'] == 20, j['num_gpus']" ||
  { echo "FAIL: compare JSON num_gpus"; fail=1; }
"$WEFT" simulate --model tiny-vlm --cluster a100 --gpus 20 --pp 2 --sequences 20 --iterations 1 > "$tmp/sim" 2> "$tmp/err" ||
  { echo "FAIL: simulate --gpus 20"; cat "$tmp/err"; fail=1; }
grep -q '^note: .*20 GPUs = 2 nodes of 8 + 1 node of 4' "$tmp/sim" || { echo "FAIL: simulate note"; cat "$tmp/sim"; fail=1; }
exit $fail
