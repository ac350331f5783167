# hpo: hyperparameter optimisation for encoder classifiers on ReDSM5-format data.
# `make install` then `make test`; see README.md for the rest.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU wheel by default. GPU users: make install TORCH_SPEC=torch TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
EXTRAS ?= dashboard,dev,proxy,lora,tracking
PYTEST_ARGS ?=

# Studies: storage comes from $$HPO_STORAGE (e.g. postgresql://user@host:5432/hpo), else sqlite:///_runs/hpo.db.
# one worker per core, at most 4: hpo tune refuses more workers than the machine has cores
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
N_TRIALS ?=
DATA_DIR ?=
ROBERTA_PATH ?=
DEBERTA_PATH ?=
SPEC ?= studies/criteria-smoke.yaml
PORT ?= 8080
RUNS := _runs
HPO := $(BIN)/hpo
STUDY_FLAGS = $(if $(N_TRIALS),--set n_trials=$(N_TRIALS)) $(if $(DATA_DIR),--set data_dir=$(DATA_DIR)) \
	$(if $(ROBERTA_PATH),--set model_paths.roberta-base=$(ROBERTA_PATH)) \
	$(if $(DEBERTA_PATH),--set model_paths.microsoft/deberta-v3-base=$(DEBERTA_PATH))

.PHONY: install test test-fast lint clean demo demo-explain smoke-assets tune-criteria-supermax tune-evidence-supermax finalize-criteria-supermax finalize-evidence-supermax workers dashboard status report bench

install: $(VENV)/.installed

# One stamp per torch choice: `make install TORCH_SPEC=torch TORCH_INDEX=…cu128` after a first
# CPU install installs the GPU torch, where one stamp for both said "Nothing to be done".
TORCH_STAMP := $(VENV)/.torch-$(shell printf '%s %s' '$(TORCH_SPEC)' '$(TORCH_INDEX)' | cksum | cut -d' ' -f1)

# torch goes first and alone: a bare `torch` requirement resolved later would pull CUDA wheels.
$(TORCH_STAMP):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q $(if $(TORCH_INDEX),--force-reinstall) "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	rm -f $(VENV)/.torch-*
	touch $@

$(VENV)/.installed: pyproject.toml $(TORCH_STAMP)
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $@
	@echo "Installed in $(VENV). Put hpo on your PATH (once per shell): source $(VENV)/bin/activate"

# Test files spread over TEST_WORKERS processes (pytest-xdist), each on its own PostgreSQL
# database; a test marked serial (it restarts the server) runs alone. TEST_WORKERS=0: one process.
TEST_WORKERS ?= $(WORKERS)
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# The 20 slowest tests are listed at the end: the suite's time is a budget CI lives within.
test: install
	$(PYTEST) --durations=20 $(PYTEST_ARGS)

# The inner loop: every test marked neither slow nor postgres. It needs no database server, no
# browser and no Slurm (no end-to-end study either); `make test` runs everything.
test-fast: install
	$(PYTEST) -m "not slow and not postgres" $(PYTEST_ARGS)

# Style (ruff) and the layering contracts in pyproject.toml (import-linter; also run by the tests).
lint: install
	$(BIN)/ruff check hpo tests bench
	$(BIN)/ruff format --check hpo tests bench
	$(BIN)/lint-imports

# The main job on the embedded default: tiny offline encoders, sample data, the criteria
# smoke study with 2 workers on SQLite, then the best trial.
demo: smoke-assets
	$(HPO) tune studies/criteria-smoke.yaml --workers 2 --storage sqlite:///$(RUNS)/hpo.db
	@echo
	@echo "Browse the results:  make dashboard   (then open http://127.0.0.1:$(PORT)/)"
	@echo "Status / best trial: hpo status criteria-smoke   |   hpo best criteria-smoke"
	@echo "(hpo is on your PATH once $(VENV) is active: source $(VENV)/bin/activate)"

