"""These tests run in the second environment on the oldest supported Airflow (.ci/oldest-airflow.sh).

The newest Airflow runs the same DAGs through the rest of the suite, so here they are collected only when
that script sets AIRFLOW_OLDEST.
"""

import os

collect_ignore_glob = [] if os.environ.get("AIRFLOW_OLDEST") else ["test_*.py"]
