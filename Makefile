# Two entry points: `make run` (set up and start the server; flags in ARGS, as in
# `make run ARGS="--port 20002"`) and `make test` (set up and test).
# `make run` installs only what the server needs; `make test` adds the test toolchain (the
# official SDKs, pytest, Hypothesis, ruff, mypy, import-linter).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test setup setup-test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed-run

setup: $(VENV)/.installed-run

setup-test: $(VENV)/.installed-test

run: setup
	$(BIN)/tabulae serve $(ARGS)

test: setup-test
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check
