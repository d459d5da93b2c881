# A fresh clone needs nothing else: the first target that needs it creates .venv/.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test diagrams clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/chronicle demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -q

diagrams: $(STAMP)
	$(BIN)/python ops/diagrams.py --write

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
