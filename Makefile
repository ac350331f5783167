# hpo: hyperparameter optimisation for encoder classifiers on ReDSM5-format data.
# `make install` then `make test`; see README.md for the rest.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU wheel by default. GPU users: make install TORCH_SPEC=torch TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
EXTRAS ?= dashboard,dev
PYTEST_ARGS ?=

.PHONY: install test lint clean

install: $(VENV)/.installed

# torch goes first and alone: a bare `torch` requirement resolved later would pull CUDA wheels.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $@

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check hpo tests

clean:
	rm -rf $(VENV) _runs .pytest_cache
