#!/usr/bin/env bash
# weft compare end to end: table, JSON keys, HTML and traces; bad input exits 2 with one line.
set -euo pipefail
WEFT="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$WEFT" compare --model vlm-s --cluster h800 --gpus 16 --data mixed --iterations 3 --quiet \
  --json "$tmp/c.json" --report "$tmp/r.html" --trace-dir "$tmp/traces" > "$tmp/out.txt"
grep -q "megatron-1f1b" "$tmp/out.txt"
python3 - "$tmp/c.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = [s["name"] for s in d["strategies"]]
assert "megatron-1f1b" in names and "nnscaler" in names, names
for s in d["strategies"]:
    if s.get("error"):
        continue
    for key in ["iteration_time_s", "throughput_samples_per_s", "mfu", "bubble_ratio",
                "peak_memory_bytes", "lower_bound_s", "oom"]:
        assert key in s, (s["name"], key)
    assert s["iteration_time_s"] >= s["lower_bound_s"] > 0, s["name"]
    assert 0 < s["mfu"] < 1, s["name"]
print("json ok:", len(names), "strategies")
PY
grep -q "megatron-1f1b" "$tmp/r.html"
# The report's memory chart of every strategy that ran is the group holding the table's peak
# GiB (not the first group); every time axis has one unit; each timeline has its own axis.
python3 - "$tmp/c.json" "$tmp/r.html" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
html = open(sys.argv[2]).read()
sections = dict(re.findall(r'<section class="strategy" id="[^"]*">\n<h3>(.*?)</h3>(.*?)</section>',
                           html, re.S))
drawn = 0
for s in d["strategies"]:
    if s.get("error"):
        continue
    sec = sections[s["name"]]
    peak = "%.2f" % (s["peak_memory_bytes"] / 2**30)
    assert "holds the strategy&#39;s peak: %s GiB per GPU" % peak in sec, (s["name"], peak)
    assert re.search(r">memory per GPU of [^<]* \(peak group, \d+ of \d+\), iteration \d", sec)
    drawn += 1
units = set(re.findall(r"time \((\w+)\)", html))
assert len(units) == 1, units
ends = re.findall(r'class="time-axis" data-end-s="([^"]*)"', html)
assert len(ends) == drawn and len(set(ends)) > 1, ends
assert "not a bound over all placements" in html
print("report ok:", drawn, "memory charts at the table's peak, axes in", units.pop())
PY
ls "$tmp/traces"/megatron-1f1b.trace.json > /dev/null

# Bad input: exit code 2, one line on stderr naming the problem, nothing written.
set +e
"$WEFT" compare --model no-such-model --json "$tmp/bad.json" 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" = 2 ] || { echo "expected exit 2, got $rc"; exit 1; }
[ "$(wc -l < "$tmp/err.txt")" = 1 ] || { cat "$tmp/err.txt"; exit 1; }
grep -q "no-such-model" "$tmp/err.txt"
[ ! -e "$tmp/bad.json" ]
set +e
"$WEFT" compare --model vlm-s --data /nonexistent/file.jsonl 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "file.jsonl" "$tmp/err.txt"
# Help shows an example.
"$WEFT" compare --help > "$tmp/help.txt"; grep -q "Example" "$tmp/help.txt"
# The help lists the strategies itself (no pointer to a flag that does not exist).
grep -q "megatron-1f1b, megatron-vpp" "$tmp/help.txt"; ! grep -q -- "--list" "$tmp/help.txt"
"$WEFT" simulate --help > "$tmp/help.txt"; grep -q "dip-partition-only" "$tmp/help.txt"
"$WEFT" --help > "$tmp/help.txt"; grep -q "Example" "$tmp/help.txt"
echo "compare smoke ok"
