#!/usr/bin/env bash
# Builds the seed corpora of the fuzzers under OUT (default build/sanitize/seeds/<fuzzer>/): model and
# cluster presets, placement files, the first records of every file in the shared data, synthetic
# weft JSONL from `weft data gen`, and plans compiled by `weft plan --out` (when WEFT is given), plus
# the checked-in regression inputs of fuzz/regressions/<fuzzer>/.
# Usage: fuzz/make_seeds.sh [OUT] [WEFT binary] [SHARED_DATA dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/build/sanitize/seeds}"
weft="${2:-}"
data="${3:-$root/../shared/data}"
mkdir -p "$out"
seed_dir() { mkdir -p "$out/$1"; echo "$out/$1"; }

d=$(seed_dir model_spec_fuzzer); cp "$root"/presets/models/*.yaml "$d"/
d=$(seed_dir cluster_spec_fuzzer); cp "$root"/presets/clusters/*.yaml "$d"/
d=$(seed_dir placement_fuzzer); cp "$root"/presets/placements/*.yaml "$d"/
d=$(seed_dir hf_config_fuzzer)
for f in "$root"/tests/data/hf/*/*.json; do
  cp "$f" "$d/$(basename "$(dirname "$f")")-$(basename "$f")"
done

# Line formats: the first 12 lines (header included); whole-document JSON: a small valid subset.
head_of() { [ -f "$1" ] && head -n 12 "$1" > "$2" || true; }
head_of "$data/video/msrvtt_10k_clip_metadata.jsonl" "$(seed_dir data_msrvtt_fuzzer)/msrvtt.jsonl"
head_of "$data/video/nextqa_val.csv" "$(seed_dir data_nextqa_fuzzer)/nextqa.csv"
head_of "$data/audio/librispeech_dev-clean_fairseq_manifest.tsv" \
  "$(seed_dir data_fairseq_tsv_fuzzer)/librispeech.tsv"
head_of "$data/audio/audiocaps_v1_val.csv" "$(seed_dir data_audiocaps_fuzzer)/audiocaps.csv"
python3 - "$data" "$(seed_dir data_llava_fuzzer)" "$(seed_dir data_coco_fuzzer)" <<'PY'
import json, os, sys
data, llava_dir, coco_dir = sys.argv[1:4]
p = os.path.join(data, "samples/llava_instruct_150k_subset100.json")
if os.path.exists(p):
    json.dump(json.load(open(p))[:3], open(os.path.join(llava_dir, "llava.json"), "w"))
p = os.path.join(data, "images/coco_captions_val2017.json")
if os.path.exists(p):
    doc = json.load(open(p))
    images = doc["images"][:3]
    ids = {im["id"] for im in images}
    small = {"images": images,
             "annotations": [a for a in doc["annotations"] if a["image_id"] in ids][:6]}
    json.dump(small, open(os.path.join(coco_dir, "coco.json"), "w"))
PY
d=$(seed_dir data_weft_jsonl_fuzzer)
cat > "$d/schema.jsonl" <<'JSONL'
{"id": 12, "text_tokens": 240, "images": [{"w": 640, "h": 480}, {"patch_tokens": 256, "pos": 37}], "videos": [{"frames": 0, "fps": 2, "w": 1280, "h": 720, "duration_s": 12.5}], "audios": [{"duration_s": 7.2}]}
{"id": 13, "text_tokens": 12, "videos": [{"frames": 16, "w": 336, "h": 336}]}
JSONL
if [ -n "$weft" ]; then
  for profile in mixed video audio; do
    "$weft" data gen --profile "$profile" --n 6 --seed 1 > "$d/$profile.jsonl"
  done
  d=$(seed_dir plan_reader_fuzzer)
  "$weft" plan --model tiny-vlm --strategy megatron-1f1b --out "$d/tiny-vlm-1f1b.json" >/dev/null
  "$weft" plan --model tiny-vlm --strategy zb-h1 --out "$d/tiny-vlm-zbh1.json" >/dev/null
  "$weft" plan --model tiny-valm --strategy dip --out "$d/tiny-valm-dip.json" >/dev/null
fi
for r in "$root"/fuzz/regressions/*/; do
  [ -d "$r" ] && d=$(seed_dir "$(basename "$r")") && cp "$r"/* "$d"/ 2>/dev/null || true
done
echo "== seeds in $out: $(find "$out" -type f | wc -l) files"
