# dsms: `make demo` runs the main example, `make test` runs the tests.
# Both create .venv and install dsms with its dependencies first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: setup
	$(BIN)/dsms run examples/ad_ctr/ad_ctr.sql

test: setup
	$(BIN)/pytest -q

bench: setup
	$(BIN)/python benchmarks/throughput.py
	$(BIN)/python benchmarks/windows.py
	$(BIN)/python benchmarks/joins.py

clean:
	rm -rf $(VENV) examples/*/out benchmarks/data .pytest_cache
