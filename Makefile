# groundstate: `make demo`, `make test`, `make bench` set everything up into .venv on first use;
# `make docs` builds the documentation site into site/ (open site/index.html).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.groundstate-installed
DOCS_STAMP := $(VENV)/.groundstate-docs-installed

# llama-cpp-python must be built without -march=native (the native build crashes on these machines).
export CMAKE_ARGS := -DGGML_NATIVE=OFF
# Never fetch LiteLLM's model cost map from the network.
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup demo test bench docs lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[local,dev,ray]"
	@touch $(STAMP)

demo: setup
	$(BIN)/groundstate lm check
	$(BIN)/groundstate data generate offquery --domain both --variant all --n 5 --seed 0 --out runs/demo/synthetic.jsonl
	$(BIN)/groundstate data validate --data runs/demo/synthetic.jsonl
	$(BIN)/groundstate data stats --data runs/demo/synthetic.jsonl
	$(BIN)/groundstate run reground --data runs/demo/synthetic.jsonl --limit 3 --runs-dir runs/demo --threads 2
	$(BIN)/groundstate experiment run consilience-table2-sim --runs-dir runs/demo --no-progress
	$(BIN)/groundstate experiment table consilience-table2-sim --runs-dir runs/demo --report-dir runs/demo/consilience
	rm -rf runs/demo/dhd
	$(BIN)/groundstate dhd simulate --cache runs/demo/dhd --n 200 --blocks 5 --seed 0 --effects W+:0.05:0.6 C-:0.05:0.6
	$(BIN)/groundstate dhd analyze --cache runs/demo/dhd --label simulated --permutations 2000 --multiplicity-permutations 20000
	@echo
	@echo "You saw: ReGround run end to end on the embedded 135M plumbing LM (its T1/T3 are near chance: it checks the pipeline, not quality);"
	@echo "the shipped spec of the Consilience paper's Table 2 run offline with simulated agents, beside the paper's numbers (runs/demo/consilience/consilience-table2-sim.md, .png);"
	@echo "and a DHD calibration study on a simulated replay cache (runs/demo/dhd/analysis/tables.md). For real numbers add --lm openai/gpt-4o-mini (or --lm hosted_vllm/MODEL --api-base URL)."

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# The site needs only the docs extra (mkdocs, mkdocs-material, mkdocstrings), not the embedded LM's build.
# --strict: a broken link, a page left out of the navigation or an unreadable docstring fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

$(DOCS_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	@touch $@

lint: setup
	$(BIN)/ruff check groundstate tests bench docs/_griffe

clean:
	rm -rf $(VENV) runs .pytest_cache site
