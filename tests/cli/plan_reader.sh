#!/usr/bin/env bash
# The hardened plan reader through the CLI: hostile or stale files give exit 2 and ONE line
# (never a crash), and `weft export` writes nothing for a plan that `weft validate` rejects.
set -euo pipefail
WEFT="$1"
SRC="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
good="$SRC/python/tests/data/1f1b_p2_m4.plan.json"

# expect_refused FILE PATTERN [weft args...]: exit 2, exactly one line of output, matching PATTERN.
expect_refused() {
  local file="$1" pattern="$2"; shift 2
  set +e
  "$WEFT" "$@" > "$tmp/out.txt" 2>&1; local rc=$?
  set -e
  [ "$rc" = 2 ] || { echo "$*: expected exit 2, got $rc"; head -c 2000 "$tmp/out.txt"; exit 1; }
  [ "$(wc -l < "$tmp/out.txt")" = 1 ] || { echo "$*: expected one line"; head -c 2000 "$tmp/out.txt"; exit 1; }
  grep -qF -- "$file" "$tmp/out.txt" || { echo "$*: message does not name $file"; cat "$tmp/out.txt"; exit 1; }
  grep -qE -- "$pattern" "$tmp/out.txt" || { echo "$*: no '$pattern'"; cat "$tmp/out.txt"; exit 1; }
}

"$WEFT" validate "$good" | grep "^OK" >/dev/null

python3 - "$good" "$tmp" <<'PY'
import json, sys
good, tmp = sys.argv[1], sys.argv[2]
open(f"{tmp}/deep.json", "w").write("[" * 80000 + "]" * 80000)
text = open(good).read()
open(f"{tmp}/v1.json", "w").write(text.replace("weft.plan/v3", "weft.plan/v1"))
open(f"{tmp}/v2.json", "w").write(text.replace("weft.plan/v3", "weft.plan/v2"))
plan = json.loads(text)
plan["ranks"][0]["static_bytes"] = 9223372036854775807
json.dump(plan, open(f"{tmp}/huge.json", "w"))
plan = json.loads(text)
next(a for a in plan["ranks"][0]["actions"] if a["op"] == "isend")["peer"] = 4294967296
json.dump(plan, open(f"{tmp}/peer.json", "w"))
plan = json.loads(text)
plan["ranks"][0]["actions"][0]["stage"]["module"] = len(plan["modules"])
json.dump(plan, open(f"{tmp}/module.json", "w"))
plan = json.loads(text)  # one receive removed: reads fine, does not validate
for rank in plan["ranks"]:
    i = next((i for i, a in enumerate(rank["actions"]) if a["op"] == "irecv"), None)
    if i is not None:
        del rank["actions"][i]
        break
json.dump(plan, open(f"{tmp}/broken.json", "w"))
PY

expect_refused "$tmp/deep.json" "JSON nested deeper than 32 levels" validate "$tmp/deep.json"
expect_refused "$tmp/v1.json" "weft.plan/v1 is no longer read; regenerate it" validate "$tmp/v1.json"
expect_refused "$tmp/v2.json" "weft.plan/v2 is no longer read; regenerate it with .weft plan \.\.\. --out FILE. \(writes weft.plan/v3\)" validate "$tmp/v2.json"
expect_refused "$tmp/huge.json" "ranks\[0\]\.static_bytes = 9223372036854775807; must be <=" validate "$tmp/huge.json"
expect_refused "$tmp/peer.json" "peer = 4294967296; must be <= 2147483647" validate "$tmp/peer.json"
expect_refused "$tmp/module.json" "stage\.module = 1; must be < 1" validate "$tmp/module.json"
expect_refused "$tmp/broken.json" "rank [0-9]+ action [0-9]+ \(irecv" validate "$tmp/broken.json"
cp "$tmp/out.txt" "$tmp/validate_broken.txt"

# export: the same refusals, and no file written.
expect_refused "$tmp/deep.json" "JSON nested deeper" export --plan "$tmp/deep.json" --out "$tmp/deep.csv"
expect_refused "$tmp/broken.json" "rank [0-9]+ action [0-9]+ \(irecv" export --plan "$tmp/broken.json" --out "$tmp/broken.csv"
cmp "$tmp/out.txt" "$tmp/validate_broken.txt" || { echo "export and validate disagree"; exit 1; }
[ ! -e "$tmp/deep.csv" ] && [ ! -e "$tmp/broken.csv" ] || { echo "export wrote a file"; exit 1; }
ls "$tmp" | grep -v '\.json$\|\.txt$' && { echo "export left a temp file"; exit 1; }

"$WEFT" export --plan "$good" --out "$tmp/good.csv" 2> /dev/null
[ -s "$tmp/good.csv" ]
echo "plan reader ok"
