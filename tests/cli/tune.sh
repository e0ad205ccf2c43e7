#!/usr/bin/env bash
# Issue 33: weft tune's launchable outputs re-read by weft give the same plan and time (Megatron
# argument list, MIMO config, weft's flags); the torchtitan TOML parses with tomllib and names the
# same degrees; bad flags are one line, exit 2.
set -uo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
job=(--model tiny-vlm --gpus 8 --data mixed)
same_sim() {  # $1 $2: two weft simulate JSON files equal but for planning wall time
  diff <(grep -v plan_time_s "$1") <(grep -v plan_time_s "$2") > /dev/null
}

# Megatron-LM argument list vs weft's own flags of the same tuned configuration.
"$WEFT" tune "${job[@]}" --strategies megatron-1f1b --quiet --emit megatron --out "$tmp/m.args" \
  --json "$tmp/t.json" > "$tmp/out" 2> "$tmp/err" || { echo "FAIL: tune --emit megatron"; cat "$tmp/err"; fail=1; }
grep -q '^--tensor-model-parallel-size [0-9]' "$tmp/m.args" && grep -q '^--global-batch-size 8$' "$tmp/m.args" ||
  { echo "FAIL: megatron args"; cat "$tmp/m.args"; fail=1; }
"$WEFT" tune "${job[@]}" --strategies megatron-1f1b --quiet --emit weft --out "$tmp/w.flags" > /dev/null 2>&1 ||
  { echo "FAIL: tune --emit weft"; fail=1; }
"$WEFT" simulate "${job[@]}" --strategy megatron-1f1b $(grep -v '^#' "$tmp/m.args") --iterations 2 \
  --json "$tmp/a.json" > /dev/null 2> "$tmp/err" || { echo "FAIL: simulate with the Megatron args"; cat "$tmp/err"; fail=1; }
"$WEFT" simulate $(grep -v '^#' "$tmp/w.flags") --iterations 2 --json "$tmp/b.json" > /dev/null 2> "$tmp/err" ||
  { echo "FAIL: simulate with weft's flags"; cat "$tmp/err"; fail=1; }
same_sim "$tmp/a.json" "$tmp/b.json" || { echo "FAIL: Megatron args and weft flags simulate differently"; fail=1; }
# The tuned configuration is what the JSON says.
python3 - "$tmp/t.json" "$tmp/w.flags" <<'PY' || fail=1
import json, sys
t = json.load(open(sys.argv[1]))
assert t["schema"] == "weft.tune/v1", t["schema"]
row = t["strategies"][0]
best, default = row["best"], row["default"]
assert best["iteration_time_s"] <= default["iteration_time_s"] + 1e-12, (best, default)
flags = open(sys.argv[2]).read().split()
for key in ("tp", "cp", "pp", "dp", "microbatches"):
    assert flags[flags.index("--" + key) + 1] == str(best[key]), (key, flags, best)
PY
# A checked layer split that the plan does not have is refused in one line.
"$WEFT" simulate "${job[@]}" --strategy megatron-1f1b --pp 2 --decoder-first-pipeline-num-layers 3 \
  > /dev/null 2> "$tmp/err"; rc=$?
[[ $rc -eq 2 && $(wc -l < "$tmp/err") -eq 1 ]] && grep -q 'decoder-first-pipeline-num-layers 3: strategy' "$tmp/err" ||
  { echo "FAIL: a wrong --decoder-first-pipeline-num-layers (rc $rc)"; cat "$tmp/err"; fail=1; }

# MIMO config: the placement re-read with its batch line gives megatron-mimo's plan and time.
"$WEFT" tune "${job[@]}" --strategies megatron-mimo --quiet --emit mimo --out "$tmp/mimo.yaml" \
  --json "$tmp/mm.json" > /dev/null 2> "$tmp/err" || { echo "FAIL: tune --emit mimo"; cat "$tmp/err"; fail=1; }
