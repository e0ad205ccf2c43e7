#!/usr/bin/env bash
# Issue 34 item 16: long runs are not silent. weft plan shows progress on stderr when it is a
# terminal (nothing otherwise: logs and pipes stay clean) and says how many plan files and bytes
# it wrote.
set -uo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
"$WEFT" plan --model tiny-vlm --gpus 4 --pp 2 --strategy megatron-1f1b --out-dir "$tmp/p" > "$tmp/out" 2> "$tmp/err" ||
  { echo "FAIL: plan"; cat "$tmp/err"; fail=1; }
[[ ! -s "$tmp/err" ]] || { echo "FAIL: progress off a terminal"; cat "$tmp/err"; fail=1; }
grep -Eq '^iteration 0: 2 plan files, [0-9.]+ MB; simulated' "$tmp/out" || { echo "FAIL: size line"; cat "$tmp/out"; fail=1; }
if command -v script > /dev/null; then
  script -qec "\"$WEFT\" plan --model tiny-vlm --gpus 4 --pp 2 --strategy megatron-1f1b --out-dir $tmp/q" /dev/null \
    > "$tmp/tty" 2>&1 || { echo "FAIL: plan on a terminal"; fail=1; }
  grep -q 'planning iteration 0 (1 of 1) with megatron-1f1b' "$tmp/tty" &&
    grep -q 'plan files compiled and validated' "$tmp/tty" ||
    { echo "FAIL: no progress on a terminal"; cat -v "$tmp/tty" | head; fail=1; }
fi
exit $fail
