"""The view's app over Airflow's real metadata database and auth manager: rows a test writes, a JWT per user.

Rows go into the test Airflow home's database (``make airflow-home``) under DAG ids unique to the test, and are
removed after it. DAG access is restricted the simple auth manager's own way: a DAG's bundle belongs to a team,
and a non-admin user reads only the DAGs of their teams.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

BUNDLE_TEAMS = ("red", "blue")


@dataclass
class Rows:
    """What a test put into the metadata database, and how to take it out again."""

    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    dag_ids: list[str] = field(default_factory=list)
    bundles: list[str] = field(default_factory=list)
    #: Later than every row a real run left in the database: the view lists the most recent task instances
    #: (``plugins.runs.DEFAULT_LIMIT``), and a developer's test home holds hundreds from integration runs.
    _clock: datetime = field(default_factory=lambda: datetime.now(UTC) + timedelta(days=365))

    def team(self, name: str) -> str:
        return f"{name}-{self.tag}"

    def dag(self, name: str, team: str) -> str:
        """A DAG whose bundle belongs to ``team`` (one of ``BUNDLE_TEAMS``)."""
        from airflow.models.dag import DagModel
        from airflow.models.dagbundle import DagBundleModel
        from airflow.models.team import Team, dag_bundle_team_association_table
        from airflow.utils.session import create_session
        from sqlalchemy import insert, select

        dag_id, bundle = f"{name}_{self.tag}", f"bundle-{team}-{self.tag}"
        with create_session() as session:
            if bundle not in self.bundles:
                session.add(DagBundleModel(name=bundle))
                if session.scalar(select(Team).where(Team.name == self.team(team))) is None:
                    session.add(Team(name=self.team(team)))
                session.flush()
                session.execute(
                    insert(dag_bundle_team_association_table).values(dag_bundle_name=bundle, team_name=self.team(team))
                )
                self.bundles.append(bundle)
            session.add(DagModel(dag_id=dag_id, bundle_name=bundle, is_paused=False))
        self.dag_ids.append(dag_id)
        return dag_id

    def task(
        self,
        dag_id: str,
        run_id: str,
        task_id: str = "train",
        operator: str = "TrainiumTrainingOperator",
        state: str = "success",
        xcoms: dict[str, Any] | None = None,
        rendered: dict[str, Any] | None = None,
        map_index: int = -1,
        custom_operator_name: str | None = None,
    ) -> None:
        """A task instance (its DAG run made on first use) with XComs and rendered fields; ``operator`` and
        ``custom_operator_name`` as Airflow records them (a decorated task: its class, and ``@task.<name>``)."""
        from airflow.models.dagrun import DagRun
        from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
        from airflow.models.taskinstance import TaskInstance as TI
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import insert, select

        self._clock += timedelta(minutes=1)
        with create_session() as session:
            run_pk = session.scalar(select(DagRun.id).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
            if run_pk is None:
                run_pk = session.execute(
                    insert(DagRun.__table__).values(
                        dag_id=dag_id, run_id=run_id, run_type="manual", state="running", run_after=self._clock
                    )
                ).inserted_primary_key[0]
            key = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index}
            session.execute(
                insert(TI.__table__).values(
                    id=uuid.uuid4(),
                    **key,
                    operator=operator,
                    custom_operator_name=custom_operator_name,
                    state=state,
                    pool="default_pool",
                    try_number=1,
                    start_date=self._clock,
                )  # fmt: skip
            )
            for name, value in (xcoms or {}).items():
                session.execute(
                    insert(XComModel.__table__).values(
                        **key,
                        dag_run_id=run_pk,
                        key=name,
                        value=json.loads(XComModel.serialize_value(value)),
                        timestamp=self._clock,
                    )  # fmt: skip
                )
            if rendered is not None:
                session.execute(insert(RTIF.__table__).values(**key, rendered_fields=rendered))

    def remove(self) -> None:
        from airflow.models.dag import DagModel
        from airflow.models.dagbundle import DagBundleModel
        from airflow.models.dagrun import DagRun
        from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
        from airflow.models.taskinstance import TaskInstance as TI
        from airflow.models.team import Team, dag_bundle_team_association_table
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import delete

        with create_session() as session:
            for model in (XComModel, RTIF, TI, DagRun, DagModel):
                session.execute(delete(model.__table__).where(model.__table__.c.dag_id.in_(self.dag_ids)))
            association = dag_bundle_team_association_table
            session.execute(delete(association).where(association.c.dag_bundle_name.in_(self.bundles)))
            session.execute(delete(DagBundleModel.__table__).where(DagBundleModel.__table__.c.name.in_(self.bundles)))
            session.execute(delete(Team.__table__).where(Team.__table__.c.name.like(f"%-{self.tag}")))


@pytest.fixture
def rows() -> Iterator[Rows]:
    made = Rows()
    try:
        yield made
    finally:
        made.remove()


@pytest.fixture
def auth_manager() -> Any:
    """The deployment's auth manager (the simple auth manager), as the API server sets it up."""
    from airflow.api_fastapi.app import create_auth_manager

    return create_auth_manager()


@pytest.fixture
def client(auth_manager: Any) -> Any:
    """The view's app, as the API server mounts it (Airflow's login dependency and session included)."""
    from fastapi.testclient import TestClient

    from airflow_provider_trainium.plugins.app import create_app

    return TestClient(create_app())


def login(auth_manager: Any, username: str, role: str, teams: list[str] | None = None) -> dict[str, str]:
    """Headers with a JWT the auth manager issued for this user (what ``/auth/token`` returns)."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    user = SimpleAuthManagerUser(username=username, role=role, teams=teams)
    return {"Authorization": f"Bearer {auth_manager.generate_jwt(user)}"}
