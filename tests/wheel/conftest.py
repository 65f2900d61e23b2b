"""tests/wheel/ runs only in the environments .ci/wheel-airflow.sh builds from the wheel, from a copy outside the
checkout; the main suite does not collect it."""

collect_ignore_glob = ["test_*.py"]
