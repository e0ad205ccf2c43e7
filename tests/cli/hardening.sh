#!/usr/bin/env bash
# Issue 15: bad numbers, paths and names exit 2 with one line naming the flag, the value and the
# rule, before any work and writing nothing; resource limits are errors, not aborts; the rough
# edges a new user meets (listings, progress without a terminal, legends, defaults).
set -uo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# expect EXIT_CODE "regex of the one-line stderr" -- weft args...
expect() {
  local code="$1" pattern="$2"; shift 3
  local out err rc
  timeout 60 "$WEFT" "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
  if [[ $rc -ne $code ]]; then
    echo "FAIL (exit $rc, want $code): weft $*"; cat "$tmp/err"; fail=1; return
  fi
  if [[ $code -ne 0 ]]; then
    if [[ $(wc -l < "$tmp/err") -ne 1 ]] || ! grep -Eq -- "$pattern" "$tmp/err"; then
      echo "FAIL (message): weft $*"; echo "  want /$pattern/, got:"; cat "$tmp/err"; fail=1
    fi
    if grep -q $'\033' "$tmp/err"; then echo "FAIL (escape codes): weft $*"; fail=1; fi
  fi
}

# 1. Every number has a range, checked before any work.
expect 2 '^weft: error: --gpus: -1 is out of range; must be an integer in \[0, 16384\]' -- simulate --model tiny-vlm --gpus -1
expect 2 '^weft: error: --gpus: 1000000 is out of range' -- simulate --model vlm-s --gpus 1000000
expect 2 '^weft: error: --microbatches: -1 is out of range; must be an integer in \[0, 4096\]' -- simulate --model tiny-vlm --microbatches -1
expect 2 '^weft: error: --microbatches: 2147483647 is out of range' -- simulate --model tiny-vlm --microbatches 2147483647
expect 2 '^weft: error: --sequences: -1 is out of range; must be an integer in \[0, 65536\]' -- simulate --model tiny-vlm --sequences -1
expect 2 '^weft: error: --sequences: 1000000000 is out of range' -- simulate --model tiny-vlm --sequences 1000000000
expect 2 '^weft: error: --context: -5 is out of range; must be an integer in \[0, 1048576\]' -- compare --model tiny-vlm --context -5
expect 2 '^weft: error: --budget-ms: nan is not a finite number; must be a number in \[0, 3600000\]' -- simulate --model tiny-vlm --budget-ms nan
expect 2 '^weft: error: --budget-ms: -1 is out of range' -- simulate --model tiny-vlm --budget-ms -1
expect 2 '^weft: error: --budget-ms: inf is not a finite number' -- compare --model tiny-vlm --budget-ms inf
expect 2 '^weft: error: --budget-ms: 1e308 is out of range' -- plan --model tiny-vlm --budget-ms 1e308 --out "$tmp/p.json"
expect 2 '^weft: error: --budget-work: 0 is out of range; must be an integer in \[1, 100000\]' -- simulate --model tiny-vlm --budget-work 0
expect 2 '^weft: error: --iterations: 1e9 is not an integer; must be an integer in \[1, 10000\]' -- simulate --model tiny-vlm --iterations 1e9
expect 2 '^weft: error: --iterations: 1000000000 is out of range' -- compare --model tiny-vlm --iterations 1000000000
expect 2 '^weft: error: --seed: -1 is out of range; must be an integer in \[0, 18446744073709551615\]' -- simulate --model tiny-vlm --seed -1
expect 2 '^weft: error: --seed: 18446744073709551616 is out of range' -- simulate --model tiny-vlm --seed 18446744073709551616
expect 0 '' -- simulate --model tiny-vlm --seed 18446744073709551615
expect 2 '^weft: error: --threads: 1000 is out of range; must be an integer in \[1, 256\]' -- bench dip search --threads 1000
expect 2 '^weft: error: --threads: 1000 is out of range; must be an integer in \[1, 256\]' -- compare --model tiny-vlm --threads 1000
expect 2 '^weft: error: --n: 100000000 is out of range; must be an integer in \[0, 2000000\] \(.*--iteration' -- data gen --profile mixed --n 100000000
expect 2 '^weft: error: --tp: 3 does not divide the 4 attention heads of module vision; valid --tp for tiny-vlm: 1, 2, 4$' -- cost --model tiny-vlm --cluster h800 --tp 3
expect 2 '^weft: error: --baseline: unknown strategy "nope"; known: megatron-1f1b, .*weft compare --list' -- compare --model tiny-vlm --baseline nope
# Input echoed safely: a newline in a value is escaped, the message stays one line.
expect 2 '^weft: error: --gpus: "1\\n2" is not an integer' -- simulate --model tiny-vlm --gpus $'1\n2'
# The derived batch (microbatches x DP) has the --sequences limit too.
expect 2 '^weft: error: sequences per global batch = 4096000 \(microbatches 4000 x DP 1024\); must be <= 65536' -- simulate --model vlm-s --gpus 16384 --microbatches 4000

