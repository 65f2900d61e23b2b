"""The registry token flow (distribution's token auth): a 401 names a token service, which hands out a bearer
token for the repository, anonymously for public registries (public.ecr.aws, Docker Hub) or with a login."""

from __future__ import annotations

import re

from airflow_provider_trainium.image.errors import ContainerRegistryError, ContainerRegistryUnreachable

_PARAM = re.compile(r'(\w+)="([^"]*)"')


def parse_challenge(header: str) -> dict[str, str] | None:
    """``realm``, ``service`` and ``scope`` of a ``Bearer`` challenge; None for Basic or no challenge."""
    scheme, _, params = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return dict(_PARAM.findall(params))


def fetch_token(challenge: dict[str, str], auth: tuple[str, str] | None, timeout: float) -> str:
    """A bearer token from the challenge's realm (with the login as Basic auth when there is one)."""
    import requests

    realm = challenge.get("realm")
    if not realm or not realm.startswith(("https://", "http://")):
        raise ContainerRegistryError(f"registry token challenge names no usable realm: {challenge!r}")
    params = {k: v for k, v in challenge.items() if k in ("service", "scope")}
    try:
        response = requests.get(realm, params=params, auth=auth, timeout=timeout)
    except requests.RequestException as exc:
        raise ContainerRegistryUnreachable(
            f"registry token service {realm} is unreachable: {type(exc).__name__}"
        ) from None
    if response.status_code != 200:
        raise ContainerRegistryError(f"registry token service {realm} answered HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        raise ContainerRegistryError(f"registry token service {realm} did not answer JSON") from None
    token = body.get("token") or body.get("access_token")
    if not token:
        raise ContainerRegistryError(f"registry token service {realm} returned no token")
    return str(token)
