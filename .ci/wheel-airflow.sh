#!/usr/bin/env bash
# The provider as a platform team installs it into its Airflow: the built wheel (not the checkout, not the project's
# lock) into a fresh environment, on the floor Airflow (3.0.6, with Airflow's constraints for it, as its docs say to
# install: .ci/oldest-constraints.txt holds the pins that matter, since Airflow's constraints files are not reachable
# here) and on the newest Airflow on PyPI. The shipped DAGs go into an empty DAGs folder through
# `airflow-trainium dags install`; tests/wheel/ then runs there, from a copy outside the checkout, so every import
# comes from the installed wheel.
#   bash .ci/wheel-airflow.sh floor|newest [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
AIRFLOW_LINE="${1:-floor}"
shift || true
PYTHON="${PYTHON:-python3}"
case "$AIRFLOW_LINE" in
  floor) AIRFLOW_REQ="apache-airflow==3.0.6"; CONSTRAINTS=(-c .ci/oldest-constraints.txt) ;;
  newest) AIRFLOW_REQ="apache-airflow>=3.0.6,<4"; CONSTRAINTS=() ;;
  *) echo "usage: $0 floor|newest [pytest args]" >&2; exit 2 ;;
esac
# outside the checkout: no pytest config, conftest or package of it is found from there
WORK="${WHEEL_LANE_DIR:-${TMPDIR:-/tmp}/trainium-wheel-lane}/$AIRFLOW_LINE"
rm -rf "$WORK"
mkdir -p "$WORK/tests"
"$PYTHON" -m venv "$WORK/venv"
BIN="$WORK/venv/bin"
"$BIN/python" -m pip install -q --disable-pip-version-check uv==0.13.9
# sdist, then the wheel from it: what a release uploads
"$BIN/uv" build -q -p "$BIN/python" -o "$WORK/dist" .
WHEEL="$(ls "$WORK"/dist/*.whl)"
# wtforms: the API server's connection form (Airflow < 3.2 reads it from the hook)
"$BIN/uv" pip install -q -p "$BIN/python" "${CONSTRAINTS[@]}" "$AIRFLOW_REQ" "$WHEEL[trainer]" \
  "pytest>=8" "pytest-timeout>=2.3" "wtforms>=3"

export AIRFLOW_HOME="$WORK/home"
export AIRFLOW__CORE__DAGS_FOLDER="$AIRFLOW_HOME/dags" AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__UNIT_TEST_MODE=False PJRT_DEVICE=CPU TOKENIZERS_PARALLELISM=false
mkdir -p "$AIRFLOW_HOME"
"$BIN/airflow" db migrate >"$AIRFLOW_HOME/migrate.log" 2>&1 || { tail -n 40 "$AIRFLOW_HOME/migrate.log"; exit 1; }
"$BIN/airflow-trainium" dags install --to "$AIRFLOW__CORE__DAGS_FOLDER"
cp tests/wheel/test_installed_wheel.py "$WORK/tests/"
"$BIN/python" -c "import airflow; print('airflow', airflow.__version__, 'from', '$WHEEL')"
cd "$WORK/tests"
TRAINIUM_WHEEL="$WHEEL" AIRFLOW_LINE="$AIRFLOW_LINE" "$BIN/python" -m pytest -q -p no:cacheprovider --timeout=900 \
  test_installed_wheel.py "$@"
