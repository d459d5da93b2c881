# A fresh clone needs nothing else: the first target that needs it creates .venv/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: chromium demo demo-seeds lint test diagrams clean bench bench-quick bench-readme

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,otel,server,browser]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/chronicle demo

# The seed features (skills, guardrails, task board, reflections, routines, jobs, self-repair) in one scripted tour.
demo-seeds: $(STAMP)
	CHRONICLE=$(BIN)/chronicle ops/demo_seeds.sh

# Three workers on two cores: part of the suite's time is waiting (CLI processes, servers, timeouts), so a third
# worker fills it (3,097 tests in 8.9 minutes on an idle 2-core machine; four workers only added contention when last tried).
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (as on our CI machines): the suite starts
# hundreds of Python processes (CLI runs, workers, servers, MCP servers, examples), and without it each compiled
# every module of ours it imported from source again, and each worker rewrote every test module's asserts.
test: $(STAMP) chromium
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 3 --dist loadfile -q

# Lint and types (CI runs both): ruff over the tree, mypy over the whole package (strict on domain/).
lint: $(STAMP)
	$(BIN)/ruff check .
	./ops/typecheck.sh

# The viewer's browser tests drive Debian's chromium through playwright (playwright's own browser
# download cannot reach the network here). Installed when missing and root; otherwise they skip loudly.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "make: installing Debian's chromium for the browser tests"; \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	    else echo "make: no chromium and not root: the browser tests will skip (apt-get install chromium)"; fi; }

# Benchmarks against LangGraph (ops/bench/, writes ops/bench/RESULTS.md); never part of `make test`.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,otel,server,browser,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python ops/bench/run.py
	$(BIN)/python ops/bench/readme.py --write

# README's benchmark table again from the committed ops/bench/RESULTS.json (make bench does this itself).
bench-readme:
	$(PYTHON) ops/bench/readme.py --write

bench-quick: $(BENCH_STAMP)
	$(BIN)/python ops/bench/run.py --quick

diagrams: $(STAMP)
	$(BIN)/python ops/diagrams.py --write

# build/ too: setuptools copies the package there and never removes a file, so a module deleted since the last
# build or install would be shipped again (and a stale domain module's events registered: stored_vocabulary.py).
clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build dist *.egg-info
