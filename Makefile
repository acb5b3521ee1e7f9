# Two commands do all the set-up on a fresh machine: `make up` and `make test`.
# Both create .venv (Python >= 3.11) and install the project with its test tools on first use,
# and again whenever pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test lint check-layers typecheck pytest prometheus bytecode clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { \
	  echo "$(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); omeflow needs >= 3.11: run 'make PYTHON=python3.11 ...'"; \
	  exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The SDK's workflow sandbox imports the workflow modules afresh for every workflow run it
# starts, compiling each that has no bytecode (PYTHONDONTWRITEBYTECODE is set on these machines):
# compile the product's packages once (workers/bytecode.py says which).
bytecode: $(STAMP)
	@$(BIN)/python -m workers.bytecode

# The local stack: Temporal dev server + UI, kubesim, worker, watcher. Ctrl-C stops it; state
# stays in .data/ for the next run.
up: $(STAMP) bytecode
	$(BIN)/python -m workers.stack

test: $(STAMP) prometheus lint check-layers typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .

check-layers: $(STAMP)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy models planning

# The canary analysis tests query a real Prometheus (tests/fixtures/prometheus.py). Install
# Debian's package where it is missing and this machine allows it (root with apt-get); refresh
# the package lists only when apt-get cannot find the package without them. Otherwise say how
# to install it and go on: those tests then skip, or fail under CI=true.
PROMETHEUS_INSTALL := apt-get install -y --no-install-recommends prometheus

prometheus:
	@if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "prometheus/promtool missing: $(PROMETHEUS_INSTALL)"; \
	  log=$$(mktemp); \
	  if DEBIAN_FRONTEND=noninteractive $(PROMETHEUS_INSTALL) >$$log 2>&1; then rm -f $$log; exit 0; fi; \
	  if grep -qE "Unable to locate package|has no installation candidate" $$log; then \
	    echo "no package lists yet: apt-get update, then install again"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(PROMETHEUS_INSTALL) >$$log 2>&1 && { rm -f $$log; exit 0; }; \
	  fi; \
	  tail -n 5 $$log; rm -f $$log; \
	  echo "could not install Prometheus; the canary analysis tests will skip (fail under CI=true)"; \
	else \
	  echo "prometheus/promtool not on PATH: the canary analysis tests will skip (fail under CI=true)."; \
	  echo "Install them with: sudo $(PROMETHEUS_INSTALL)  (Debian/Ubuntu), or put both binaries from"; \
	  echo "https://prometheus.io/download/ on PATH."; \
	fi

# Two lanes on the two cores (tests/conftest.py): the real-time e2e tests one after another on one
# xdist worker, everything else a module at a time on the other; the e2e lane is queued first.
# Exit 5 means pytest collected nothing, which is a broken suite, never a pass.
pytest: $(STAMP) prometheus bytecode
	@status=0; $(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadgroup --no-loadscope-reorder --durations=20 || status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: the suite is broken"; fi; \
	exit $$status

clean:
	rm -rf $(VENV) .data
