#!/usr/bin/env bash
# Every shipped placement (presets/placements/*.yaml) names in its comment the `weft simulate`
# command it is meant for (issue 34 item 2). Run each one, and the same job with `weft plan
# --out` (which validates the plan before writing it): exit 0, no out-of-memory group, a valid
# plan. A file without such a command fails.
set -euo pipefail
WEFT="$1"
SRC="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$SRC"
count=0
for f in presets/placements/*.yaml; do
  # The comment's command: "#   weft simulate ..." plus "\"-continued comment lines.
  cmd=$(awk '/^#[[:space:]]+weft simulate /{on=1} on{sub(/^#[[:space:]]*/, ""); line=line $0 " ";
             if ($0 !~ /\\$/) {print line; exit}}' "$f" | sed 's/\\ / /g')
  [ -n "$cmd" ] || { echo "$f: no '#   weft simulate ...' command in its comment"; exit 1; }
  args=${cmd#weft simulate }
  case " $args " in *" --placement $f "*) ;; *) echo "$f: its command does not place it: $cmd"; exit 1;; esac
  # shellcheck disable=SC2086
  "$WEFT" simulate $args > "$tmp/sim.txt" 2>&1 || { echo "$f: '$cmd' failed"; cat "$tmp/sim.txt"; exit 1; }
  if grep -q "OUT OF MEMORY" "$tmp/sim.txt"; then echo "$f: out of memory"; grep "OUT OF MEMORY" "$tmp/sim.txt"; exit 1; fi
  rm -rf "$tmp/plan"
  # shellcheck disable=SC2086
  "$WEFT" plan $args --out "$tmp/plan" > "$tmp/plan.txt" 2>&1 || { echo "$f: weft plan failed"; cat "$tmp/plan.txt"; exit 1; }
  grep "valid plan" "$tmp/plan.txt" > /dev/null || { echo "$f: weft plan did not validate"; cat "$tmp/plan.txt"; exit 1; }
  count=$((count + 1))
done
[ "$count" -ge 8 ] || { echo "only $count placements"; exit 1; }
echo "ok: $count shipped placements simulate, plan and validate"