# A thread the system cannot start (2 GB address space: 200 stacks of 8 MiB do not fit) is an
# error, not "terminate called without an active exception".
(ulimit -v 2000000; exec "$WEFT" bench dip search --threads 200 --budget-s 1 --seeds 1 --quiet) \
  > "$tmp/out" 2> "$tmp/err"; rc=$?
if grep -q 'AddressSanitizer' "$tmp/err"; then
  :  # a sanitizer build cannot run under an address-space limit
elif [[ $rc -ne 0 ]] && ! { [[ $rc -eq 2 ]] && grep -Eq '^weft: error: (cannot start search thread [0-9]+ of 200: .*|search thread [0-9]+ threw: .*|a search thread threw \(out of memory\)); use fewer threads$' "$tmp/err"; }; then
  echo "FAIL (exit $rc): bench dip search --threads 200 under ulimit -v"; cat "$tmp/err"; fail=1
fi

# A plan that does not fit memory is a user error naming the rank, bytes and capacity.
expect 2 '^weft: error: iteration 0 replica 0: the plan does not fit memory: rank 0 \(pp0\): .*GiB > capacity .*GiB' -- plan --model vlm-l --pp 1 --strategy megatron-1f1b --out "$tmp/oom.json"
[[ -e "$tmp/oom.json" ]] && { echo "FAIL: oom plan written"; fail=1; }
ls "$tmp" | grep -q '^oom.*\.tmp' && { echo "FAIL: temporary plan files left"; fail=1; }

# Input files: a device or FIFO is refused without reading (no hang, no bad_alloc).
expect 2 '^weft: error: --model: file "/dev/zero": not a regular file' -- simulate --model /dev/zero
mkfifo "$tmp/fifo"
expect 2 '^weft: error: --data: file ".*fifo": not a regular file' -- compare --model tiny-vlm --data "$tmp/fifo"
expect 2 '^weft: error: plan: file ".*": is a directory' -- validate "$tmp"

# Output paths are checked before the work, and nothing is written.
expect 2 '^weft: error: --trace-dir "/proc/version": not a directory' -- compare --model tiny-vlm --strategies megatron-1f1b --iterations 1 --json "$tmp/c.json" --trace-dir /proc/version
[[ -e "$tmp/c.json" ]] && { echo "FAIL: c.json written before the trace-dir error"; fail=1; }
expect 2 '^weft: error: --out ".*": is a directory; give a file path' -- plan --model tiny-vlm --out "$tmp"
expect 2 '^weft: error: --out directory "/dev/null": not a directory' -- data gen --profile laion --n 1 --out /dev/null/x
expect 2 '^weft: error: --out "/dev/null": exists and is not a regular file' -- data gen --profile laion --n 1 --out /dev/null
expect 0 '' -- plan --model tiny-vlm --out "$tmp/ok.json"
[[ -e "$tmp/ok.r0.json" || -e "$tmp/ok.json" ]] || { echo "FAIL: plan not written"; fail=1; }
ls "$tmp" | grep -q '\.tmp' && { echo "FAIL: temporary file left"; fail=1; }

