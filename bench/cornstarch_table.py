#!/usr/bin/env python3
"""Cornstarch Table 2 / Fig. 9-10 and Table 3 analogues, and dip vs cornstarch (issue 13).

Runs `weft compare` on the cs-* presets (A40, encoders and LLM frozen, projectors trainable,
data profile `cornstarch`: 24 microbatches of one §6.1 sample) and prints markdown tables:
throughput per GPU used (the paper's normalization) and per GPU of the preset's cluster
(weft's default, idle GPUs charged), the stage counts each system chose, the winner's per-stage
forward + backward times, and dip on the same workloads.

  python3 bench/cornstarch_table.py build/default/weft > out.md   (~1 min on 2 cores)
"""
import json
import re
import subprocess
import sys
import tempfile

VLM_ALM = ["cs-vlm-s", "cs-vlm-m", "cs-vlm-l", "cs-alm-s", "cs-alm-m", "cs-alm-l"]
VALM = ["cs-valm-" + v + a for v in "sml" for a in "sml"]
SYSTEMS = ["colocated", "replicated", "cornstarch", "cornstarch-frozen-unaware"]
# Baselines tuned for the last table (Cornstarch's two, and Megatron-LM's 1F1B chain).
TUNED = ["colocated", "replicated", "megatron-1f1b"]
# Paper Table 2 (VALMs, medium LLM, LLM fixed at 6 stages): Tput/GPU colocated, modality parallel.
PAPER_T2 = {"cs-valm-ss": (3.09, 2.68), "cs-valm-sm": (2.64, 2.73), "cs-valm-sl": (2.57, 2.25),
            "cs-valm-ms": (2.57, 2.29), "cs-valm-mm": (2.21, 2.22), "cs-valm-ml": (1.91, 2.05),
            "cs-valm-ls": (1.95, 1.92), "cs-valm-lm": (1.88, 1.97), "cs-valm-ll": (1.74, 1.82)}
# Paper Table 3 (medium LLM): Tput/GPU frozen-aware, frozen-unaware.
PAPER_T3 = {"cs-vlm-s": (6.47, 5.30), "cs-vlm-m": (5.15, 3.73), "cs-alm-s": (1.94, 1.94),
            "cs-alm-m": (1.96, 1.70), "cs-vlm-l": (3.17, 2.06), "cs-alm-l": (1.98, 1.69)}


def compare(weft, model, systems, extra=()):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        text = subprocess.run([weft, "compare", "--model", model, "--strategies",
                               ",".join(systems), "--iterations", "1", "--quiet", "--json",
                               f.name, *extra], check=True, capture_output=True,
                              text=True).stdout
        d = json.load(open(f.name))
    out = {s["name"]: s for s in d["strategies"]}
    # The JSON has each strategy's one-line summary; the text output its static plan.
    for line in text.splitlines():
        m = re.match(r"  ([\w-]+): (.*)", line)
        if m and m.group(1) in out:
            out[m.group(1)]["description"] = m.group(2)
    return d, out


def gpus_used(s):
    """GPUs of the placement, from the description's group list."""
    desc = s["description"]
    if s["name"].startswith("cornstarch"):
        return int(re.search(r"wins: \S+ iteration [\d.]+ s on (\d+) GPUs", desc).group(1))
    return None


def stages(s):
    desc = s["description"]
    if s["name"].startswith("cornstarch"):
        return re.search(r"; (L=[^;]*?) wins", desc).group(1)
    m = re.search(r"c = (\d+)", desc)
    groups = len(re.findall(r"\bpp\d+:", desc))
    if m:
        return f"L={groups - int(m.group(1))} C={m.group(1)}"
    return f"L={groups} (encoders on every stage)"


def per_gpu(s, used, total):
    if s.get("error") or not s.get("throughput_samples_per_s"):
        return "-", "-"
    t = s["throughput_samples_per_s"]
    return f"{t / used:.3f}", f"{t / total:.3f}"


