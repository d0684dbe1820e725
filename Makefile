# Two entry points: `make run` (set up and start the server) and `make test` (set up and test).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test check setup

$(BIN)/tabulae: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/tabulae

setup: $(BIN)/tabulae

run: setup
	$(BIN)/tabulae serve

test: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check
