# The two commands a newcomer needs: `make quickstart` and `make test`. Each sets up .venv from nothing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export WANDB_MODE ?= offline
export DS_ACCELERATOR ?= cpu
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup quickstart test test-slow clean

$(VENV)/.installed: pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch first: an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

setup: $(VENV)/.installed

quickstart: setup
	$(VENV)/bin/jointrl quickstart

test: setup
	$(PY) -m pytest -m "not slow" -q

test-slow: setup
	$(PY) -m pytest -m slow -q

clean:
	rm -rf $(VENV) runs build *.egg-info
