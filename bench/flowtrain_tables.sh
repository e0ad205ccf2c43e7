#!/usr/bin/env bash
# FlowTrain's evidence (issue 30, docs/strategies_flowtrain.md): Table 1's ablation and the Fig. 6
# comparison on flowtrain-vlm-6b / 32b / 72b, npu-64gb, 256 devices, infovqa data (sequences of
# up to 8,192 tokens, GBS 256 sequences), plus dip, dflop and cornstarch on the same jobs, and the
# Fig. 8 scaling of flowtrain vs megatron-1f1b (64 / 128 / 256 devices). Simulated with weft's
# cost model; streaming rows are windows of ITER iterations with the first as warm-up.
# Usage: bench/flowtrain_tables.sh [build/default/weft] > out/flowtrain_tables.md
set -euo pipefail
WEFT="${1:-build/default/weft}"
ITER="${ITER:-4}"
S="megatron-1f1b,megatron-mimo,disttrain,flowtrain-no-pool,flowtrain-no-allocator,flowtrain-no-scheduler,flowtrain,dflop,cornstarch,dip"
echo "## FlowTrain tables (bench/flowtrain_tables.sh, $(date -u +%Y-%m-%d), $ITER iterations)"
echo
for m in flowtrain-vlm-6b flowtrain-vlm-32b flowtrain-vlm-72b; do
  echo "### $m, 256 npu-64gb, infovqa"
  echo
  echo '```'
  "$WEFT" compare --model "$m" --data infovqa --iterations "$ITER" --budget-ms 200 \
    --baseline megatron-1f1b --strategies "$S" --quiet 2>&1 | cut -c1-400
  echo '```'
  echo
done
echo "### Scaling (Fig. 8 analogue), flowtrain-vlm-32b, infovqa"
echo
echo '```'
for g in 64 128 256; do
  "$WEFT" compare --model flowtrain-vlm-32b --gpus "$g" --data infovqa --iterations "$ITER" \
    --baseline megatron-1f1b --strategies megatron-1f1b,disttrain,flowtrain --quiet 2>&1 \
    | grep -E "^(megatron-1f1b|disttrain|flowtrain) " | sed "s/^/$g GPUs  /"
done
echo '```'
