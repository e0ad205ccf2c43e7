#!/usr/bin/env bash
# Golden test: `weft compare --json` of the rule-based strategies on a fixed preset and seed must
# match tests/golden/compare_vlm_s.json (relative tolerance 1e-6 on numbers). Regenerate only on
# purpose: WEFT_REGENERATE_GOLDEN=1 bash tests/cli/compare_golden.sh build/default/weft .
set -euo pipefail
WEFT="$1"; SRC="$2"
GOLDEN="$SRC/tests/golden/compare_vlm_s.json"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$WEFT" compare --model vlm-s --cluster h800 --gpus 16 --data mixed --iterations 3 --seed 7 \
  --strategies megatron-1f1b,megatron-vpp,gpipe,zb-h1,optimus,colocated,replicated,nnscaler \
  --quiet --json "$tmp/out.json" > /dev/null
if [ "${WEFT_REGENERATE_GOLDEN:-0}" = 1 ]; then
  cp "$tmp/out.json" "$GOLDEN"; echo "regenerated $GOLDEN"; exit 0
fi
python3 - "$GOLDEN" "$tmp/out.json" <<'PY'
import json, math, sys
want, got = (json.load(open(p)) for p in sys.argv[1:3])
IGNORE = {"plan_time_s", "plan_time_mean_s"}  # wall time of planning: not reproducible
def cmp(a, b, path):
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            if k not in IGNORE:
                cmp(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            cmp(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"
cmp(want, got, "$")
print("golden ok")
PY
