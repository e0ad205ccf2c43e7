#!/usr/bin/env bash
# Issue 35: `weft cost --fit DIR --cluster NAME [--out FILE]` fits a cluster's efficiencies to
# the vidur profiles of its GPU; a cluster without profiles, or --out without --fit, is one
# line and exit 2. Runs on a synthetic profile (no shared data needed).
set -uo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# A vidur-layout profile of a small Llama-like model on "a40", latencies proportional to tokens.
mkdir -p "$tmp/timings/vidur"
{
  printf 'time_stats.emb.median,time_stats.input_layernorm.median,time_stats.attn_pre_proj.median,'
  printf 'time_stats.attn_rope.median,time_stats.attn_post_proj.median,time_stats.mlp_up_proj.median,'
  printf 'time_stats.mlp_act.median,time_stats.mlp_down_proj.median,time_stats.add.median,'
  printf 'n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers\n'
  awk 'BEGIN { for (t = 256; t <= 4096; t *= 2)
    printf "%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,16,16,2048,5504,32000,True,%d,1\n",
      t*1e-5, t*2e-5, t*1e-4, t*2e-5, t*5e-5, t*3e-4, t*5e-5, t*1.5e-4, t*3e-5, t }'
} > "$tmp/timings/vidur/compute_a40_org_tiny_mlp.csv"

expect_error() {  # expect_error "regex" -- weft args...
  local pattern="$1"; shift 2
  timeout 60 "$WEFT" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [[ $rc -ne 2 ]] || [[ $(wc -l < "$tmp/err") -ne 1 ]] || ! grep -Eq -- "$pattern" "$tmp/err"; then
    echo "FAIL (exit $rc, want 2 and one line /$pattern/): weft $*"; cat "$tmp/err"; fail=1
  fi
}

expect_error '^weft: error: --cluster h100: no vidur profile .*compute_h100_\*_mlp.csv to fit on \(profiled GPUs: a40\)$' \
  -- cost --fit "$tmp/timings" --cluster h100
expect_error '^weft: error: --fit needs --cluster' -- cost --fit "$tmp/timings"
expect_error '^weft: error: --out needs --fit DIR' -- cost --model tiny-vlm --out "$tmp/x.yaml"
expect_error 'no compute_<gpu>_\*_mlp.csv' -- cost --fit "$tmp/none" --cluster a40

# The fit prints the fitted line, one model => in-sample note, and --out writes a preset that
# loads back with exactly that line.
if ! "$WEFT" cost --fit "$tmp/timings" --cluster a40 --out "$tmp/a40.yaml" > "$tmp/fit.txt" 2> "$tmp/err"; then
  echo "FAIL: cost --fit a40"; cat "$tmp/err"; fail=1
fi
grep -q '^efficiency: {compute: ' "$tmp/fit.txt" || { echo "FAIL: no fitted line"; cat "$tmp/fit.txt"; fail=1; }
grep -q 'leave-one-model-out is impossible' "$tmp/fit.txt" || { echo "FAIL: no in-sample note"; fail=1; }
line=$(grep '^efficiency: ' "$tmp/fit.txt")
grep -qxF "$line" "$tmp/a40.yaml" || { echo "FAIL: --out lacks the fitted line"; fail=1; }
grep -q '^# fit: `weft cost --fit ' "$tmp/a40.yaml" || { echo "FAIL: --out lacks provenance"; fail=1; }
"$WEFT" cost --model tiny-vlm --cluster "$tmp/a40.yaml" > /dev/null 2> "$tmp/err" || { echo "FAIL: written preset does not load"; cat "$tmp/err"; fail=1; }
# Deterministic: a second fit prints the same line.
"$WEFT" cost --fit "$tmp/timings" --cluster a40 > "$tmp/fit2.txt" 2>/dev/null
[[ "$(grep '^efficiency: ' "$tmp/fit2.txt")" == "$line" ]] || { echo "FAIL: fit not deterministic"; fail=1; }

exit $fail
