#!/usr/bin/env bash
# Given vs used, never silent (issue 14 item 4): a data file with malformed lines and a short last
# batch runs, and compare / simulate say on stderr what was given and what was used.
set -euo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$WEFT" data gen --profile coco-llava --n 50 --seed 3 > "$tmp/d.jsonl"
printf 'not json\n{"id": \n[1,2]\n' >> "$tmp/d.jsonl"
"$WEFT" compare --model tiny-vlm --data "$tmp/d.jsonl" --strategies megatron-1f1b,megatron-vpp \
  --iterations 2 --quiet > "$tmp/out.txt" 2> "$tmp/err.txt"
grep -q "warning: .*53 records given, .* samples used (3 malformed" "$tmp/err.txt" || {
  echo "compare did not warn:"; cat "$tmp/err.txt"; exit 1; }
# No strategy fails because of a short last batch (megatron-vpp needs m divisible by P).
if grep -q "error\|needs num_microbatches" "$tmp/out.txt"; then cat "$tmp/out.txt"; exit 1; fi
"$WEFT" simulate --model tiny-vlm --data "$tmp/d.jsonl" > /dev/null 2> "$tmp/err2.txt"
grep -q "3 malformed" "$tmp/err2.txt" || { echo "simulate did not warn:"; cat "$tmp/err2.txt"; exit 1; }
echo "data warnings ok"
