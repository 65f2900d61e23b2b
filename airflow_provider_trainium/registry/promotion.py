"""Moving an alias to a version: every move kept in the alias's history, none lost to a concurrent mover.

Readers roll an alias's pointer forward over newer history entries (``RegistryReader._alias_head``), so a mover
that dies between writing its history entry and advancing the pointer loses nothing.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from airflow_provider_trainium.registry import store
from airflow_provider_trainium.registry.errors import RegistryError
from airflow_provider_trainium.registry.manifest import now_iso
from airflow_provider_trainium.registry.names import validate_alias, validate_version
from airflow_provider_trainium.registry.reading import RegistryReader
from airflow_provider_trainium.registry.records import AliasState
from airflow_provider_trainium.registry.store import MAX_ATTEMPTS, jsonable

log = logging.getLogger(__name__)


class AliasPromoter(RegistryReader):
    """A registry root whose aliases are moved (a version must be published before an alias points at it)."""

    def promote(
        self,
        name: str,
        alias: str,
        version: int,
        moved_by: dict[str, Any] | None = None,
        reason: str | None = None,
        forward_only: bool = False,
    ) -> AliasState:
        """Point ``alias`` at ``version``. Concurrent moves are serialised, none is lost, all are in history.

        ``forward_only``: leave the alias where it is when it already points at a newer version (a rerun of an
        old interval must never move ``latest`` back); the current state is returned.

        The move happens when this call exclusively creates the alias's next history entry; the pointer
        file is then advanced with a conditional write that never moves it backwards.
        """
        validate_alias(alias)
        version = validate_version(version)
        self.get_version(name, version)  # rejects a missing version before anything is written
        for _ in range(MAX_ATTEMPTS):
            head = self._alias_head(name, alias)
            if head and int(head["version"]) == version:
                return AliasState.from_dict(head)  # already there: a retried promotion changes nothing
            if forward_only and head and int(head["version"]) > version:
                log.info(
                    "alias %s@%s is at version %s, newer than %d: not moved back", name, alias, head["version"], version
                )
                return AliasState.from_dict(head)
            revision = int(head["revision"]) + 1 if head else 1
            state = AliasState(
                name=name,
                alias=alias,
                version=version,
                revision=revision,
                previous_version=int(head["version"]) if head else None,
                moved_at=now_iso(),
                moved_by=jsonable(moved_by or {}),
                reason=reason,
            )
            if store.create(self._history_file(name, alias, revision), store.dump_json(state.to_dict())):
                self._advance_pointer(name, alias, state)
                return state
        raise RegistryError(f"could not move alias {alias!r} of {name!r}: too much contention")

    def _advance_pointer(self, name: str, alias: str, state: AliasState) -> None:
        path = self._alias_file(name, alias)
        for _ in range(MAX_ATTEMPTS):
            self._fresh(name)
            data, token = store.read_for_swap(path)
            current = json.loads(data) if data else None
            if current and int(current["revision"]) >= state.revision:
                return
            if store.swap(path, store.dump_json(state.to_dict()), token):
                return
        log.warning("alias %s@%s: pointer not advanced; readers roll forward from history", name, alias)
