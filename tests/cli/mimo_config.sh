#!/usr/bin/env bash
# Megatron MIMO parallelism configs through the CLI (issue 16): a malformed config gives exit 2,
# ONE line naming the file, module, field and rule, and writes nothing; `weft plan
# --emit-mimo-config` writes the config of megatron-mimo's / a manual placement, which reads back
# (--placement) to the same plan; a strategy without one says why and writes nothing.
set -euo pipefail
WEFT="$1"
SRC="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

good() {  # the heterogeneous VLM of the issue: vision TP1·PP1·DP8 @0, llm TP4·PP2·DP2 @8
  cat <<'YAML'
module_parallelisms:
  vision:
    tensor_model_parallel_size: 1
    pipeline_model_parallel_size: 1
    context_parallel_size: 1
    data_parallel_size: 8
    rank_offset: 0
  llm:
    tensor_model_parallel_size: 4
    pipeline_model_parallel_size: 2
    context_parallel_size: 1
    data_parallel_size: 2
    rank_offset: 8
YAML
}
good > "$tmp/good.yaml"
diff <(grep -v '^#' "$SRC/presets/placements/vlm-s-mimo-hetero.yaml") "$tmp/good.yaml"
good | sed 's/rank_offset: 8/rank_offset: 4/' > "$tmp/overlap.yaml"
good | grep -v 'data_parallel_size: 8' > "$tmp/dp_unset.yaml"
good | sed 's/data_parallel_size: 2/data_parallel_size: 1/' > "$tmp/world.yaml"
good | sed 's/^  vision:/  images:/' > "$tmp/unknown.yaml"
good | sed 's/tensor_model_parallel_size: 4/tensor_model_parallel_size: 3/' > "$tmp/tp.yaml"

# expect_refused FILE PATTERN: exit 2, exactly one line naming FILE and matching PATTERN, and
# neither the plan nor the emitted config written.
expect_refused() {
  local file="$1" pattern="$2"
  set +e
  "$WEFT" plan --model vlm-s --gpus 24 --data mixed --placement "$file" --out "$tmp/plan.json" \
    --emit-mimo-config "$tmp/emitted.yaml" > "$tmp/out.txt" 2>&1; local rc=$?
  set -e
  [ "$rc" = 2 ] || { echo "$file: expected exit 2, got $rc"; head -c 2000 "$tmp/out.txt"; exit 1; }
  [ "$(wc -l < "$tmp/out.txt")" = 1 ] || { echo "$file: expected one line"; cat "$tmp/out.txt"; exit 1; }
  grep -qF -- "$file" "$tmp/out.txt" || { echo "$file: message does not name it"; cat "$tmp/out.txt"; exit 1; }
  grep -qE -- "$pattern" "$tmp/out.txt" || { echo "$file: no '$pattern'"; cat "$tmp/out.txt"; exit 1; }
  [ ! -e "$tmp/plan.json" ] && [ ! -e "$tmp/emitted.yaml" ] || { echo "$file: something was written"; exit 1; }
}
expect_refused "$tmp/overlap.yaml" "module_parallelisms\.llm\.rank_offset = 4: .*overlap module 'vision'"
expect_refused "$tmp/dp_unset.yaml" "module_parallelisms\.vision\.data_parallel_size is not set"
expect_refused "$tmp/world.yaml" "module_parallelisms\.llm: world size .* = 16.*the job has 24 GPUs"
expect_refused "$tmp/unknown.yaml" "module_parallelisms\.images is not a module of model 'vlm-s'"
expect_refused "$tmp/tp.yaml" "tensor_model_parallel_size = 3; must be a power of two"

# The good config plans; its emitted config is the same one and plans to the same time.
"$WEFT" plan --model vlm-s --gpus 24 --data mixed --placement "$tmp/good.yaml" --out "$tmp/a.json" \
  --emit-mimo-config "$tmp/a.yaml" > "$tmp/a.txt"
diff <(grep -v '^#' "$tmp/a.yaml") "$tmp/good.yaml"
"$WEFT" plan --model vlm-s --gpus 24 --data mixed --placement "$tmp/a.yaml" --out "$tmp/b.json" > "$tmp/b.txt"
[ "$(grep -o 'simulated [0-9.]* s' "$tmp/a.txt" | head -1)" = "$(grep -o 'simulated [0-9.]* s' "$tmp/b.txt" | head -1)" ] \
  || { echo "round trip changed the simulated time"; cat "$tmp/a.txt" "$tmp/b.txt"; exit 1; }

# megatron-mimo's config reads back to the same plan.
"$WEFT" plan --model tiny-vlm --gpus 4 --strategy megatron-mimo --out "$tmp/m.json" \
  --emit-mimo-config "$tmp/m.yaml" > "$tmp/m.txt"
grep -q '^module_parallelisms:' "$tmp/m.yaml"
"$WEFT" plan --model tiny-vlm --gpus 4 --placement "$tmp/m.yaml" --out "$tmp/n.json" > "$tmp/n.txt"
[ "$(grep -o 'simulated [0-9.e-]* s' "$tmp/m.txt" | head -1)" = "$(grep -o 'simulated [0-9.e-]* s' "$tmp/n.txt" | head -1)" ] \
  || { echo "megatron-mimo round trip changed the simulated time"; cat "$tmp/m.txt" "$tmp/n.txt"; exit 1; }

# A strategy whose placement has no MIMO config says why, in one line, and writes nothing.
set +e
"$WEFT" plan --model tiny-vlm --strategy megatron-1f1b --out "$tmp/x.json" \
  --emit-mimo-config "$tmp/x.yaml" > "$tmp/x.txt" 2>&1; rc=$?
set -e
[ "$rc" = 2 ] && [ "$(wc -l < "$tmp/x.txt")" = 1 ] && grep -q "strategy 'megatron-1f1b' has no MIMO parallelism config: .*folded" "$tmp/x.txt" \
  || { echo "megatron-1f1b --emit-mimo-config: rc $rc"; cat "$tmp/x.txt"; exit 1; }
[ ! -e "$tmp/x.json" ] && [ ! -e "$tmp/x.yaml" ]
echo "mimo_config: OK"
