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
# Videos longer than the model takes are used by the model's rule, with the counts reported:
# a VLM samples frames to fit its context, a T2V model truncates clips at 16 s.
for i in $(seq 1 12); do
  printf '{"id": %d, "text_tokens": 300, "videos": [{"duration_s": %d, "w": 640, "h": 480}]}\n' \
    "$i" $((i * 30))
done > "$tmp/long.jsonl"
"$WEFT" simulate --model tiny-vlm --data "$tmp/long.jsonl" --context 1024 > "$tmp/v.txt" 2> "$tmp/v_err.txt"
grep -q "frame-sampled to fit the context (ViT frames [0-9]* packed of [0-9]* given)" "$tmp/v_err.txt" || {
  echo "no frame-sampling line:"; cat "$tmp/v_err.txt"; exit 1; }
grep -q "0 rejected by packing" "$tmp/v_err.txt" || { cat "$tmp/v_err.txt"; exit 1; }
"$WEFT" simulate --model tiny-t2v --data "$tmp/long.jsonl" > "$tmp/t.txt" 2> "$tmp/t_err.txt"
grep -q "clip(s) longer than 16 s truncated" "$tmp/t_err.txt" || {
  echo "no clip-truncation line:"; cat "$tmp/t_err.txt"; exit 1; }
echo "data warnings ok"
