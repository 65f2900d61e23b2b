"""The Batch fixtures (a job queue in the moto server, a trainium connection naming it)."""

from tests.batch.conftest import batch_env  # noqa: F401
