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
  "$WEFT" validate "$tmp/$s.json" | grep "^OK" >/dev/null
done
# weft.plan/v3 carries its data: every rank's entry with its chunks, the microbatches with their
# instances, every microbatch the actions name.
python3 - "$tmp/megatron-1f1b.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["schema"] == "weft.plan/v3", p["schema"]
d = p["data"]
assert len(d["ranks"]) == p["num_ranks"] and all(r["chunks"] for r in d["ranks"])
assert d["samples"] and d["sequences"] and d["microbatches"]
mbs = {(m["replica"], m["microbatch"]) for m in d["microbatches"]}
for r, rank in enumerate(p["ranks"]):
    for a in rank["actions"]:
        if a["op"] in ("forward", "backward", "backward_input", "backward_weight"):
            assert (d["ranks"][r]["replica"], a["stage"]["mb"]) in mbs
assert all(len(m["instances"]) == len(p["modules"]) for m in d["microbatches"])
PY
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

# DP > 1: one plan per replica, each naming its replica, each validating; --replica K writes one.
"$WEFT" plan --model tiny-vlm --gpus 4 --pp 2 --strategy gpipe --out "$tmp/dp.json" > "$tmp/dp.txt"
for r in 0 1; do
  "$WEFT" validate "$tmp/dp.r$r.json" > /dev/null
  python3 -c "import json,sys; p=json.load(open(sys.argv[1])); assert p['replica']==$r and p['num_replicas']==2, p['replica']" "$tmp/dp.r$r.json"
  grep -q "dp.r$r.json: replica $r: valid plan" "$tmp/dp.txt"
done
grep -q "slowest of 2 DP replicas" "$tmp/dp.txt"
# --threads 2 compiles and writes the replicas in parallel: the same files, no temporaries left.
"$WEFT" plan --model tiny-vlm --gpus 4 --pp 2 --strategy gpipe --threads 2 --out "$tmp/dp2.json" > /dev/null
for r in 0 1; do cmp "$tmp/dp.r$r.json" "$tmp/dp2.r$r.json"; done
if ls "$tmp" | grep -q '\.tmp'; then echo "temporary files left: $(ls "$tmp")"; exit 1; fi
"$WEFT" plan --model tiny-vlm --gpus 4 --pp 2 --strategy gpipe --replica 1 --out "$tmp/one.json" > /dev/null
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['replica']==1" "$tmp/one.json"
set +e
"$WEFT" plan --model tiny-vlm --gpus 4 --pp 2 --strategy gpipe --replica 5 --out "$tmp/bad.json" 2> "$tmp/e.txt"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "replica" "$tmp/e.txt" && [ ! -e "$tmp/bad.json" ]
echo "plan round trip ok"