# MSR-VTT clips (no frame size) on a T2V preset: one error naming the file, sample and rule.
msrvtt="$2/../shared/data/video/msrvtt_10k_clip_metadata.jsonl"
if [[ -f "$msrvtt" ]]; then
  expect 2 'msrvtt_10k_clip_metadata.jsonl: sample 0 videos\[0\] \(w 0, h 0\): dit.image_size_px = 0; must be > 0 .*give the frame size' -- compare --model tiny-t2v --data "$msrvtt" --iterations 1 --quiet
fi
# Every strategy failing is an error (exit 2), not a table of dashes with exit 0.
expect 2 '^weft: error: every strategy failed on this input; optimus: ' -- compare --model tiny-t2v --strategies optimus --iterations 1 --quiet

# Listings: strategies, data profiles; help texts point to commands that exist.
"$WEFT" compare --list > "$tmp/list" || { echo "FAIL: compare --list"; fail=1; }
grep -q '^dip  *DIP: ' "$tmp/list" || { echo "FAIL: compare --list has no dip line"; cat "$tmp/list"; fail=1; }
[[ $(wc -l < "$tmp/list") -ge 16 ]] || { echo "FAIL: compare --list too short"; fail=1; }
"$WEFT" presets --kind data | grep '^rise-and-fall ' >/dev/null || { echo "FAIL: presets --kind data"; fail=1; }
"$WEFT" presets --kind strategies --json | grep '"name": "megatron-1f1b"' >/dev/null || { echo "FAIL: presets --kind strategies --json"; fail=1; }
for cmd in compare simulate plan cost data presets bench cp validate export; do
  "$WEFT" $cmd --help 2>&1 | { grep -o 'weft [a-z]* --[a-z-]*' || true; } | sort -u | while read -r _ sub flag; do
    "$WEFT" "$sub" --help 2>&1 | grep -- "$flag" >/dev/null || { echo "FAIL: $cmd --help points to weft $sub $flag"; exit 1; }
  done || fail=1
done

for doc in $(for cmd in compare simulate plan cost data presets bench cp validate export; do
               "$WEFT" $cmd --help 2>&1; done | grep -o 'docs/[a-z_]*\.md' | sort -u); do
  [[ -f "$2/$doc" ]] || { echo "FAIL: help points to missing $doc"; fail=1; }
done

# Progress without a terminal: plain lines, no escape codes; the table explains gap LB %.
"$WEFT" compare --model tiny-vlm --strategies megatron-1f1b,gpipe --iterations 2 > "$tmp/out" 2> "$tmp/err"
grep -q $'\033\|\r' "$tmp/err" && { echo "FAIL: escape codes in non-TTY progress"; fail=1; }
[[ $(grep -c 'iteration' "$tmp/err") -ge 4 ]] || { echo "FAIL: progress lines"; cat "$tmp/err"; fail=1; }
grep -q '^gap LB % = simulated time / lower bound - 1' "$tmp/out" || { echo "FAIL: no gap LB legend"; fail=1; }

# cost defaults --cluster from the model's setup like the other commands.
expect 0 '' -- cost --model tiny-vlm
grep -q '^tiny-vlm on a100' "$tmp/out" || { echo "FAIL: cost did not default the cluster"; head -2 "$tmp/out"; fail=1; }
# Setup notes read as a sentence: no stray "; " and "1 GPU".
"$WEFT" simulate --model tiny-vlm --gpus 9 > "$tmp/out" 2>&1
grep -q '^note: 9 GPUs = 1 node of 8 + 1 node of 1; 1 GPU unused by pipeline replicas of tp·pp·cp = 2; dp set to 4 to fill 9 GPUs$' "$tmp/out" || {
  echo "FAIL: setup note"; grep note "$tmp/out"; fail=1; }

[[ $fail -eq 0 ]] && echo "hardening ok"
exit $fail