# The joined prediction on the same tiny encoders: a criteria and an evidence study of 2 trials
# each, each finalized to one model, then every sample post's symptoms with the sentences that
# show them (JSON lines) and the HTML report. Rerunning reuses the finished studies and finals.
EXPLAIN_DEMO = --storage sqlite:///$(RUNS)/hpo.db --set n_trials=2 --set train.epochs=1
demo-explain: smoke-assets
	$(HPO) tune studies/criteria-smoke.yaml --workers 2 --no-progress $(EXPLAIN_DEMO) --set name=criteria-explain-demo
	$(HPO) finalize studies/criteria-smoke.yaml --top-k 1 --seeds 1 --no-progress $(EXPLAIN_DEMO) --set name=criteria-explain-demo
	$(HPO) tune studies/evidence-smoke.yaml --workers 2 --no-progress $(EXPLAIN_DEMO) --set name=evidence-explain-demo
	$(HPO) finalize studies/evidence-smoke.yaml --top-k 1 --seeds 1 --no-progress $(EXPLAIN_DEMO) --set name=evidence-explain-demo
	mkdir -p $(RUNS)/explain
	$(HPO) predict --criteria "$$(ls -d $(RUNS)/studies/criteria-explain-demo-*/final/model | head -n 1)" \
		--evidence "$$(ls -d $(RUNS)/studies/evidence-explain-demo-*/final/model | head -n 1)" \
		--input $(RUNS)/sample-data/redsm5_posts.csv --out $(RUNS)/explain/predictions.jsonl \
		--html $(RUNS)/explain/report.html --no-progress
	@echo
	@echo "One post's symptoms and evidence: head -n 1 $(RUNS)/explain/predictions.jsonl"
	@echo "The report (one file, open it in a browser): $(RUNS)/explain/report.html"

smoke-assets: install $(RUNS)/sample-data/redsm5_posts.csv $(RUNS)/tiny-roberta/config.json $(RUNS)/tiny-deberta/config.json

$(RUNS)/sample-data/redsm5_posts.csv: | install
	$(HPO) data sample $(RUNS)/sample-data --posts 200 --seed 0 --profile realistic

$(RUNS)/tiny-roberta/config.json: | install
	$(HPO) make-tiny-encoder $(RUNS)/tiny-roberta --arch roberta

$(RUNS)/tiny-deberta/config.json: | install
	$(HPO) make-tiny-encoder $(RUNS)/tiny-deberta --arch deberta-v2

tune-criteria-supermax: install
	$(HPO) tune studies/criteria-supermax.yaml --workers $(WORKERS) --restart-dead $(STUDY_FLAGS)

tune-evidence-supermax: install
	$(HPO) tune studies/evidence-supermax.yaml --workers $(WORKERS) --restart-dead $(STUDY_FLAGS)

# After a search: retrain the top 3 configurations over 3 seeds, score the chosen one once on
# the test split, save it with a model card (see docs/models.md).
finalize-criteria-supermax: install
	$(HPO) finalize studies/criteria-supermax.yaml --workers $(WORKERS) $(STUDY_FLAGS)

finalize-evidence-supermax: install
	$(HPO) finalize studies/evidence-supermax.yaml --workers $(WORKERS) $(STUDY_FLAGS)

# Join SPEC's study with WORKERS more processes from this machine (same storage, same study).
workers: install
	$(HPO) tune $(SPEC) --workers $(WORKERS) --restart-dead $(STUDY_FLAGS)

status: install
	$(HPO) status $(SPEC)

dashboard: install
	$(HPO) dashboard $(SPEC) --port $(PORT)

# Benchmarks against Trainer.hyperparameter_search and raw Optuna on the realistic sample: each
# writes bench/results/<measure>.json, then docs/performance.md's table is regenerated from them.
# BENCH_ARGS: e.g. --only p1 p4, --runs 7, or --data-dir /data/redsm5 for the real files.
BENCH_ARGS ?=
bench: install
	$(BIN)/pip install -q -e ".[$(EXTRAS),bench]"
	$(BIN)/python -m bench.run $(BENCH_ARGS)
	$(BIN)/python -m bench.report

# PNG plots and summary.md for SPEC's study.
report: install
	$(HPO) report $(SPEC) --out $(RUNS)/report

clean:
	rm -rf $(VENV) $(RUNS) .pytest_cache
