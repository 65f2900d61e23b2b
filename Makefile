# Two entry points: `make demo` runs the MNIST pipeline in a real Airflow, `make test` runs the suite.
# Both create .venv/ and a throwaway Airflow home (.airflow/) on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
export AIRFLOW_HOME := $(CURDIR)/.airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__UNIT_TEST_MODE := False
export PJRT_DEVICE := CPU
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test test-fast test-native lint lock venv venv-native airflow-home clean bench-parse bench-mnist bench-batch \
	bench-llama bench-native

venv: $(VENV)/.installed

# Every download is checked against the hashes in the locks: pip installs uv from requirements-uv.lock,
# uv installs the environment from requirements.lock with --require-hashes.
$(VENV)/.installed: pyproject.toml requirements.lock requirements-uv.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --require-hashes -r requirements-uv.lock
	$(BIN)/uv pip install -q -p $(BIN)/python --compile-bytecode --require-hashes -r requirements.lock
	$(BIN)/uv pip install -q -p $(BIN)/python --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	touch $@

# The native stack's environment (torch 2.14 + TorchTitan, no torch-xla) from requirements-native.lock, the
# same way: the `trainer` extra's torch 2.9 + torch-xla and the `native-trainer` extra's torch 2.14 cannot share
# one venv. Its own Airflow home too (.airflow-native), migrated by its own Airflow.
VENV_NATIVE := $(CURDIR)/.venv-native
NBIN := $(VENV_NATIVE)/bin
AIRFLOW_HOME_NATIVE := $(CURDIR)/.airflow-native
venv-native: $(VENV_NATIVE)/.installed

$(VENV_NATIVE)/.installed: pyproject.toml requirements-native.lock requirements-uv.lock
	test -x $(NBIN)/python || $(PYTHON) -m venv $(VENV_NATIVE)
	$(NBIN)/python -m pip install -q --disable-pip-version-check --require-hashes -r requirements-uv.lock
	$(NBIN)/uv pip install -q -p $(NBIN)/python --compile-bytecode --require-hashes -r requirements-native.lock
	$(NBIN)/uv pip install -q -p $(NBIN)/python --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	touch $@

$(AIRFLOW_HOME_NATIVE)/.migrated: $(VENV_NATIVE)/.installed
	mkdir -p $(AIRFLOW_HOME_NATIVE)
	AIRFLOW_HOME=$(AIRFLOW_HOME_NATIVE) $(NBIN)/airflow db migrate > $(AIRFLOW_HOME_NATIVE)/migrate.log 2>&1 \
		|| (tail -n 40 $(AIRFLOW_HOME_NATIVE)/migrate.log; exit 1)
	touch $@

airflow-home: $(AIRFLOW_HOME)/.migrated

$(AIRFLOW_HOME)/.migrated: $(VENV)/.installed
	mkdir -p $(AIRFLOW_HOME)
	$(BIN)/airflow db migrate > $(AIRFLOW_HOME)/migrate.log 2>&1 || (tail -n 40 $(AIRFLOW_HOME)/migrate.log; exit 1)
	touch $@

demo: airflow-home
	$(BIN)/python -m airflow_provider_trainium.demo trainium_mnist_mlp

# The native stack's tests (marker `native`, set by these folders in tests/conftest.py) run in .venv-native on
# torch 2.14 (test-native); the main venv's run (torch 2.9 + torch-xla) does not collect them.
NATIVE_TESTS := tests/unit/trainium_trainer/native tests/unit/trainium_trainer/titan tests/integration/native tests/integration/titan
# The four lanes of `make test` run side by side, each printing its output when it ends: tests/unit and
# tests/integration on two pytest-xdist workers (XDIST; each worker has its own Airflow home, see
# tests/conftest.py); tests/e2e (one deployment, one shared MNIST run: one process, mostly waiting on the
# scheduler); the native lane once .venv-native has installed; and mypy (typecheck), which ends first.
# `make test XDIST=` runs the first lane in one process. Tests marked `install` (fresh environments from the built wheel) run in test-wheel instead.
XDIST ?= -n 2 --dist loadfile --no-loadscope-reorder
test: airflow-home
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) -j4 --output-sync=target test-main test-e2e test-native typecheck

# mypy ([tool.mypy] in pyproject.toml): the provider and the XLA stack's trainer against torch 2.9 here, every
# trainer module against torch 2.14 in .venv-native (the native stack's modules run only there).
typecheck: venv venv-native
	$(BIN)/mypy
	$(NBIN)/mypy --cache-dir .mypy_cache/native $$(find trainium_trainer -name '*.py')

.PHONY: test-main test-e2e typecheck
test-main: airflow-home
	$(BIN)/python -m pytest tests/unit tests/integration $(addprefix --ignore=,$(NATIVE_TESTS)) -m "not install" \
		$(XDIST) --durations=25 $(PYTEST_ARGS)

test-e2e: airflow-home
	$(BIN)/python -m pytest tests/e2e --durations=25 $(PYTEST_ARGS)

test-native: $(AIRFLOW_HOME_NATIVE)/.migrated
	AIRFLOW_HOME=$(AIRFLOW_HOME_NATIVE) $(NBIN)/python -m pytest -m native $(wildcard $(NATIVE_TESTS)) \
		--durations=25 $(PYTEST_ARGS)

