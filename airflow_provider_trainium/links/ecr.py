"""Extra link from a task to the image it built or found, on the ECR console."""

from __future__ import annotations

from airflow.providers.amazon.aws.links.base_aws import BASE_AWS_CONSOLE_LINK, BaseAwsLink


class EcrImageLink(BaseAwsLink):
    """The image's detail page, addressed by digest so it never follows a moved tag."""

    name = "ECR Image"
    key = "trainium_ecr_image"
    format_str = (
        BASE_AWS_CONSOLE_LINK
        + "/ecr/repositories/private/{registry_id}/{repository_name}/_/image/{digest}/details"
        + "?region={region_name}"
    )
