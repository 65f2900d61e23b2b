#!/usr/bin/env bash
# A second, smaller environment on the oldest Airflow 3 minor the provider supports (the floor in
# pyproject.toml): provider import, DAG parsing and the MNIST DAG on local compute, so a private import or a
# newer-only API fails here before a user on a managed platform meets it.
set -euo pipefail
cd "$(dirname "$0")/.."
AIRFLOW_OLDEST="${AIRFLOW_OLDEST:-3.0.6}"
VENV="${VENV_OLDEST:-$PWD/.venv-oldest}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.installed-$AIRFLOW_OLDEST"

if [ ! -f "$STAMP" ]; then
  test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check uv==0.13.9
  # torch/torch-xla pinned as in requirements.lock, so uv takes them from its cache.
  "$VENV/bin/uv" pip install -q -p "$VENV/bin/python" -c .ci/oldest-constraints.txt \
    "apache-airflow==$AIRFLOW_OLDEST" \
    "apache-airflow-providers-amazon[aiobotocore]>=9.39,<10" \
    "apache-airflow-providers-common-compat>=1.23" \
    "s3fs>=2024.6" "torch==2.9.1" "torch-xla==2.9.0" "numpy==1.26.4" "safetensors>=0.4" "scikit-learn>=1.5" \
    "pytest>=8" "pytest-timeout>=2.3" "moto[server]>=5.1" "jsonschema>=4" "wtforms>=3"
  "$VENV/bin/uv" pip install -q -p "$VENV/bin/python" --no-deps --config-settings editable_mode=compat -e .
  touch "$STAMP"
fi

export AIRFLOW_HOME="$PWD/.airflow-oldest"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags" AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__CORE__UNIT_TEST_MODE=False
export PJRT_DEVICE=CPU TOKENIZERS_PARALLELISM=false
mkdir -p "$AIRFLOW_HOME"
if [ ! -f "$AIRFLOW_HOME/.migrated-$AIRFLOW_OLDEST" ]; then
  "$VENV/bin/airflow" db migrate >"$AIRFLOW_HOME/migrate.log" 2>&1 || { tail -n 40 "$AIRFLOW_HOME/migrate.log"; exit 1; }
  touch "$AIRFLOW_HOME/.migrated-$AIRFLOW_OLDEST"
fi
"$VENV/bin/python" -c "import airflow; print('airflow', airflow.__version__)"
AIRFLOW_OLDEST="$AIRFLOW_OLDEST" "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/oldest "$@"
