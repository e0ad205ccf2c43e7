#!/usr/bin/env bash
# weft cp: the table and JSON for a generated and an explicit layout; every bad-input rule exits 2
# with one line on stderr naming the field and writes nothing.
set -euo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$WEFT" cp --tokens 65536 --mask EE --ranks 8 --json "$tmp/ee.json" > "$tmp/ee.txt"
for m in lpt zigzag ring random; do grep -q "^$m: imbalance" "$tmp/ee.txt"; done
python3 - "$tmp/ee.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["blocks"] == 512 and d["ranks"] == 8, d
for m in d["methods"]:
    blocks = sorted(b for r in m["ranks"] for b in r["blocks"])
    assert blocks == list(range(512)), m["method"]
    loads = [r["key_blocks"] for r in m["ranks"]]
    assert abs(max(loads) / (sum(loads) / 8) - m["imbalance"]) < 1e-12
by = {m["method"]: m["imbalance"] for m in d["methods"]}
assert by["lpt"] <= by["zigzag"] <= by["ring"], by
PY

echo '[["text", 300], [1, 200], ["text", 100], [2, 150], ["text", 250]]' > "$tmp/layout.json"
"$WEFT" cp --layout "$tmp/layout.json" --ranks 4 --method lpt,zigzag --json - | python3 -c \
  'import json,sys; d=json.load(sys.stdin); assert [m["method"] for m in d["methods"]]==["lpt","zigzag"]'

bad() {  # bad <expected substring> <args...>: exit 2, one line, no JSON written
  local want="$1"; shift
  rm -f "$tmp/out.json"
  set +e; "$WEFT" cp "$@" --json "$tmp/out.json" > /dev/null 2> "$tmp/err"; rc=$?; set -e
  [ "$rc" = 2 ] || { echo "expected exit 2, got $rc for: $*"; cat "$tmp/err"; exit 1; }
  [ "$(wc -l < "$tmp/err")" = 1 ] || { echo "not one line for: $*"; cat "$tmp/err"; exit 1; }
  grep -qF -- "$want" "$tmp/err" || { echo "missing '$want' for: $*"; cat "$tmp/err"; exit 1; }
  [ ! -e "$tmp/out.json" ] || { echo "wrote JSON for: $*"; exit 1; }
}
layout() { echo "$1" > "$tmp/l.json"; echo "$tmp/l.json"; }
bad "layout[1][1] = 0; length must be > 0" --layout "$(layout '[["text", 300], [1, 0]]')" --ranks 2
bad "layout[0][1] = -5; length must be > 0" --layout "$(layout '[["text", -5]]')" --ranks 1
bad 'layout[0][0] = "video"; kind must be' --layout "$(layout '[["video", 300]]')" --ranks 1
bad "layout[1][0] = 62; a modality index must lie in 1..61" --layout "$(layout '[["text", 300], [62, 10]]')" --ranks 1
bad "not valid JSON" --layout "$(layout '[["text", 300]')" --ranks 1
# Issue 34 item 8: lengths and the total capped like --tokens (2^24); duplicate keys refused.
bad "layout[0][1] = 1099511627776; length must be at most 16777216 tokens" \
  --layout "$(layout '[["text", 1099511627776]]')" --ranks 1
bad "layout[0][1] = 9223372036854775808; length must be at most 16777216 tokens" \
  --layout "$(layout '[["text", 9223372036854775808]]')" --ranks 1
bad "layout: 33554432 tokens through segment 1; a layout holds at most 16777216 tokens" \
  --layout "$(layout '{"documents": [[["text", 16777216]], [["text", 16777216]]]}')" --ranks 1
bad "a layout holds at most 16777216 tokens" \
  --layout "$(layout '[["text", 16777216], [1, 1]]')" --ranks 1
bad 'key "documents" appears twice in one object; keys must be unique' \
  --layout "$(layout '{"documents": [[["text", 3]]], "documents": [[["text", 5]]]}')" --ranks 1
bad "l.json" --layout "$(layout '[["text", 300]')" --ranks 1
bad "--ranks: 0 is out of range; must be an integer in [1, 4096]" --tokens 4096 --mask EE --ranks 0
bad "--ranks = 40; must be <= blocks (32" --tokens 4096 --mask EE --ranks 40
bad "--tokens = 0; must be > 0" --tokens 0 --mask EE --ranks 2
bad 'mask = "XY"' --tokens 4096 --mask XY --ranks 2
bad 'method = "best"' --tokens 4096 --mask EE --ranks 2 --method lpt,best
bad "exactly one of --mask" --tokens 4096 --ranks 2
echo OK
