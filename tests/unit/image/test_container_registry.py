"""A plain-HTTP registry gets credentials only on this machine: basic auth over HTTP elsewhere is refused."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.image.container_registry import ContainerRegistryError, OciRegistry, hostname


@pytest.mark.parametrize("host", ["registry.example.com:5000", "10.0.0.5:5000", "registry.example.com"])
def test_credentials_for_an_insecure_registry_elsewhere_are_refused(host):
    with pytest.raises(ContainerRegistryError, match="plain HTTP"):
        OciRegistry(f"{host}/trainium/x", insecure=True, username="ci", password="secret")
    OciRegistry(f"{host}/trainium/x", username="ci", password="secret")  # HTTPS: fine
    OciRegistry(f"{host}/trainium/x", insecure=True)  # no credentials: fine


@pytest.mark.parametrize("host", ["localhost:5000", "127.0.0.1:5000", "[::1]:5000"])
def test_this_machine_may_get_credentials_over_http(host):
    assert OciRegistry(f"{host}/trainium/x", insecure=True, username="ci", password="secret").host == host


def test_hostname_drops_the_port():
    assert [hostname(h) for h in ("a.b:5000", "a.b", "[::1]:5000", "[::1]")] == ["a.b", "a.b", "[::1]", "[::1]"]