# The loop while editing: tests/unit less its `process` and `model` tests (no server, no dag.test(), no
# subprocess), main venv. Two pytest processes side by side, each collecting only its half and using its own
# Airflow home (TESTS_WORKER, tests/conftest.py): the trainer's and the view's tests (torch, the API app), and the
# rest. pytest-xdist's workers would each import all of it. A half that -k leaves empty (pytest's exit 5) passes.
FAST_PYTEST = $(BIN)/python -m pytest -m "not process and not model" $(addprefix --ignore=,$(NATIVE_TESTS)) \
	--durations=5 $(PYTEST_ARGS)
FAST_TRAINER_AND_VIEW := tests/unit/trainium_trainer tests/unit/plugins
.PHONY: test-fast-trainer-and-view test-fast-provider
test-fast: airflow-home
	$(MAKE) -j2 --output-sync=target test-fast-trainer-and-view test-fast-provider
test-fast-trainer-and-view:
	TESTS_WORKER=fast-trainer $(FAST_PYTEST) $(FAST_TRAINER_AND_VIEW) || [ $$? -eq 5 ]
test-fast-provider:
	TESTS_WORKER=fast-provider $(FAST_PYTEST) tests/unit $(addprefix --ignore=,$(FAST_TRAINER_AND_VIEW)) || [ $$? -eq 5 ]

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Regenerate the locks after changing dependencies in pyproject.toml, docker/requirements.in or
# docker/neuron-versions.toml (tests/integration/image/test_pins.py fails until they agree).
# Every pin carries its hashes.
UV ?= $(shell command -v uv 2>/dev/null || echo $(BIN)/uv)
UV_COMPILE = $(UV) pip compile --no-python-downloads --no-header --generate-hashes --python-platform x86_64-manylinux_2_28
lock:
	$(UV_COMPILE) pyproject.toml --extra trainer --extra dev -p 3.11 -o requirements.lock
	$(UV_COMPILE) pyproject.toml --extra native-trainer --extra dev -p 3.11 -o requirements-native.lock
	echo "uv==0.13.9" | $(UV_COMPILE) - -p 3.11 -o requirements-uv.lock
	$(UV_COMPILE) docker/requirements.in -c docker/requirements-base.txt --python-version 3.12 -o docker/requirements.txt

clean:
	rm -rf $(VENV) $(AIRFLOW_HOME) $(AIRFLOW_HOME)-install $(VENV_NATIVE) $(AIRFLOW_HOME_NATIVE)

bench-parse: airflow-home
	$(BIN)/python benchmarks/dag_parse.py

bench-mnist: venv
	$(BIN)/python benchmarks/mnist_throughput.py

# DescribeJobs calls per poll interval for K waiting Batch jobs: our shared poller vs the amazon trigger.
bench-batch: venv
	$(BIN)/python -m benchmarks.batch_polling

bench-llama: venv
	$(BIN)/python benchmarks/llama_tokens.py

# Tokens/s of the native trainer (FSDP2) against TorchTitan's Trainer, 2 gloo ranks on the CPU, in .venv-native.
bench-native: venv-native
	$(NBIN)/python benchmarks/native_tokens.py

# The built wheel installed as a platform team installs it, into fresh environments on the floor Airflow (3.0.6)
# and on the newest: the DAGs installed into an empty folder, provider import, DAG parsing and the MNIST DAG on
# local compute (tests/wheel); then the README's install block as written (tests marked `install`, in an Airflow
# home of their own). Mostly downloads and installs: .ci/run runs it beside `make test`.
.PHONY: test-wheel
test-wheel: venv
	PYTHON=$(PYTHON) bash .ci/wheel-airflow.sh floor $(PYTEST_ARGS)
	PYTHON=$(PYTHON) bash .ci/wheel-airflow.sh newest $(PYTEST_ARGS)
	AIRFLOW_HOME=$(AIRFLOW_HOME)-install $(BIN)/python -m pytest -m install tests/integration/deployment \
		--durations=5 $(PYTEST_ARGS)

# Per-step host overhead: our trainers against a recipe-style bare loop and transformers' Trainer, in one run.
.PHONY: bench-trainer
bench-trainer: venv
	$(BIN)/python benchmarks/trainer_overhead.py
	$(BIN)/python benchmarks/llama_tokens.py

# The whole deployment on this machine: PostgreSQL (cluster under .airflow/deployment/postgres, 127.0.0.1 only),
# api-server (UI), scheduler, dag-processor, triggerer and a log server with the LocalExecutor, every listener on
# 127.0.0.1 on free ports; logs in .airflow/logs. A component that dies (PostgreSQL too) is started again with
# backoff. Prints the UI address and the login (a random admin password on the first start, or AIRFLOW_PASSWORD);
# Ctrl-C or `make airflow-stop` stops it within 30 s. `make demo` stays on SQLite.
.PHONY: airflow airflow-stop
airflow: venv
	$(BIN)/python -m devserver up

airflow-stop:
	$(BIN)/python -m devserver stop

# Where public.ecr.aws is reachable: pin the base image's tag to the digest it names now, in
# docker/neuron-versions.toml ([base].digest, digest_source) and the Dockerfile's ARG BASE_IMAGE.
.PHONY: pin-base-digest
pin-base-digest: venv
	$(BIN)/python -m airflow_provider_trainium.image.pin_base

# Deferred Batch jobs through the whole deployment against moto behind a fault proxy (5% throttling, 5xx,
# resets, slow answers), with triggerer and scheduler restarts and a PostgreSQL outage; prints the counts and
# their goals (docs/batch.md). Bounded by SOAK_MINUTES; SOAK_JOBS jobs.
SOAK_MINUTES ?= 40
SOAK_JOBS ?= 200
.PHONY: soak
soak: venv
	$(BIN)/python -m benchmarks.soak --minutes $(SOAK_MINUTES) --jobs $(SOAK_JOBS)
