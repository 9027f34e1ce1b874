# The two commands the README opens with: `make demo` and `make test`.
# Both set up a virtual environment from nothing but Python 3.11 and pip, in two layers:
#
# - the library (`$(LIBRARY)`): wheel-engine installed editable with its three runtime
#   dependencies, all `make demo` needs;
# - the development toolchain (`$(STAMP)`, on top): requirements-dev.txt and every extra in
#   pyproject.toml, for the tests, lint, types, docs and benchmarks. It does not build the
#   library again, so `make demo` then `make test` compiles once.
#
# The install builds the compiled core (mypyc, see setup.py) where a C compiler works and the
# pure-Python build where none does; `make test-pure` (or WHEEL_ENGINE_PURE=1 on any target)
# installs and tests the pure build. The library stamp holds what `wheel-engine --version` said
# after the install and depends on the compiled modules' sources: an edit to one rebuilds
# before the tests run, since an editable install's extension modules in the source tree would
# otherwise shadow the edited .py. Every target that runs the library first checks that
# `--version` still says the same (a `rm *.so`, or a build that once deleted them, would
# otherwise go on pure without a word) and reinstalls if not.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
BUILD := $(if $(filter-out 0,$(WHEEL_ENGINE_PURE)),pure,default)
LIBRARY := $(VENV)/.library-$(BUILD)
STAMP := $(VENV)/.installed-$(BUILD)
COMPILED_SOURCES := $(shell $(PY) wheel_engine/_build.py --sources 2>/dev/null)
PIP := $(BIN)/pip --disable-pip-version-check
ifeq ($(BUILD),pure)
BUILD_SAYS := pure Python: a few seconds
else
BUILD_SAYS := compiling the core with mypyc where a C compiler works: about a minute (WHEEL_ENGINE_PURE=1 skips it)
endif
# Every extra pyproject.toml declares, one requirement a line (the suite tests them all).
EXTRAS := import tomllib; extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]; print("\n".join(r for rs in extras.values() for r in rs))

.PHONY: demo test test-pure pytest lint typecheck docs bench bench-quick clean check-build

$(LIBRARY): pyproject.toml setup.py wheel_engine/_build.py $(COMPILED_SOURCES)
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH (or: make PY=python3)"; exit 1; }
	@[ -x $(BIN)/python ] || { echo "make: creating $(VENV) ($$($(PY) --version))"; $(PY) -m venv $(VENV); }
	@rm -f $(VENV)/.library-* $(VENV)/.installed-*
	@echo "make: installing wheel-engine (editable) with msgpack, aiosqlite and rich; $(BUILD_SAYS)"
	@# PYTHONWARNINGS: setuptools' banner on every editable install ("Editable installation...").
	PYTHONWARNINGS="ignore:Editable installation" WHEEL_ENGINE_PURE=$(if $(filter pure,$(BUILD)),1,0) \
		$(PIP) install -q -e .
	@$(BIN)/wheel-engine --version | tee $@.new
	@if [ "$(BUILD)" = pure ] && ! grep -q '(pure Python)' $@.new; then \
		echo "make: asked for the pure-Python build, got: $$(cat $@.new)"; exit 1; fi
	@mv $@.new $@

$(STAMP): $(LIBRARY) requirements-dev.txt bench/pyproject.toml
	@echo "make: installing the development toolchain (requirements-dev.txt and the extras: tests, lint, types, docs, the benchmarks' peers): a minute or two the first time"
	@$(BIN)/python -c '$(EXTRAS)' > $(VENV)/extras.txt
	$(PIP) install -q -r requirements-dev.txt -r $(VENV)/extras.txt
	@cp $(LIBRARY) $@

# The build installed is still the one that runs (see above); reinstalls the library if not.
check-build: $(LIBRARY)
	@now="$$($(BIN)/wheel-engine --version)"; was="$$(cat $(LIBRARY))"; \
	if [ "$$now" != "$$was" ]; then \
		echo "make: $(VENV) was installed as '$$was' but runs '$$now' (its extension modules changed since): reinstalling"; \
		rm -f $(LIBRARY) && $(MAKE) --no-print-directory $(LIBRARY); \
	fi

demo: check-build
	@echo "make: running the demo (about 15 seconds): wheel-engine demo"
	@$(BIN)/wheel-engine demo

test: $(STAMP) lint typecheck pytest

# The whole suite on the pure-Python build (CI runs it besides `make test`); tests/test_build.py
# checks that the pure build is what runs.
test-pure:
	WHEEL_ENGINE_EXPECT_BUILD=pure $(MAKE) --no-print-directory WHEEL_ENGINE_PURE=1 pytest

pytest: $(STAMP) check-build
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check setup.py wheel_engine journal tests bench examples
	$(BIN)/ruff format --check setup.py wheel_engine journal tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

bench: $(STAMP) check-build
	$(BIN)/wheel-engine bench

bench-quick: $(STAMP) check-build
	$(BIN)/wheel-engine bench --quick

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache site
	find wheel_engine journal -name '*.so' -delete
