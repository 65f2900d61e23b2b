"""The deployment exposes nothing beyond this host and answers only requests addressed to it."""

from __future__ import annotations

import os

import psutil
import requests

from devserver.deployment import USERNAME


def deployment_processes(deployment) -> list[psutil.Process]:
    """Every process of the deployment: its components' process groups and the PostgreSQL server's tree."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) in deployment.groups:
                found.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    postmaster = psutil.Process(int((deployment.postgres.data / "postmaster.pid").read_text().split()[0]))
    return [*found, postmaster, *postmaster.children(recursive=True)]


def test_every_listener_is_on_loopback_on_the_deployments_own_ports(deployment):
    listening = set()
    for proc in deployment_processes(deployment):
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        listening |= {(proc.name(), c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    assert {ip for _, ip, _ in listening} == {"127.0.0.1"}, sorted(listening)
    ports = {port for _, _, port in listening}
    assert {deployment.ui_port, deployment.log_port, deployment.postgres.port} <= ports, sorted(listening)
    assert not ports & {8793, 8794}, sorted(listening)  # Airflow's fixed log server ports stay free
    # the log server is Airflow's: it wants the API server's signed token
    assert requests.get(f"http://127.0.0.1:{deployment.log_port}/log/x.log", timeout=30).status_code == 403


def test_a_request_for_another_host_gets_no_login_even_with_the_admin_password(deployment):
    login = {"username": USERNAME, "password": deployment.password}
    token = requests.post(f"{deployment.url}/auth/token", json=login, timeout=30)
    assert token.status_code in (200, 201), token.text
    rebound = requests.post(f"{deployment.url}/auth/token", json=login, headers={"Host": "evil.example"}, timeout=30)
    assert rebound.status_code == 400 and "access_token" not in rebound.text, rebound.text
    bearer = {"Authorization": f"Bearer {token.json()['access_token']}"}
    dags = f"{deployment.url}/api/v2/dags"
    assert requests.get(dags, headers=bearer, timeout=30).status_code == 200
    port = deployment.ui_port
    assert requests.get(dags, headers={**bearer, "Host": f"evil.example:{port}"}, timeout=30).status_code == 400
    assert requests.get(dags, headers={**bearer, "Host": f"localhost:{port}"}, timeout=30).status_code == 200
