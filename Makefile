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

.PHONY: demo test lint lock venv airflow-home clean bench-parse bench-mnist bench-batch bench-llama

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==0.13.9
	$(BIN)/uv pip install -q -p $(BIN)/python --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install -q -p $(BIN)/python --no-deps --config-settings editable_mode=compat -e .
	touch $@

airflow-home: $(AIRFLOW_HOME)/.migrated

$(AIRFLOW_HOME)/.migrated: $(VENV)/.installed
	mkdir -p $(AIRFLOW_HOME)
	$(BIN)/airflow db migrate > $(AIRFLOW_HOME)/migrate.log 2>&1 || (tail -n 40 $(AIRFLOW_HOME)/migrate.log; exit 1)
	touch $@

demo: airflow-home
	$(BIN)/python -m airflow_provider_trainium.demo trainium_mnist_mlp

test: airflow-home
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Regenerate the lock after changing dependencies in pyproject.toml.
lock:
	uv pip compile pyproject.toml --extra trainer --extra dev -p 3.11 \
	  --python-platform x86_64-manylinux_2_28 --no-header -o requirements.lock

clean:
	rm -rf $(VENV) $(AIRFLOW_HOME)

bench-parse: airflow-home
	$(BIN)/python benchmarks/dag_parse.py

bench-mnist: venv
	$(BIN)/python benchmarks/mnist_throughput.py

# DescribeJobs calls per poll interval for K waiting Batch jobs: our shared poller vs the amazon trigger.
bench-batch: venv
	$(BIN)/python -m benchmarks.batch_polling

bench-llama: venv
	$(BIN)/python benchmarks/llama_tokens.py

# The whole deployment on this machine: PostgreSQL (cluster under .airflow/deployment/postgres, 127.0.0.1 only),
# api-server (UI), scheduler, dag-processor and triggerer with the LocalExecutor; logs in .airflow/logs.
# Prints the UI address and the login; Ctrl-C or `make airflow-stop` stops it. `make demo` stays on SQLite.
.PHONY: airflow airflow-stop
airflow: venv
	$(BIN)/python -m airflow_provider_trainium.devserver up

airflow-stop:
	$(BIN)/python -m airflow_provider_trainium.devserver stop
