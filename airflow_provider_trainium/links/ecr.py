"""Extra link from a task to the image it built or found, on the ECR console.

Deliberately not built on the amazon provider's ``BaseAwsLink``: that module imports botocore, and a DAG
file that uses the image operator would pay for it at parse time.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.providers.common.compat.sdk import BaseOperatorLink, XCom

from airflow_provider_trainium.links.ecs import CONSOLE_DOMAINS


class EcrImageLink(BaseOperatorLink):
    """The image's detail page, addressed by digest so it never follows a moved tag."""

    name = "ECR Image"
    key = "trainium_ecr_image"

    @classmethod
    def persist(cls, context: Any, operator: Any = None, **values: Any) -> None:
        """Store what the link needs (region_name, aws_partition, registry_id, repository_name, digest)."""
        context["ti"].xcom_push(key=cls.key, value=values)

    @staticmethod
    def url(values: dict[str, Any]) -> str:
        domain = CONSOLE_DOMAINS.get(values.get("aws_partition") or "aws")
        needed = ("region_name", "registry_id", "repository_name", "digest")
        if not domain or not all(values.get(k) for k in needed):
            return ""
        return (
            f"https://console.{domain}/ecr/repositories/private/{values['registry_id']}/"
            f"{quote(values['repository_name'], safe='/')}/_/image/{values['digest']}/details"
            f"?region={values['region_name']}"
        )

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        values = XCom.get_value(key=self.key, ti_key=ti_key)
        return self.url(values) if isinstance(values, dict) else ""
