# The two commands the README opens with: `make demo` and `make test`.
# Both set up a virtual environment from nothing but Python 3.11 and pip.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck docs bench bench-quick clean

$(STAMP): pyproject.toml bench/pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH (or: make PY=python3)"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]' -e ./bench  # the benchmarks: a plug-in distribution
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/wheel-engine demo

test: $(STAMP) lint typecheck
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check wheel_engine journal tests bench examples
	$(BIN)/ruff format --check wheel_engine journal tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/wheel-engine bench

bench-quick: $(STAMP)
	$(BIN)/wheel-engine bench --quick

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache site
