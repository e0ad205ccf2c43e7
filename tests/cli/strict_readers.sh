#!/usr/bin/env bash
# Strict readers through the CLI (issue 15): duplicate / misplaced keys, out-of-range numbers,
# unknown data profiles, `use:` of a non-model file, empty and absurd data files, duplicate plan
# keys. Each is exit 2 with ONE line naming the file and the rule, and no raw input bytes.
set -euo pipefail
WEFT="$1"
SRC="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# expect_refused PATTERN weft-args...: exit 2, exactly one line, matching PATTERN, no control bytes.
expect_refused() {
  local pattern="$1"; shift
  set +e
  "$WEFT" "$@" > out.txt 2>&1; local rc=$?
  set -e
  [ "$rc" = 2 ] || { echo "$*: expected exit 2, got $rc"; head -c 2000 out.txt; exit 1; }
  [ "$(wc -l < out.txt)" = 1 ] || { echo "$*: expected one line"; head -c 2000 out.txt; exit 1; }
  grep -qF -- "$pattern" out.txt || { echo "$*: no '$pattern'"; cat out.txt; exit 1; }
  if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' out.txt; then
    echo "$*: raw control bytes in the message"; cat -A out.txt; exit 1
  fi
}

models="$SRC/presets/models"
sed 's/^    num_layers: \(.*\)/    num_layers: \1\n    num_layers: 3200/' "$models/llama3-8b.yaml" > dup.yaml
expect_refused "dup.yaml:8:5: modules[0].num_layers appears twice (first at line 7)" \
  cost --model dup.yaml --cluster h800

head -n -1 "$models/tiny-vlm.yaml" > misplaced.yaml
printf '    all: {tp: 1, pp: 2, dp: 1}\n  modules:\n    - {module: llm, tp: 2}\n' >> misplaced.yaml
expect_refused "(\`modules:\` belongs under the top level or setup.parallel; check its indentation)" \
  plan --model misplaced.yaml --strategy megatron-1f1b --out p.json

sed 's/^  gpus: 2/  gpus: 2\n  data_profile: no-such-profile/' "$models/tiny-vlm.yaml" > profile.yaml
expect_refused 'setup.data_profile = "no-such-profile"; neither a file nor a profile' \
  plan --model profile.yaml --strategy megatron-1f1b --out p.json

sed 's/^intra_node: {bandwidth_bytes_per_s: [^,}]*/intra_node: {bandwidth_bytes_per_s: 1e-320/' \
  "$SRC/presets/clusters/h800.yaml" > bw.yaml
expect_refused "bw.yaml: intra_node.bandwidth_bytes_per_s = 1e-320; must be 0 or in [1000, 1e+16]" \
  cost --model tiny-vlm --cluster bw.yaml

mkdir -p a/b
printf 'secret:\n  SECRET-LINE: 1\n' > secret.txt
printf 'modules:\n  - use: ../../secret.txt\n' > a/b/use.yaml
expect_refused "modules[0].use = ../../secret.txt; is not a model file" \
  cost --model a/b/use.yaml --cluster h800
grep -q SECRET out.txt && { echo "the used file's content is echoed"; cat out.txt; exit 1; }

: > empty.jsonl
expect_refused "empty.jsonl: the file is empty (0 bytes); no samples" data stats empty.jsonl
printf '{"videos": [{"frames": 2000000000}]}\n' > frames.jsonl
expect_refused "videos[0].frames = 2000000000; must be an integer in [0, 16384]" \
  data stats frames.jsonl
printf '{"text_tokens": 1, "\\u001b[2J\\u0007": 2}\n' > control.jsonl
expect_refused '"\x1b[2J\x07" is not a known key' data stats control.jsonl
printf '{"text_tokens": 1, "\x1b[2J": 2}\n' > raw.jsonl
expect_refused 'invalid string: control character U+001B' data stats raw.jsonl

good="$SRC/python/tests/data/1f1b_p2_m4.plan.json"
sed 's/"num_replicas": \([0-9]*\),/"num_replicas": \1, "num_replicas": 7,/' "$good" > dup-plan.json
expect_refused 'key "num_replicas" appears twice in one object; keys must be unique' \
  validate dup-plan.json

# One strict YAML path for every YAML input (issue 34 item 7): an alias bomb (10 levels x 10
# aliases, 10^10 nodes expanded) ran `simulate --model` for minutes; now every reader refuses it
# on the parser's events, as it refuses a second document and a duplicate key.
{
  echo 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]'
  for i in 1 2 3 4 5 6 7 8 9 10; do
    p=$((i - 1)); echo "a$i: &a$i [*a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p]"
  done
} > bomb.yaml
bomb_rule="bomb.yaml:6:50: aliases expand the document past 1048576 nodes"
start=$(date +%s)
expect_refused "$bomb_rule" simulate --model bomb.yaml
expect_refused "$bomb_rule" cost --model tiny-vlm --cluster bomb.yaml
expect_refused "bomb.yaml: line 6, column 50: aliases expand the document past 1048576 nodes" \
  simulate --model tiny-vlm --gpus 4 --placement bomb.yaml
(echo 'module_parallelisms: {llm: {tensor_model_parallel_size: 1}}'; cat bomb.yaml) > mimo-bomb.yaml
expect_refused "mimo-bomb.yaml: line 7, column 50: aliases expand the document past 1048576 nodes" \
  simulate --model tiny-vlm --gpus 4 --placement mimo-bomb.yaml
[ $(( $(date +%s) - start )) -le 10 ] || { echo "alias bombs took over 10 s to refuse"; exit 1; }
printf 'a: &a [1, *a]\n' > cycle.yaml
expect_refused "cycle.yaml:1:11: an alias names a node that contains it" simulate --model cycle.yaml
(cat "$models/tiny-vlm.yaml"; printf -- '---\nname: other\n') > two-docs.yaml
expect_refused "two-docs.yaml:$(( $(wc -l < "$models/tiny-vlm.yaml") + 1 )):1: a second YAML document starts here; a file holds exactly one" \
  simulate --model two-docs.yaml
placements="$SRC/presets/placements"
sed 's/^placement:/placement:\n  microbatches: 2\n  microbatches: 3/' "$placements/tiny-vlm-hetero-dp.yaml" > dup-placement.yaml
line=$(grep -n '^placement:' dup-placement.yaml | cut -d: -f1)
expect_refused "dup-placement.yaml: line $((line + 2)), column 3: placement.microbatches appears twice (first at line $((line + 1)))" \
  simulate --model tiny-vlm --gpus 4 --placement dup-placement.yaml
echo "strict readers: OK"
