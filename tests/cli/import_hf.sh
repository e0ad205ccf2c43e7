#!/usr/bin/env bash
# A Hugging Face config.json is a model (issue 32): `weft import hf` prints the modules and writes
# YAML that every --model flag reads back to the same model; --model takes the config, or its
# directory, directly; a bad config exits 2 with one line naming the file, the field and the rule.
set -euo pipefail
WEFT="$1"
ROOT="$2"
HF="$ROOT/tests/data/hf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$WEFT" import hf "$HF/qwen2.5-vl-7b" --out "$tmp/q.yaml" > "$tmp/summary.txt"
grep -q "^total .* 8.292B$" "$tmp/summary.txt" || { cat "$tmp/summary.txt"; exit 1; }
grep -q "num_layers: 32  # vision_config.depth" "$tmp/q.yaml" || { cat "$tmp/q.yaml"; exit 1; }
"$WEFT" import hf "$HF/qwen2.5-vl-7b/config.json" --json > "$tmp/q.json"
python3 - "$tmp/q.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [m["name"] for m in d["modules"]] == ["vision", "projector", "llm"], d
assert d["total_params"] == sum(m["params"] for m in d["modules"]), d
PY
# The written YAML and the config itself price the same model.
"$WEFT" cost --model "$tmp/q.yaml" --cluster h100 --json > "$tmp/c1.json"
"$WEFT" cost --model "$HF/qwen2.5-vl-7b" --cluster h100 --json > "$tmp/c2.json"
cmp "$tmp/c1.json" "$tmp/c2.json" || { echo "YAML and config.json price differently"; exit 1; }
"$WEFT" compare --model "$HF/qwen2.5-vl-7b/config.json" --cluster h100 --gpus 32 --data mixed \
  --iterations 1 --strategies megatron-1f1b --freeze vision --quiet > "$tmp/cmp.txt"
grep -q "^megatron-1f1b " "$tmp/cmp.txt" || { cat "$tmp/cmp.txt"; exit 1; }
# Errors: exit 2, one line, file + field + rule.
printf '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 8,
  "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 9}' > "$tmp/config.json"
set +e
"$WEFT" import hf "$tmp/config.json" > /dev/null 2> "$tmp/err.txt"; rc=$?
set -e
[[ $rc -eq 2 ]] || { echo "rc=$rc"; exit 1; }
grep -qx "weft: error: $tmp/config.json: num_key_value_heads = 3; must divide num_attention_heads (4)" \
  "$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
set +e
"$WEFT" compare --model "$HF/qwen2.5-vl-7b" --cluster h100 --freeze encoder > /dev/null 2> "$tmp/err2.txt"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q 'freeze: "encoder"; must name a module of the model (vision, projector, llm)' \
  "$tmp/err2.txt" || { echo "rc=$rc"; cat "$tmp/err2.txt"; exit 1; }
echo "import hf ok"
