"""The deployment's own PostgreSQL cluster: loopback only, password auth, and a clean stop within its bound
(clients connected or not)."""

from __future__ import annotations

import shutil
import time

import pytest

from devserver.postgres import DATABASE, USER, PostgresCluster
from tests.e2e.conftest import ARTIFACTS


@pytest.fixture
def cluster():
    root = ARTIFACTS / "postgres-unit"
    shutil.rmtree(root, ignore_errors=True)
    pg = PostgresCluster(root)
    pg.init()
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_cluster_listens_on_loopback_only_with_a_password_and_stops(cluster):
    import psycopg2

    conn = psycopg2.connect(host="127.0.0.1", port=cluster.port, user=USER, password=cluster.password,
                            dbname=DATABASE)  # fmt: skip
    with conn.cursor() as cur:
        cur.execute("SHOW listen_addresses")
        assert cur.fetchone()[0] == "127.0.0.1"
    conn.close()
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(host="127.0.0.1", port=cluster.port, user=USER, password="wrong", dbname=DATABASE)
    cluster.init()  # idempotent: an existing cluster keeps its data and password
    assert cluster.running() and cluster.alive()
    idle = psycopg2.connect(host="127.0.0.1", port=cluster.port, user=USER, password=cluster.password,
                            dbname=DATABASE)  # fmt: skip
    idle.cursor().execute("BEGIN")  # a client in a transaction: a fast shutdown ends it instead of waiting
    started = time.monotonic()
    cluster.stop(timeout=10)
    assert time.monotonic() - started < 10
    assert not cluster.running() and not cluster.alive()
    with pytest.raises(psycopg2.OperationalError):
        psycopg2.connect(host="127.0.0.1", port=cluster.port, user=USER, password=cluster.password, dbname=DATABASE)
