# Two commands on a fresh clone: `make demo` and `make test`. Each creates or reuses .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: demo test lint bench venv clean services

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.monitor-installed: pyproject.toml | $(PY)
	$(PIP) install -e '.[monitor]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(PY)
	$(PIP) install -e '.[monitor,dev]'
	touch $(VENV)/.monitor-installed $@

venv: $(VENV)/.dev-installed

demo: $(VENV)/.monitor-installed
	$(VENV)/bin/toolwatch demo

services:
	@bash scripts/ensure-services.sh

test: lint services
	$(PY) -m pytest

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(VENV)/.dev-installed
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
