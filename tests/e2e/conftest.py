"""The real deployment (PostgreSQL, api-server, scheduler, DAG processor, triggerer) of tests/deployment, shared
here: one per package, started only by the tests that ask for it."""

from tests.deployment.conftest import api, deployment, registry  # noqa: F401  (fixtures)
