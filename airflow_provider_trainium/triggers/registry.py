"""Wait, in the triggerer, for a model version or an alias move."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_trainium import deprecated_names


def find_model(
    registry: Any, model_name: str, version: int | None, alias: str | None, newer_than: int
) -> dict[str, Any] | None:
    """The awaited version as ``{"name", "version", "uri", "manifest_uri", "metrics"}``, or None yet.

    ``version``: that version is published. ``alias``: the alias points at a version above ``newer_than``.
    Neither: the newest version is above ``newer_than``. Its files are hashed against the manifest first:
    a tampered version raises IntegrityError.
    """
    from airflow_provider_trainium.registry.registry import NotFoundError

    if version is not None:
        try:
            found = registry.get_version(model_name, version)
        except NotFoundError:
            return None
    elif alias is not None:
        state = registry.get_alias(model_name, alias)
        if state is None or state.version <= newer_than:
            return None
        found = registry.get_version(model_name, state.version)
    else:
        found = registry.latest_version(model_name)
        if found is None or found.version <= newer_than:
            return None
    found = registry.verified(found)  # a version whose files fail their sha256 is an error, never reported
    return {
        "name": found.name,
        "version": found.version,
        "uri": found.uri,
        "manifest_uri": found.manifest_uri,
        "metrics": found.metrics,
    }


class TrainiumRegisteredModelTrigger(BaseTrigger):
    """Polls the registry every ``poke_interval`` seconds; reads run in a thread, off the event loop."""

    def __init__(
        self,
        model_name: str,
        artifact_root: str,
        conn_id: str | None = None,
        version: int | None = None,
        alias: str | None = None,
        newer_than: int = 0,
        poke_interval: float = 60.0,
    ) -> None:
        super().__init__()
        self.model_name = model_name
        self.artifact_root = artifact_root
        self.conn_id = conn_id
        self.version = version
        self.alias = alias
        self.newer_than = newer_than
        self.poke_interval = poke_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "model_name": self.model_name,
                "artifact_root": self.artifact_root,
                "conn_id": self.conn_id,
                "version": self.version,
                "alias": self.alias,
                "newer_than": self.newer_than,
                "poke_interval": self.poke_interval,
            },
        )

    def check(self) -> dict[str, Any] | None:
        from airflow_provider_trainium.registry.registry import ModelRegistry

        registry = ModelRegistry(self.artifact_root, self.conn_id)
        return find_model(registry, self.model_name, self.version, self.alias, self.newer_than)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                found = await asyncio.to_thread(self.check)
            except Exception as exc:  # report to the task instead of dying silently in the triggerer
                message = f"{type(exc).__name__}: {exc}"
                yield TriggerEvent({"status": "error", "message": message})
                return
            if found is not None:
                yield TriggerEvent({"status": "success", "model": found})
                return
            await asyncio.sleep(self.poke_interval)


def __getattr__(name: str) -> Any:
    """The former class names (:mod:`airflow_provider_trainium.deprecated_names`)."""
    return deprecated_names.resolve(__name__, name)
