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
# Issue 34 item 17: the warning names the first malformed record (file:line: reason), says when
# iterations reuse the file's batches, and data stats names the file of a failure.
grep -q "first malformed record: $tmp/d.jsonl:51: " "$tmp/err.txt" || {
  echo "no first malformed record:"; cat "$tmp/err.txt"; exit 1; }
"$WEFT" simulate --model tiny-vlm --data "$tmp/d.jsonl" --iterations 40 > /dev/null 2> "$tmp/err3.txt"
grep -q "iterations beyond them reuse them in order" "$tmp/err3.txt" || {
  echo "no reuse note:"; cat "$tmp/err3.txt"; exit 1; }
printf '{"id": 1, "text_tokens": 10, "videos": [{"duration_s": 5}]}\n' > "$tmp/nosize.jsonl"
printf 'modules:\n  - {name: llm, kind: llm, num_layers: 2, hidden_size: 64, ffn_hidden_size: 128, num_attention_heads: 4, vocab_size: 100}\n  - {name: dit, kind: dit, modality: video, num_layers: 2, hidden_size: 64, ffn_hidden_size: 128, num_attention_heads: 4, patch_size: 2, in_channels: 4, vae_spatial_downsample: 8, vae_temporal_downsample: 4, text_condition_hidden: 64}\nedges:\n  - llm -> dit\n' > "$tmp/t2v.yaml"
if "$WEFT" data stats "$tmp/nosize.jsonl" --model "$tmp/t2v.yaml" > /dev/null 2> "$tmp/err4.txt"; then
  echo "data stats accepted a sizeless video for a DiT without image_size_px"; exit 1
fi
grep -q "^weft: error: $tmp/nosize.jsonl with model $tmp/t2v.yaml: dit.image_size_px = 0" "$tmp/err4.txt" || {
  echo "data stats error does not name the file:"; cat "$tmp/err4.txt"; exit 1; }
# The Movie Gen DiTs take sizeless videos (MSR-VTT's metadata) at 768 px.
"$WEFT" data stats "$tmp/nosize.jsonl" --model t2v-s > /dev/null || { echo "t2v-s refused a sizeless video"; exit 1; }
echo "data warnings ok"