def main():
    weft = sys.argv[1]
    out = []
    for title, models in (("VLMs and ALMs (Fig. 9 analogue)", VLM_ALM),
                          ("VALMs (Fig. 10 / Table 2 analogue)", VALM)):
        out.append(f"### {title}\n")
        out.append("| model | GPUs | " + " | ".join(
            f"{n} per GPU used (per GPU)" for n in SYSTEMS) +
            " | cornstarch vs best baseline (per GPU used) | stages colocated / cornstarch / unaware |"
            + (" paper Table 2 colocated / modality parallel |" if models is VALM else ""))
        out.append("|" + "---|" * (len(SYSTEMS) + 4 + (1 if models is VALM else 0)))
        for model in models:
            d, s = compare(weft, model, SYSTEMS)
            total = d["num_gpus"]
            # Baselines: P = the LLM's pp of the preset, tp·cp = 4 per group, DP 1.
            used = {}
            for n in SYSTEMS:
                g = gpus_used(s[n])
                used[n] = g if g else 4 * len(re.findall(r"\bpp\d+:", s[n]["description"]))
            cells = [per_gpu(s[n], used[n], total) for n in SYSTEMS]
            best_base = max(float(c[0]) for c in cells[:2] if c[0] != "-")
            ratio = float(cells[2][0]) / best_base
            row = f"| {model} | {total} | " + " | ".join(f"{a} ({b})" for a, b in cells)
            row += f" | {ratio:.2f}× | {stages(s['colocated'])} / {stages(s['cornstarch'])} / " \
                   f"{stages(s['cornstarch-frozen-unaware'])} |"
            if model in PAPER_T2:
                row += f" {PAPER_T2[model][0]} / {PAPER_T2[model][1]} |"
            out.append(row)
        out.append("")
    # Table 3: per-stage fwd+bwd of the cornstarch winner, aware and unaware.
    out.append("### Per-stage forward + backward (Table 3 analogue, ms, representative microbatch)\n")
    out.append("| model | system | stages | per-stage fwd+bwd ms | samples/s per GPU used | paper Tput/GPU aware / unaware |")
    out.append("|---|---|---|---|---|---|")
    for model in VLM_ALM:
        d, s = compare(weft, model, SYSTEMS[2:])
        for n in SYSTEMS[2:]:
            desc = s[n]["description"]
            times = re.search(r"per-stage fwd\+bwd ms (.*?): ", desc).group(1)
            a, b = per_gpu(s[n], gpus_used(s[n]), d["num_gpus"])
            paper = PAPER_T3.get(model, ("", ""))
            out.append(f"| {model} | {n} | {stages(s[n])} | {times} | {a} | "
                       f"{paper[0]} / {paper[1]} |")
    out.append("")
    # Beyond the paper: dip on the same VALM workloads.
    out.append("### Beyond the paper: dip and cornstarch on the same VALM workloads\n")
    out.append("| model | GPUs | cornstarch samples/s (per GPU used) | dip samples/s (per GPU) |")
    out.append("|---|---|---|---|")
    for model in VALM:
        d, s = compare(weft, model, ["cornstarch", "dip"], ["--budget-ms", "300"])
        c, p = s["cornstarch"], s["dip"]
        g = gpus_used(c)
        dip = "-" if p.get("error") else f"{p['throughput_samples_per_s']:.3f} " \
              f"({p['throughput_samples_per_s'] / d['num_gpus']:.3f})"
        out.append(f"| {model} | {d['num_gpus']} | {c['throughput_samples_per_s']:.3f} "
                   f"({c['throughput_samples_per_s'] / g:.3f}) | {dip} |")
    # Issue 33: the same comparison with every baseline tuned first (weft compare --tune: TP, CP,
    # PP, DP and microbatches of each baseline searched on the profile batches; cornstarch
    # searches its own stages). Per GPU of the cluster: a tuned baseline uses every GPU.
    out.append("### Against tuned baselines (weft compare --tune, per GPU of the cluster)\n")
    out.append("Each baseline's configuration chosen by `weft tune` (docs/tune.md) before the "
               "comparison; every system is charged the cluster's GPUs, since a tuned baseline "
               "uses them all. \"untuned\" is the first tables' ratio on the same basis.\n")
    out.append("| model | GPUs | " + " | ".join(f"{n} tuned (configuration)" for n in TUNED)
               + " | cornstarch tuned (configuration) | cornstarch vs best tuned baseline "
               "| untuned |")
    out.append("|" + "---|" * (len(TUNED) + 5))
    for model in VLM_ALM + VALM:
        _, untuned = compare(weft, model, SYSTEMS[:3])
        d, s = compare(weft, model, TUNED + ["cornstarch"], ["--tune"])
        total = d["num_gpus"]
        cells, per = [], {}
        for n in TUNED + ["cornstarch"]:
            r = s[n]
            m = re.match(r"\[tuned ([^\]]+)\]", r["description"])
            conf = m.group(1) if m else "job's"
            if r.get("error") or not r.get("throughput_samples_per_s"):
                cells.append(f"- ({conf})")
            elif r.get("oom"):
                cells.append(f"oom ({conf})")
            else:
                per[n] = r["throughput_samples_per_s"] / total
                cells.append(f"{per[n]:.3f} ({conf})")
        best_base = max((per[n] for n in TUNED if n in per), default=0)
        base_u = max((untuned[n]["throughput_samples_per_s"] or 0) for n in SYSTEMS[:2])
        ratio_u = untuned["cornstarch"]["throughput_samples_per_s"] / base_u if base_u else 0
        ratio = f"{per['cornstarch'] / best_base:.2f}×" if best_base and "cornstarch" in per \
            else "-"
        out.append(f"| {model} | {total} | " + " | ".join(cells) + f" | {ratio} | "
                   f"{ratio_u:.2f}× |")
    out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
