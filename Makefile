# Two commands do all the set-up on a fresh machine: `make up` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test lint check-layers typecheck pytest clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

up: $(STAMP)
	$(BIN)/python -m workers.stack

test: $(STAMP) lint check-layers typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .

check-layers: $(STAMP)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy models planning

pytest: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider

clean:
	rm -rf $(VENV) .data
