"""Extra link from a task to the image it built or found, on the ECR console.

Deliberately not built on the amazon provider's ``BaseAwsLink``: that module imports botocore, and a DAG
file that uses the image operator would pay for it at parse time.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow_provider_trainium.links.record import RecordLink, console, push_record


class EcrImageLink(RecordLink):
    """The image's detail page, addressed by digest so it never follows a moved tag."""

    name = "ECR Image"
    kind = "ecr"

    @classmethod
    def persist(cls, context: Any, operator: Any = None, **values: Any) -> None:
        """Store what the link needs (region_name, partition, registry_id, repository_name, digest)."""
        push_record(context, {"kind": cls.kind, **values})

    @staticmethod
    def url(values: dict[str, Any]) -> str:
        base = console(values)
        needed = ("region_name", "registry_id", "repository_name", "digest")
        if not base or not all(values.get(k) for k in needed):
            return ""
        return (
            f"{base}/ecr/repositories/private/{values['registry_id']}/"
            f"{quote(values['repository_name'], safe='/')}/_/image/{values['digest']}/details"
            f"?region={values['region_name']}"
        )
