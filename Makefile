# Two commands do all the set-up on a fresh machine: `make up` and `make test`.
# Both create .venv (Python >= 3.11) and install the project with its test tools on first use,
# and again whenever pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test lint check-layers typecheck pytest clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { \
	  echo "$(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); omeflow needs >= 3.11: run 'make PYTHON=python3.11 ...'"; \
	  exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The local stack: Temporal dev server + UI, kubesim, worker, watcher. Ctrl-C stops it; state
# stays in .data/ for the next run.
up: $(STAMP)
	$(BIN)/python -m workers.stack

test: $(STAMP) lint check-layers typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .

check-layers: $(STAMP)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy models planning

# Exit 5 means pytest collected nothing, which is a broken suite, never a pass.
pytest: $(STAMP)
	@status=0; $(BIN)/pytest -q -p no:cacheprovider || status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: the suite is broken"; fi; \
	exit $$status

clean:
	rm -rf $(VENV) .data
