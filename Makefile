# weft: `make demo` runs the main job, `make test` runs the whole test suite. Both do all set-up
# on a fresh machine (Debian packages, the project's .venv, configure, build) and skip what is done.
SHELL := /bin/bash
.DEFAULT_GOAL := demo

BUILD_DIR ?= build/default
# One clang tree (the `sanitize` preset) serves both: the unit tests under ASan + UBSan and the
# libFuzzer targets (the library is compiled once with -fsanitize=fuzzer-no-link,address,undefined).
SAN_DIR ?= build/sanitize
# Seconds each fuzzer runs in `make fuzz` (CI uses the default).
FUZZ_SECONDS ?= 30
VENV ?= .venv
PYTHON ?= python3
JOBS ?= $(shell nproc)
DEB_PACKAGES := cmake ninja-build g++ pkg-config nlohmann-json3-dev libyaml-cpp-dev libcli11-dev \
  libfmt-dev coinor-libcbc-dev libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev \
  chromium clang libclang-rt-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test deps venv configure build asan fuzz bench golden results clean format

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
	@$(MAKE) --no-print-directory python-dev

# Registers the CMake tree in the venv: a weft-dev.pth in its site-packages lists
# $(BUILD_DIR)/python (_weft) and python/ (the weft package), so `.venv/bin/python -c 'import weft'`
# works from any directory after `make build` / `make test` / `make demo`, without PYTHONPATH and
# without a wheel build. An installed wheel (`make python-install`) would come first anyway
# (site-packages precedes .pth entries), so the file is not written while one is installed
# (`.venv/bin/python -m pip uninstall weft` returns to the build tree) and python-install removes it.
.PHONY: python-dev
python-dev: venv
	@site=$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	if compgen -G "$$site/weft-*.dist-info" > /dev/null; then \
	  rm -f "$$site/weft-dev.pth"; \
	  echo "== weft wheel installed in $(VENV) (make python-install): build tree not registered"; \
	else \
	  printf '%s\n%s\n' "$(abspath $(BUILD_DIR))/python" "$(CURDIR)/python" > "$$site/weft-dev.pth"; \
	  echo "== import weft: $(abspath $(BUILD_DIR))/python + python/ registered in $$site/weft-dev.pth"; \
	fi

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
	cmake --preset sanitize
	cmake --build $(SAN_DIR) -j $(JOBS)
	cd $(SAN_DIR) && ctest --output-on-failure -j $(JOBS) -E '^(cli_|python|bench_python)'

# libFuzzer targets of fuzz/ (clang, ASan + UBSan, the tree of `make asan`), each run FUZZ_SECONDS
# on a corpus seeded from presets/, ../shared/data, `weft data gen`, compiled plans and
# fuzz/regressions/. A crash, leak, timeout (> 10 s on one input) or memory blow-up (> 2 GB) fails;
# the input is left in $(SAN_DIR)/artifacts/ (add it to fuzz/regressions/<fuzzer>/ once fixed).
FUZZERS := model_spec_fuzzer cluster_spec_fuzzer plan_reader_fuzzer placement_fuzzer \
  hf_config_fuzzer data_weft_jsonl_fuzzer data_llava_fuzzer data_coco_fuzzer data_msrvtt_fuzzer \
  data_nextqa_fuzzer data_fairseq_tsv_fuzzer data_audiocaps_fuzzer
fuzz: deps build
	cmake --preset sanitize
	cmake --build $(SAN_DIR) -j $(JOBS) --target weft_fuzzers
	bash fuzz/make_seeds.sh $(SAN_DIR)/seeds $(BUILD_DIR)/weft
	@mkdir -p $(SAN_DIR)/artifacts
	@for f in $(FUZZERS); do \
	  mkdir -p $(SAN_DIR)/corpus/$$f; \
	  echo "== $$f ($(FUZZ_SECONDS) s)"; \
	  $(SAN_DIR)/fuzz/$$f $(SAN_DIR)/corpus/$$f $(SAN_DIR)/seeds/$$f \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
	    -max_len=65536 -print_final_stats=1 \
	    -artifact_prefix=$(SAN_DIR)/artifacts/$$f- 2>$(SAN_DIR)/$$f.log || \
	    { tail -n 40 $(SAN_DIR)/$$f.log; echo "== $$f FAILED (log: $(SAN_DIR)/$$f.log)"; exit 1; }; \
	  grep -E '^stat::number_of_executed_units|^Done' $(SAN_DIR)/$$f.log | tr '\n' ' '; echo; \
	done

