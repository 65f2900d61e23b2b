"""Evidence keys: one per job, derived from a secret only Airflow holds, so a record a job seals is checkable.

The evaluation job's verdict and the run's plan live under the run's prefix, which jobs may write (the shared job
role on AWS, the worker's user on local compute). What makes them evidence is a seal (``boundary.seal``): the
operator hands each job the key derived for its own job name (``job_key``), the evaluation seals its verdict
with it, and registering re-derives the key of the evaluation task's job and checks the seal. Another job (of this
run or any other) never sees that key, so it can neither edit the verdict nor write one that checks.

The secret is, in this order: ``[trainium] evidence_key`` (``AIRFLOW__TRAINIUM__EVIDENCE_KEY``, or a secrets
backend through ``evidence_key_secret``), Airflow's ``[core] fernet_key``, or a key file this module creates in
``$AIRFLOW_HOME`` (one machine only: every worker must derive the same keys, so a deployment with several sets
one of the first two). Local compute runs jobs as the worker's own user, which can read that file: there, as with
every file of the worker, the seal stops an edit by another DAG's code only as far as the machine's users do.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from trainium_trainer import boundary

SECTION = "trainium"
OPTION = "evidence_key"
KEY_FILE = "trainium-evidence.key"
#: What a job's key is derived for: the format, then the job name (``compute.naming.job_name``).
JOB_KEY_PURPOSE = b"trainium-evidence/1\0job\0"
PLAN_KEY_PURPOSE = b"trainium-evidence/1\0plan\0"


def root_key() -> bytes:
    """The secret every key derives from (module docstring for where it comes from)."""
    from airflow.providers.common.compat.sdk import conf

    configured = conf.get(SECTION, OPTION, fallback="") or ""
    if configured:
        return configured.encode()
    fernet = conf.get("core", "fernet_key", fallback="") or ""
    if fernet:
        return b"fernet\0" + fernet.encode()
    return home_key(Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow"))


def home_key(home: Path) -> bytes:
    """The key file under ``home``, created (owner-only) on first use; a second process racing the first reads
    the first one's key: the file appears whole, by a hard link, or not at all."""
    path = home / KEY_FILE
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        draft = home / f".{KEY_FILE}.{os.getpid()}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip().encode()


def job_key(job_name: str) -> str:
    """The evidence key (hex) of the job named ``job_name``: what that job, and only it, gets in its environment."""
    return hmac.new(root_key(), JOB_KEY_PURPOSE + job_name.encode(), hashlib.sha256).hexdigest()


def plan_key(dag_id: str, run_id: str, task_id: str) -> str:
    """The key Airflow seals the plan record of task ``task_id`` of a run with; no job gets it."""
    purpose = PLAN_KEY_PURPOSE + f"{dag_id}\0{run_id}\0{task_id}".encode()
    return hmac.new(root_key(), purpose, hashlib.sha256).hexdigest()


def sealed(record: dict[str, object], key: str) -> dict[str, object]:
    """``record`` with its seal under ``key``."""
    return {**record, boundary.SEAL_FIELD: boundary.seal(record, key)}


def seal_holds(record: dict[str, object], key: str) -> bool:
    """Whether ``record`` carries the seal ``key`` gives its other fields."""
    found = record.get(boundary.SEAL_FIELD)
    return isinstance(found, str) and hmac.compare_digest(found, boundary.seal(record, key))
