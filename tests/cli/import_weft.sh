#!/usr/bin/env bash
# `import weft` from the project's .venv with PYTHONPATH unset, from outside the tree: `make build`
# (and so `make test` / `make demo`) registers the CMake tree in the venv (weft-dev.pth, see the
# Makefile's python-dev). Skipped (77) when the checkout has no .venv (a tree configured by hand).
set -euo pipefail
WEFT="$1"
ROOT="$(cd "$2" && pwd)"
PY="$ROOT/.venv/bin/python"
BUILD="$(cd "$(dirname "$WEFT")" && pwd)"
if [ ! -x "$PY" ]; then
  echo "SKIP: no $PY (make build creates the project's venv)"
  exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
env -u PYTHONPATH "$PY" - "$BUILD" "$ROOT" <<'PY'
import os, sys, sysconfig
build, root = (os.path.realpath(p) for p in sys.argv[1:])
try:
    import weft, _weft
except ImportError as e:
    sys.exit(f"import weft from {sys.executable} failed ({e}); run `make build` to register "
             f"{build}/python and {root}/python in the venv (weft-dev.pth)")
assert callable(weft.plan) and "dip" in weft.strategy_names()
assert weft.load_model("tiny-vlm")["modules"][0]["name"] == "vision"
site = os.path.realpath(sysconfig.get_paths()["purelib"])
where = {os.path.dirname(os.path.realpath(m.__file__)) for m in (weft, _weft)}
if where == {os.path.join(root, "python", "weft"), os.path.join(build, "python")}:
    print(f"import weft: this tree ({root}/python, {build}/python)")
elif all(w == site or w.startswith(site + os.sep) for w in where):
    print(f"import weft: the wheel installed in {site} (make python-install)")
else:
    sys.exit(f"import weft loaded {sorted(where)}: neither this tree ({root}, {build}) "
             f"nor a wheel in {site}; rerun `make build` here")
PY
