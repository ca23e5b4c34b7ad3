# repogym — the README's commands. `make setup` is idempotent and re-runs only when
# pyproject.toml changes.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Run apt as root directly, otherwise through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# apt must never wait for an answer (CI has no standard input).
export DEBIAN_FRONTEND := noninteractive

.PHONY: setup system-deps rootfs demo test bench lint clean train-demo

setup: system-deps $(STAMP) rootfs

system-deps:
	@command -v bwrap >/dev/null 2>&1 || { echo "installing bubblewrap (apt)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq bubblewrap >/dev/null; }
	@command -v git >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq git >/dev/null; }
	@# The sandboxes' seccomp policy is compiled with libseccomp (through pyseccomp).
	@ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 || { echo "installing libseccomp2 (apt)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq libseccomp2 >/dev/null; }
	@# The bwrap sandbox's own minimal root file system is built with debootstrap.
	@command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || { \
	  echo "installing debootstrap (apt)"; $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq debootstrap >/dev/null; }
	@# Headless Chromium renders the leaderboard page in the tests (only for `make test`).
	@[ "$(BROWSER)" != 1 ] || command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (apt)"; $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq chromium >/dev/null; }
	@# The docker tests start their own dockerd and build an image with debootstrap
	@# (tests/sandbox/conftest.py); without them those tests skip and say why.
	@[ "$(DOCKER)" != 1 ] || { command -v dockerd >/dev/null 2>&1 && \
	  command -v debootstrap >/dev/null 2>&1; } || { \
	  echo "installing docker.io and debootstrap (apt)"; $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq docker.io debootstrap >/dev/null || \
	  echo "docker.io/debootstrap could not be installed: the docker tests will skip"; }

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch is pinned in the same command so nothing pulls a CUDA build.
	$(BIN)/pip install -q -e '.[dev]' 'torch==2.13.0'
	@# verl's agent loop is tested against verl's own classes; verl pins a GPU stack (vLLM,
	@# SGLang), so on CPU it goes in without its dependencies plus what its agent loop
	@# imports. Its wheel also ships a top-level `tests` package, which would shadow ours.
	$(BIN)/pip install -q --no-deps 'verl>=0.9,<0.10'
	$(BIN)/pip install -q hydra-core codetiming tensordict 'torch==2.13.0'
	$(BIN)/python .ci/drop_foreign_tests.py verl
	@touch $(STAMP)

# The sandbox's root file system (Debian minbase, a few minutes the first time; then cached).
rootfs: $(STAMP)
	@$(BIN)/python -m repogym.sandbox.rootfs path | grep -qv '^host$$' || \
	  $(SUDO) $(BIN)/python -m repogym.sandbox.rootfs build || \
	  echo "warning: no sandbox root file system: bwrap binds the host's /usr (it warns)"

demo: setup
	$(BIN)/repogym demo

# The CPU toy: a tiny model learns by GRPO in real RepoEnv episodes (a few minutes); prints
# `resolve_rate before=X after=Y`. PASSIVE: spinning OpenMP threads crawl on a busy machine.
train-demo: setup
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m repogym.agents.toy.demo --seed $${SEED:-0} --out runs/train-demo

# Two pytest processes (pytest-xdist), whole files each: one process keeps one of two cores
# busy while the other waits (sandboxes start, pipes drain). Measured one run after another
# on an idle 2-core machine: one process about 31 min, -n 2 17 min 40 s, -n 3 17 min 27 s.
# Files go longest first (tests/conftest.py, LONGEST_FILES). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: BROWSER := 1
test: DOCKER := 1
test: setup
	$(BIN)/python -m pytest -q --durations=25 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

bench: setup
	$(BIN)/python bench/env_latency.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/async_vs_sync.py

# The formatter and the linter as CI runs them (.ci/run, before the tests); the rules are in
# pyproject.toml. `$(BIN)/ruff format .` and `$(BIN)/ruff check --fix .` fix most of it.
lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
