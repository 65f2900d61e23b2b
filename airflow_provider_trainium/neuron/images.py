"""Which training images may run: the trust rule, checked before any AWS call.

A job runs with the job role, so whoever picks its image picks the code that holds those credentials. An
image is trusted only when it is

* in the configured repository (the ``trainium`` connection's ``ecr_repository``) and pinned by digest
  (``<repository>@sha256:<64 hex>``), so neither a tag move nor another repository can change what runs; or
* exactly the image ``TrainiumImageBuildOperator`` built (or found) for this DAG run: the DAG author chose
  its sources and its repository.

Pure string rules: no AWS client here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

RULE = (
    "trusted images only: an image must be in the configured repository (the trainium connection's "
    "ecr_repository) pinned by digest (<repository>@sha256:<64 hex>), or be the image this DAG run built"
)
_DIGEST = re.compile(r"^(?P<repository>[^@\s]+)@sha256:[0-9a-f]{64}$")
_ARN_ACCOUNT = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):")


class UntrustedImageError(ValueError):
    """An image that must not run; the message names the rule."""


def repository_uri(ecr_repository: str | None, region_name: str | None, role_arns: Iterable[str | None] = ()) -> str:
    """The configured repository as ``host/name``; a bare ECR name is completed from a role ARN's account."""
    repository = (ecr_repository or "").strip().rstrip("/")
    if not repository:
        return ""
    host = repository.partition("/")[0]
    if "/" in repository and ("." in host or ":" in host or host == "localhost"):
        return repository
    accounts = [m["account"] for arn in role_arns if arn and (m := _ARN_ACCOUNT.match(arn))]
    if not accounts or not region_name:
        return ""  # cannot tell which account's repository is meant: nothing matches it
    return f"{accounts[0]}.dkr.ecr.{region_name}.amazonaws.com/{repository}"


def image_problem(image: str | None, repository: str, built: Iterable[str] = ()) -> str | None:
    """Why ``image`` must not run (a message naming the rule), or None when it is trusted."""
    image = (image or "").strip()
    if not image:
        return None  # "no image" is the backend's own, clearer error
    if image in {b for b in built if b}:
        return None
    match = _DIGEST.match(image)
    if not repository:
        return f"image {image!r} refused: no ecr_repository is configured in the trainium connection ({RULE})"
    if match is None:
        return f"image {image!r} refused: it is not pinned by digest ({RULE})"
    if match["repository"] != repository:
        return f"image {image!r} refused: it is not in the configured repository {repository!r} ({RULE})"
    return None


def check_image(image: str | None, repository: str, built: Iterable[str] = ()) -> None:
    problem = image_problem(image, repository, built)
    if problem:
        raise UntrustedImageError(problem)


def check_trusted(image: str | None, config: object, built: Iterable[str] = ()) -> None:
    """The trust rule under a connection (a ``TrainiumConfig``): its repository, or an image the run built."""
    check_image(image, trusted_repository(config), built)


def trusted_repository(config: object) -> str:
    """The repository a ``TrainiumConfig`` trusts, as ``host/name`` ('' when none is configured)."""
    return repository_uri(
        getattr(config, "ecr_repository", None),
        getattr(config, "region_name", None),
        (getattr(config, "job_role_arn", None), getattr(config, "ecs_execution_role_arn", None)),
    )
