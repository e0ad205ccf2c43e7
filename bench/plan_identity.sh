#!/usr/bin/env bash
# The plan-identity set: every strategy's compiled plans and simulated times on fixed jobs, written
# to OUT_DIR (one file per strategy and job). Run it with two builds and `diff -r` the folders: a
# refactor of the planning floor must leave every file byte-identical (issue 28).
#   bash bench/plan_identity.sh build/default/weft /tmp/identity-new
set -euo pipefail
WEFT="$1"; OUT="$2"
mkdir -p "$OUT"
STRATEGIES=$("$WEFT" presets --kind strategies | awk 'NR > 1 {print $1}')
run() {  # name, then the command's arguments
  local name="$1"; shift
  if ! "$WEFT" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err"; then echo "exit $?" >> "$OUT/$name.err"; fi
  sed -i -E 's/[0-9.]+ (ms|s) (planning|to plan)/<t> \2/g; s/plan(ned)? in [0-9.]+ ?m?s/plan in <t>/g' \
    "$OUT/$name.txt" "$OUT/$name.err"
}
for s in $STRATEGIES; do
  run "plan-tiny-vlm-$s" plan --model tiny-vlm --strategy "$s" --budget-work 20 --world \
    --out "$OUT/plan-tiny-vlm-$s.json"
  run "sim-vlm-s-$s" simulate --model vlm-s --data mixed --strategy "$s" --iterations 2 --seed 7 \
    --budget-work 20
done
run plan-tiny-vlm-hetero plan --model tiny-vlm --gpus 4 --world --out "$OUT/plan-tiny-vlm-hetero.json" \
  --placement presets/placements/tiny-vlm-hetero-dp.yaml
run sim-llava-hetero simulate --model llava-ov-qwen2.5-7b --gpus 24 --iterations 2 \
  --placement presets/placements/llava-ov-qwen2.5-7b-hetero-dp.yaml