bench: build
	@for b in $(BUILD_DIR)/*_benchmark; do echo "== $$b"; $$b --benchmark_repetitions=5 --benchmark_report_aggregates_only=true; done

# Regenerates the golden outputs of tests/golden (only on purpose: review the diff).
golden: build
	WEFT_REGENERATE_GOLDEN=1 bash tests/cli/compare_golden.sh $(BUILD_DIR)/weft $(CURDIR)

# Regenerates the strategy comparison tables (docs/results_compare.md).
results: build
	bash bench/compare_results.sh $(BUILD_DIR)/weft > docs/results_compare.md

# The same setups with every strategy tuned first (weft compare --tune; ~30 min on 2 cores).
.PHONY: results-tuned
results-tuned: build
	bash bench/tuned_results.sh $(BUILD_DIR)/weft > docs/results_tuned.md

# Regenerates docs/strategies_cornstarch.md: Cornstarch Table 4 / Fig. 12 analogue (weft cp) and
# the modality-parallel tables (~10 s).
.PHONY: cp-table
cp-table: build
	{ cat bench/strategies_cornstarch_header.md; echo; \
	  python3 bench/cp_table.py $(BUILD_DIR)/weft --seeds 50; \
	  cat bench/strategies_cornstarch_mp.md; \
	  python3 bench/cornstarch_table.py $(BUILD_DIR)/weft; } > docs/strategies_cornstarch.md.tmp
	mv docs/strategies_cornstarch.md.tmp docs/strategies_cornstarch.md

# Same page; the modality-parallel tables (Table 2 / Fig. 9-10 / Table 3 analogues, dip vs
# cornstarch) come from bench/cornstarch_table.py.
.PHONY: flowtrain-tables
flowtrain-tables: build
	@mkdir -p out
	bench/flowtrain_tables.sh $(BUILD_DIR)/weft > out/flowtrain_tables.md
	@echo "wrote out/flowtrain_tables.md"

# Regenerates docs/results_dflop.md: DFLOP's Fig. 7 / 10 / 11 / 13 / 16 analogues, baselines tuned.
.PHONY: dflop-tables
dflop-tables: build
	python3 bench/dflop_tables.py $(BUILD_DIR)/weft > docs/results_dflop.md.tmp
	mv docs/results_dflop.md.tmp docs/results_dflop.md

.PHONY: cornstarch-tables
cornstarch-tables: cp-table

# Regenerates the DIP figures of issue 4 (docs/results_dip.md, SVGs in docs/figures/) with
# `weft bench dip <experiment>` (defaults of each experiment; ~30 min on 2 cores).
BENCH_DIP_EXPERIMENTS ?= search scalability subbatch memory xl e2e ablation dynamic paper
.PHONY: bench-dip
bench-dip: build
	@mkdir -p docs/figures out/bench-dip
	@{ echo "# DIP figures (generated by \`make bench-dip\`, $$(date -u +%Y-%m-%d))"; echo; \
	  cat bench/results_dip_header.md; echo; \
	  echo "Machine: $$(nproc) CPU cores (load average $$(cut -d' ' -f1 /proc/loadavg) at the start)."; echo; \
	  for e in $(BENCH_DIP_EXPERIMENTS); do \
	    case $$e in \
	      search) t="Fig. 11 — schedule search efficiency: MCTS vs random vs DFS";; \
	      scalability) t="Fig. 12 — search time to a fixed quality vs microbatch count";; \
	      subbatch) t="Fig. 9 — iteration time vs encoder sub-microbatch size";; \
	      memory) t="Fig. 10 — memory timeline of rank 0";; \
	      xl) t="Fig. 14 / Table 6 — large-scale simulation";; \
	      e2e) t="Fig. 8a — end-to-end comparison";; \
	      ablation) t="Table 5 — ablation";; \
	      dynamic) t="Fig. 8b — dynamic workload";; \
	      paper) t="DIP on DIP's own setup — Tables 4, 5, 6 and Fig. 8a side by side with the paper";; \
	      *) t="$$e";; \
	    esac; \
	    start=$$(date +%s); \
	    echo "## $$t (\`$$e\`)"; echo; \
	    echo "\`weft bench dip $$e --json out/bench-dip/$$e.json --figure-dir docs/figures\`"; echo; \
	    $(BUILD_DIR)/weft bench dip $$e --quiet --json out/bench-dip/$$e.json \
	      --figure-dir docs/figures || exit 1; \
	    if [ $$e = paper ]; then echo; cat bench/results_dip_paper_notes.md; fi; \
	    echo; echo "(wall time $$(( $$(date +%s) - start )) s; load average $$(cut -d' ' -f1 /proc/loadavg) at the end)"; \
	    echo; \
	  done; } > docs/results_dip.md.tmp
	mv docs/results_dip.md.tmp docs/results_dip.md

# `pip install ./python` into the project's .venv (scikit-build-core builds the C++ core and _weft
# from the repository root; a wheel build of its own, so not part of `make test`). Removes the
# build-tree registration (weft-dev.pth, see python-dev) so the wheel is what `import weft` loads.
.PHONY: python-install
python-install: deps venv
	rm -f "$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/weft-dev.pth"
	$(VENV)/bin/python -m pip install --no-build-isolation ./python
	cd /tmp && $(CURDIR)/$(VENV)/bin/python -c "import weft; print('weft', weft.__file__, len(weft.strategy_names()), 'strategies')"

format:
	find include src tools tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf build .deps-stamp
