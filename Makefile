# groundstate: `make demo`, `make test`, `make bench` set everything up into .venv on first use.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.groundstate-installed

# llama-cpp-python must be built without -march=native (the native build crashes on these machines).
export CMAKE_ARGS := -DGGML_NATIVE=OFF
# Never fetch LiteLLM's model cost map from the network.
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup demo test bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[local,dev,ray]"
	@touch $(STAMP)

demo: setup
	$(BIN)/groundstate lm check
	$(BIN)/groundstate data generate offquery --domain both --variant all --n 5 --seed 0 --out runs/demo/synthetic.jsonl
	$(BIN)/groundstate data validate runs/demo/synthetic.jsonl
	$(BIN)/groundstate data stats runs/demo/synthetic.jsonl
	$(BIN)/groundstate run reground --data runs/demo/synthetic.jsonl --limit 3 --out runs/demo --threads 2

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

lint: setup
	$(BIN)/ruff check groundstate tests bench

clean:
	rm -rf $(VENV) runs .pytest_cache
