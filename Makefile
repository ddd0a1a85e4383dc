# The two commands a newcomer needs: `make quickstart` and `make test`. Each sets up .venv from nothing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export WANDB_MODE ?= offline
export DS_ACCELERATOR ?= cpu
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup quickstart test test-slow clean

# bubblewrap confines model-written commands (the env sandbox); git and sqlite3 are tools used inside it.
SYSTEM_PACKAGES := bubblewrap git sqlite3 tar

$(VENV)/.installed: pyproject.toml setup.py
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch first: an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e .
	touch $@

# The test extras (transformers, TRL, the OpenAI client, matplotlib) only for the tests: the quickstart does not import
# them, and installing them costs it 12 s of its ten minutes.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

setup: $(VENV)/.installed
	# The real-code swe families read pinned sdists from a local cache (seconds once fetched; the bugs are committed).
	$(VENV)/bin/jointrl envs prepare swe

quickstart: setup
	$(VENV)/bin/jointrl quickstart

test: setup $(VENV)/.installed-test
	$(PY) -m pytest -m "not slow" -q

test-slow: setup $(VENV)/.installed-test
	$(PY) -m pytest -m slow -q

clean:
	rm -rf $(VENV) runs build *.egg-info
