#!/usr/bin/env bash
# weft simulate, plan -> validate -> export on presets; a corrupted plan is rejected with exit 2.
set -euo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$WEFT" simulate --model t2v-s --data video --strategy zb-h1 --svg "$tmp/t.svg" > "$tmp/sim.txt"
grep -q "lower bound" "$tmp/sim.txt"
grep -q "<svg" "$tmp/t.svg"

for s in megatron-1f1b gpipe zb-h1 optimus nnscaler; do
  "$WEFT" plan --model vlm-s --data mixed --strategy "$s" --out "$tmp/$s.json" > /dev/null
  "$WEFT" validate "$tmp/$s.json" | grep -q "^OK"
done
"$WEFT" plan --model vlm-s --data mixed --strategy megatron-1f1b --iterations 3 --out-dir "$tmp/plans" > "$tmp/plan.txt"
[ "$(ls "$tmp/plans" | wc -l)" = 3 ]
grep -q "budget" "$tmp/plan.txt"
"$WEFT" export --format torch-csv --plan "$tmp/gpipe.json" --out "$tmp/gpipe.csv"
[ -s "$tmp/gpipe.csv" ]

# A plan with one receive removed must fail validation with exit 2 and name rank and action.
python3 - "$tmp/megatron-1f1b.json" "$tmp/broken.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
for rank in plan["ranks"]:
    for i, a in enumerate(rank["actions"]):
        if a["op"] == "irecv":
            del rank["actions"][i]
            break
    else:
        continue
    break
json.dump(plan, open(sys.argv[2], "w"))
PY
set +e
"$WEFT" validate "$tmp/broken.json" > "$tmp/v.txt" 2>&1; rc=$?
set -e
[ "$rc" = 2 ] || { echo "expected exit 2, got $rc"; cat "$tmp/v.txt"; exit 1; }
grep -q "rank" "$tmp/v.txt"
echo "plan round trip ok"