read -r tp cp pp dp mb < <(python3 -c "
import json,sys; b=json.load(open('$tmp/mm.json'))['strategies'][0]['best']
print(b['tp'], b['cp'], b['pp'], b['dp'], b['microbatches'])")
"$WEFT" simulate "${job[@]}" --placement "$tmp/mimo.yaml" --microbatches "$mb" --global-batch-size 8 \
  --iterations 2 --json "$tmp/c.json" > /dev/null 2> "$tmp/err" || { echo "FAIL: simulate the MIMO config"; cat "$tmp/err"; fail=1; }
"$WEFT" simulate "${job[@]}" --strategy megatron-mimo --tp "$tp" --cp "$cp" --pp "$pp" --dp "$dp" \
  --microbatches "$mb" --global-batch-size 8 --iterations 2 --json "$tmp/d.json" > /dev/null 2> "$tmp/err" ||
  { echo "FAIL: simulate megatron-mimo at the tuned sizes"; cat "$tmp/err"; fail=1; }
same_sim "$tmp/c.json" "$tmp/d.json" || { echo "FAIL: the MIMO config simulates differently"; fail=1; }

# torchtitan: a stock schedule, and weft's own schedule with its CSV.
for s in gpipe dip-interleave; do
  "$WEFT" tune "${job[@]}" --strategies "$s" --quiet --emit torchtitan --out "$tmp/$s.toml" \
    --json "$tmp/$s.json" > /dev/null 2> "$tmp/err" || { echo "FAIL: tune --emit torchtitan ($s)"; cat "$tmp/err"; fail=1; }
  python3 - "$tmp/$s.toml" "$tmp/$s.json" <<'PY' || { echo "FAIL: torchtitan TOML ($s)"; fail=1; }
import json, os, sys, tomllib
cfg = tomllib.load(open(sys.argv[1], "rb"))
best = json.load(open(sys.argv[2]))["strategies"][0]["best"]
par = cfg["parallelism"]
assert par["tensor_parallel_degree"] == best["tp"], par
assert par["context_parallel_degree"] == best["cp"], par
assert par["pipeline_parallel_degree"] == best["pp"], par
assert par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"] == best["dp"], par
assert cfg["training"]["global_batch_size"] == 8
csv = par.get("pipeline_parallel_schedule_csv")
if csv:
    rows = open(csv).read().strip().splitlines()
    assert len(rows) == best["pp"], (len(rows), best)
PY
done

# Bad flags: one line, exit 2, nothing written.
for args in "--emit frobnicate --out $tmp/x" "--emit megatron" "--out $tmp/y" "--max-simulations 0" \
            "--tp 3x" "--tp =2" "--cp-sizes 0" "--strategies nosuch"; do
  "$WEFT" tune "${job[@]}" $args > /dev/null 2> "$tmp/err"; rc=$?
  [[ $rc -eq 2 && $(wc -l < "$tmp/err") -eq 1 ]] || { echo "FAIL: tune $args (rc $rc)"; cat "$tmp/err"; fail=1; }
done
[[ ! -e "$tmp/x" && ! -e "$tmp/y" ]] || { echo "FAIL: a refused run wrote a file"; fail=1; }
# --emit megatron for a strategy Megatron-LM does not run: one line naming the formats.
"$WEFT" tune "${job[@]}" --strategies gpipe --quiet --emit megatron --out "$tmp/g.args" > /dev/null 2> "$tmp/err"; rc=$?
[[ $rc -eq 2 ]] && grep -q "Megatron-LM runs megatron-1f1b and megatron-vpp; 'gpipe'" "$tmp/err" ||
  { echo "FAIL: --emit megatron for gpipe (rc $rc)"; cat "$tmp/err"; fail=1; }
# auto: compare names the best tuned strategy with the runner-up; simulate runs it at its best.
"$WEFT" compare "${job[@]}" --strategies auto --iterations 2 --quiet --json "$tmp/auto.json" > "$tmp/out" 2> "$tmp/err" ||
  { echo "FAIL: compare --strategies auto"; cat "$tmp/err"; fail=1; }
grep -Eq '^auto: [a-z0-9-]+ at tp[0-9]+ cp[0-9]+ pp[0-9]+ dp[0-9]+ mb[0-9]+ .*runner-up' "$tmp/out" ||
  { echo "FAIL: compare auto line"; tail -3 "$tmp/out"; fail=1; }
chosen=$(sed -n 's/^auto: \([a-z0-9-]*\) at .*/\1/p' "$tmp/out")
"$WEFT" simulate "${job[@]}" --strategy auto --iterations 2 > "$tmp/sim" 2> "$tmp/err" ||
  { echo "FAIL: simulate --strategy auto"; cat "$tmp/err"; fail=1; }
grep -q "^auto: $chosen at " "$tmp/sim" && grep -q "^strategy $chosen: " "$tmp/sim" ||
  { echo "FAIL: simulate auto ran another strategy than compare chose ($chosen)"; head -3 "$tmp/sim"; fail=1; }
# compare --tune: every row at its tuned configuration, tuned no slower than compare's own.
"$WEFT" compare "${job[@]}" --strategies megatron-1f1b,gpipe --tune --iterations 2 --quiet --json "$tmp/tuned.json" > /dev/null 2>&1 &&
"$WEFT" compare "${job[@]}" --strategies megatron-1f1b,gpipe --iterations 2 --quiet --json "$tmp/plain.json" > /dev/null 2>&1 ||
  { echo "FAIL: compare --tune"; fail=1; }
python3 - "$tmp/tuned.json" "$tmp/plain.json" <<'PY' || { echo "FAIL: compare --tune rows"; fail=1; }
import json, sys
tuned = {s["name"]: s for s in json.load(open(sys.argv[1]))["strategies"]}
plain = {s["name"]: s for s in json.load(open(sys.argv[2]))["strategies"]}
assert set(tuned) == set(plain), (tuned.keys(), plain.keys())
for name, s in tuned.items():
    assert s["description"].startswith("[tuned tp"), s["description"]
    assert s["iteration_time_s"] <= plain[name]["iteration_time_s"] * 1.05, (name, s["iteration_time_s"], plain[name]["iteration_time_s"])
PY
exit $fail
