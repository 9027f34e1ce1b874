# The two commands the README opens with: `make demo` and `make test`.
# Both set up a virtual environment from nothing but Python 3.11 and pip.
#
# The install builds the compiled core (mypyc, see setup.py) where a C compiler works and the
# pure-Python build where none does; `make test-pure` (or WHEEL_ENGINE_PURE=1 on any target)
# installs and tests the pure build. The stamp names the build installed, and depends on the
# compiled modules' sources: an edit to one rebuilds before the tests run, since an editable
# install's extension modules in the source tree would otherwise shadow the edited .py.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
BUILD := $(if $(filter-out 0,$(WHEEL_ENGINE_PURE)),pure,default)
STAMP := $(VENV)/.installed-$(BUILD)
COMPILED_SOURCES := $(shell $(PY) wheel_engine/_build.py --sources 2>/dev/null)

.PHONY: demo test test-pure pytest lint typecheck docs bench bench-quick clean

$(STAMP): pyproject.toml bench/pyproject.toml setup.py wheel_engine/_build.py $(COMPILED_SOURCES)
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH (or: make PY=python3)"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	rm -f $(VENV)/.installed-*
	WHEEL_ENGINE_PURE=$(if $(filter pure,$(BUILD)),1,0) \
		$(BIN)/pip install -q -e '.[dev]' -e ./bench  # the benchmarks: a plug-in distribution
	$(BIN)/wheel-engine --version
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/wheel-engine demo

test: $(STAMP) lint typecheck pytest

# The whole suite on the pure-Python build (CI runs it besides `make test`); tests/test_build.py
# checks that the pure build is what runs.
test-pure:
	WHEEL_ENGINE_EXPECT_BUILD=pure $(MAKE) --no-print-directory WHEEL_ENGINE_PURE=1 pytest

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check setup.py wheel_engine journal tests bench examples
	$(BIN)/ruff format --check setup.py wheel_engine journal tests bench examples

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
	find wheel_engine journal -name '*.so' -delete
