# groundstate: `make demo`, `make test`, `make bench` set everything up into .venv on first use;
# `make docs` builds the documentation site into site/ (open site/index.html).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.groundstate-installed
DOCS_STAMP := $(VENV)/.groundstate-docs-installed

# llama-cpp-python must be built without -march=native (the native build crashes on these machines).
# LLAVA_BUILD=OFF skips the multimodal (mtmd) library groundstate never loads: about a tenth less build time.
export CMAKE_ARGS := -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF
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
	@echo "== ReGround on one episode (the file's first: synthetic-healthcare-main-s0-00000) with the embedded 135M LM, then its trace"
	$(BIN)/groundstate compare reground --data runs/demo/synthetic.jsonl --limit 1 --runs-dir runs/demo --report-dir runs/demo/offquery --threads 2 --show-trace
	@echo "== Consilience: the paper's Table 2 layout, offline, with simulated agents"
	$(BIN)/groundstate experiment run consilience-table2-sim --runs-dir runs/demo --no-progress
	$(BIN)/groundstate experiment table consilience-table2-sim --runs-dir runs/demo --report-dir runs/demo/consilience
	@echo "== DHD: a calibration study on a simulated replay cache with planted effects"
	rm -rf runs/demo/dhd
	$(BIN)/groundstate dhd simulate --cache runs/demo/dhd --n 200 --blocks 8 --seed 0 --effects W+:0.1:0.9 C-:0.1:0.9
	$(BIN)/groundstate dhd analyze --cache runs/demo/dhd --label simulated --permutations 2000 --multiplicity-permutations 20000
	@echo
	@echo "What each part showed:"
	@echo "- ReGround ran verify -> reconstruct -> resolve on one episode with the embedded 135M plumbing LM. That model is near chance on OffQuery,"
	@echo "  so the trace shows the pipeline at work (the conflict pairs it named, who it blamed against the planted agent, the facts it kept"
	@echo "  and dropped, its answer against the gold), not its quality; the T1/T2/T3 printed are measured on n=1 episode, which checks plumbing,"
	@echo "  not accuracy. Chart: runs/demo/offquery/compare.png. The trace of any stored run: groundstate runs show RUN_ID --runs-dir runs/demo"
	@echo "  --trace (run ids: groundstate runs list --runs-dir runs/demo)."
	@echo "- Consilience: the paper's Table 2 layout with simulated agents, beside the paper's numbers (runs/demo/consilience/consilience-table2-sim.md, .png)."
	@echo "  The numbers are properties of the simulated agents, not of any LM. Full-Info below Rules is the 'limited' preset's doing (each agent"
	@echo "  weighs at most 3 informative facts): the sensitivity rows vary that attention limit, and with unlimited attention Full-Info is above Rules."
	@echo "- DHD: a simulated replay cache (200 problems x 8 blocks) with planted effects, analysed as a real one; its last table scores each"
	@echo "  selection (the unadjusted separation rule, BH and BY) against the truth dhd simulate recorded. Recall: the share of planted effects"
	@echo "  a selection found with the right sign; false discoveries: selections that are no planted effect (FDP: their share)."
	@echo "  Files: runs/demo/dhd/analysis/tables.md, report.md."
	@echo "For real numbers add --lm openai/gpt-4o-mini (or --lm hosted_vllm/MODEL --api-base URL)."

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
