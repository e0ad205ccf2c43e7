"""Bounded, deterministic fuzz of the bindings (issue 15): mutated plans, model and cluster specs
and data files go through weft.validate_plan / load_model / load_cluster / read_samples. Every
failure must be a ValueError whose message is one line without control bytes; anything else (another
exception type, or the interpreter dying) is a finding. Each target runs in a child interpreter so
that a crash is reported with its seed and input instead of killing the test session.

The C++ readers are fuzzed for real by libFuzzer (`make fuzz`, fuzz/); this checks the Python
boundary on the same kinds of input.
"""
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
REGRESSIONS = ROOT / "fuzz" / "regressions"
SEED = 15
COUNT = 150  # mutated inputs per target (about 1-3 s each)

# Tokens spliced into inputs: structure, huge / odd numbers, control bytes, duplicate keys.
TOKENS = [
    "{", "}", "[", "]", ":", ",", "\"", "\n", "\t", "\x00", "\x1b[K", "\xff", "- ", "  ", "#",
    "1e-320", "1e308", "-1", "2147483648", "9223372036854775808", "nan", ".inf", "0x10", "~",
    "null", "true", "use: ../../etc/passwd", "use: /dev/zero", "modules:", "num_layers: 3200",
    "\"num_replicas\": 1,", "\"frames\": 2000000000", "&a", "*a", "!!binary", "? ", "|", ">",
]


def _mutate(rng, text):
    data = list(text)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(5)
        pos = rng.randint(0, len(data))
        if op == 0 and data:  # delete a span
            del data[pos:pos + rng.randint(1, 16)]
        elif op == 1:  # insert a token
            data[pos:pos] = list(rng.choice(TOKENS))
        elif op == 2 and data:  # replace a byte
            data[min(pos, len(data) - 1)] = chr(rng.randrange(256))
        elif op == 3 and data:  # duplicate a line (duplicate keys)
            lines = "".join(data).split("\n")
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            data = list("\n".join(lines))
        else:  # truncate
            data = data[:pos]
    return "".join(data)


def _seeds(target):
    if target == "plan":
        return [(ROOT / "python/tests/data/1f1b_p2_m4.plan.json").read_text()]
    if target == "model":
        names = ["tiny-vlm.yaml", "tiny-valm.yaml", "llava-ov-llama3-8b.yaml", "t2v-s.yaml"]
        return [(ROOT / "presets/models" / n).read_text() for n in names]
    if target == "cluster":
        return [p.read_text() for p in sorted((ROOT / "presets/clusters").glob("*.yaml"))]
    seeds = []
    for d in sorted(REGRESSIONS.glob("data_*_fuzzer")):
        for p in sorted(d.iterdir()):
            if p.stat().st_size > 0:
                seeds.append((p.suffix or ".jsonl", p.read_text(errors="replace")))
    return seeds


def _run_target(target, seed, count):
    """Runs in the child: returns normally, or raises AssertionError naming the input."""
    import weft

    rng = random.Random(seed)
    seeds = _seeds(target)
    tmp = tempfile.mkdtemp(prefix="weft_fuzz_")
    outcomes = {"ok": 0, "value_error": 0}
    for i in range(count):
        seed_input = rng.choice(seeds)
        suffix = ".yaml"
        if target == "data":
            suffix, seed_input = seed_input
        text = _mutate(rng, seed_input)
        try:
            if target == "plan":
                weft.validate_plan(text)
            else:
                path = os.path.join(tmp, f"input{i % 4}{suffix}")
                with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                    f.write(text)
                if target == "model":
                    weft.load_model(path)
                elif target == "cluster":
                    weft.load_cluster(path)
                else:
                    weft.read_samples(path, 64)
            outcomes["ok"] += 1
        except ValueError as e:
            message = str(e)
            bad = [c for c in message if ord(c) < 0x20 or ord(c) == 0x7f]
            if not message or bad or len(message) > 2048:
                raise AssertionError(f"{target} input {i}: bad message {message!r} for {text!r}")
            outcomes["value_error"] += 1
        except Exception as e:  # noqa: BLE001 - any other type is a finding
            raise AssertionError(f"{target} input {i}: {type(e).__name__}: {e} for {text!r}")
    print(json.dumps(outcomes))


@pytest.mark.parametrize("target", ["plan", "model", "cluster", "data"])
def test_mutated_inputs_give_one_line_value_errors(target):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, __file__, target, str(SEED), str(COUNT)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, (
        f"child exited {proc.returncode} (negative: killed by a signal)\n"
        f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    outcomes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcomes["ok"] + outcomes["value_error"] == COUNT
    assert outcomes["value_error"] > 0  # the mutations do reach the error paths


# Every binding that takes a file path checks it before opening (weft::CheckInputFile): a device, a
# FIFO (which would block) or a directory is a one-line ValueError naming the path, never a hang.
FILE_INPUTS = {
    "load_model": lambda weft, p: weft.load_model(p),
    "load_cluster": lambda weft, p: weft.load_cluster(p),
    "read_samples": lambda weft, p: weft.read_samples(p, 4),
    "plan model": lambda weft, p: weft.plan("megatron-1f1b", p),
    "plan data": lambda weft, p: weft.plan("megatron-1f1b", "tiny-vlm", data=p),
    "plan placement": lambda weft, p: weft.plan("manual", "tiny-vlm", placement=p),
    "simulate cluster": lambda weft, p: weft.simulate("megatron-1f1b", "tiny-vlm", cluster=p),
}


@pytest.mark.parametrize("entry", sorted(FILE_INPUTS))
@pytest.mark.parametrize("kind", ["device", "fifo", "directory", "missing"])
def test_file_inputs_refuse_special_files(entry, kind, tmp_path):
    import weft

    path = {"device": "/dev/zero", "fifo": str(tmp_path / "fifo"), "directory": str(tmp_path),
            "missing": str(tmp_path / "no-such.yaml")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(ValueError) as e:
        FILE_INPUTS[entry](weft, path)
    message = str(e.value)
    assert "\n" not in message and path in message, message
    expected = {"device": "not a regular file", "fifo": "not a regular file",
                "directory": "directory", "missing": "no such"}[kind]
    assert expected in message.lower() or kind == "missing", message


if __name__ == "__main__":
    _run_target(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
