# Two commands on a fresh clone: `make demo` and `make test`. Each creates or reuses .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: demo test lint bench venv clean services ext

$(PY):
	$(PYTHON) -m venv $(VENV)

# The C accelerators (setup.py) are rebuilt in place whenever their sources change.
EXT_SRC := setup.py $(wildcard monitor/*/*.c monitor/_cext/*.h)

$(VENV)/.monitor-installed: pyproject.toml $(EXT_SRC) | $(PY)
	$(PIP) install -e '.[monitor]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(EXT_SRC) | $(PY)
	$(PIP) install -e '.[monitor,dev]'
	touch $(VENV)/.monitor-installed $@

venv: $(VENV)/.dev-installed

ext: $(VENV)/.dev-installed
	$(PY) setup.py -q build_ext --inplace

demo: $(VENV)/.monitor-installed
	$(VENV)/bin/toolwatch demo

services:
	@bash scripts/ensure-services.sh

# One worker per CPU, each taking whole test files (their module fixtures, servers included, stay in one worker).
test: lint services
	$(PY) -m pytest -n auto --dist loadfile

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(VENV)/.dev-installed
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build
	rm -f monitor/*/*.so
