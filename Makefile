# weft: `make demo` runs the main job, `make test` runs the whole test suite. Both do all set-up
# on a fresh machine (Debian packages, the project's .venv, configure, build) and skip what is done.
SHELL := /bin/bash
.DEFAULT_GOAL := demo

BUILD_DIR ?= build/default
ASAN_DIR ?= build/asan
VENV ?= .venv
PYTHON ?= python3
JOBS ?= $(shell nproc)
DEB_PACKAGES := cmake ninja-build g++ pkg-config nlohmann-json3-dev libyaml-cpp-dev libcli11-dev \
  libfmt-dev coinor-libcbc-dev libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev \
  chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test deps venv configure build asan bench golden results clean format

# --- set-up --------------------------------------------------------------------------------------
deps: .deps-stamp
.deps-stamp: Makefile
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "== Debian packages present"; fi
	@touch $@

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements-dev.txt
	@echo "== creating $(VENV) and installing Python dependencies"
	@[ -x $(VENV)/bin/python ] || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q -r requirements-dev.txt
	@touch $@

configure: $(BUILD_DIR)/build.ninja
$(BUILD_DIR)/build.ninja: .deps-stamp $(VENV)/.stamp CMakeLists.txt
	cmake --preset default -DWEFT_BUILD_PYTHON=ON -DWEFT_PYTHON=$(CURDIR)/$(VENV)/bin/python \
	  -DPython_EXECUTABLE=$(CURDIR)/$(VENV)/bin/python

build: deps venv configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# --- the two commands -----------------------------------------------------------------------------
# The main job: VLM-S on 16 H800 GPUs, mixed data, 20 iterations, every strategy; writes
# out/report.html (open it in a browser), out/compare.json and Perfetto traces in out/traces/.
demo: build
	$(BUILD_DIR)/weft compare --model vlm-s --cluster h800 --gpus 16 --data mixed --iterations 20 \
	  --budget-ms 200 --report out/report.html --json out/compare.json --trace-dir out/traces

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# --- extras ---------------------------------------------------------------------------------------
asan: deps
	cmake --preset asan
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS) -E '^(cli_|python)'

bench: build
	@for b in $(BUILD_DIR)/*_benchmark; do echo "== $$b"; $$b --benchmark_repetitions=5 --benchmark_report_aggregates_only=true; done

# Regenerates the golden outputs of tests/golden (only on purpose: review the diff).
golden: build
	WEFT_REGENERATE_GOLDEN=1 bash tests/cli/compare_golden.sh $(BUILD_DIR)/weft $(CURDIR)

# Regenerates the strategy comparison tables (docs/results_compare.md).
results: build
	bash bench/compare_results.sh $(BUILD_DIR)/weft > docs/results_compare.md

format:
	find include src tools tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf build .deps-stamp
