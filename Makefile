# A fresh clone needs nothing else: the first target that needs it creates .venv/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-seeds test diagrams clean bench bench-quick

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,otel,server]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/chronicle demo

# The seed features (skills, guardrails, task board, reflections, routines, jobs, self-repair) in one scripted tour.
demo-seeds: $(STAMP)
	CHRONICLE=$(BIN)/chronicle ops/demo_seeds.sh

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -q

# Benchmarks against LangGraph (ops/bench/, writes ops/bench/RESULTS.md); never part of `make test`.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,otel,server,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python ops/bench/run.py

bench-quick: $(BENCH_STAMP)
	$(BIN)/python ops/bench/run.py --quick

diagrams: $(STAMP)
	$(BIN)/python ops/diagrams.py --write

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
