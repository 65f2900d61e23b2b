"""A user's image built ``FROM`` the project's training image: the base pinned by digest, the contract kept.

A user's Dockerfile starts ``ARG TRAINIUM_BASE_IMAGE`` / ``FROM ${TRAINIUM_BASE_IMAGE}``; the build task names the
base (``base_image="trainium"``: the trainium connection's ``image``; or a reference, e.g. the XCom of the build
task that built the training image), which is pinned to ``repository@sha256:...`` and passed as that build arg.
Build args are part of the content hash, so a new base digest is a new tag and a rebuild.

The image inherits the launcher ENTRYPOINT, the empty CMD, ``PYTHONPATH=/opt/trainium`` and the Neuron labels
(which say its stack and release) through ``FROM``. A Dockerfile that would change the first three is refused
before anything is built: ECS and Batch send only the launcher's arguments as the container command, so another
ENTRYPOINT would get ``--nodes=1 ...`` as its arguments, a CMD never runs (every job sends a command), and a
PYTHONPATH without ``/opt/trainium`` hides the launcher. What the job runs belongs in the job task's
``command=`` / ``script=``, not in the image.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_trainium.image.container_registry import ContainerRegistry
from airflow_provider_trainium.image.dockerfile import base_image, logical_lines
from airflow_provider_trainium.image.errors import ContainerRegistryError, ContextError
from airflow_provider_trainium.neuron.container_contract import IMAGE_ENTRYPOINT

#: The build arg a user's Dockerfile takes its base from.
BASE_ARG = "TRAINIUM_BASE_IMAGE"
#: ``base_image`` value meaning the trainium connection's configured training image.
CONFIGURED_IMAGE = "trainium"
#: Where the training image keeps the launcher's package; a user's PYTHONPATH must keep it.
LAUNCHER_PATH = "/opt/trainium"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ENV_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)")


@dataclass(frozen=True)
class ImageReference:
    """``repository[:tag][@digest]`` split into its parts."""

    repository: str
    tag: str | None
    digest: str | None

    @classmethod
    def parse(cls, reference: str) -> ImageReference:
        text = reference.strip()
        name, _, digest = text.partition("@")
        slash = name.rfind("/")
        colon = name.rfind(":")
        tag = None
        if colon > slash:  # a colon after the last slash is a tag, not a registry port
            name, tag = name[:colon], name[colon + 1 :]
        if not name or (digest and not _DIGEST.match(digest)) or tag == "":
            raise ContextError(f"base image {reference!r} is not an image reference (repository[:tag][@sha256:...])")
        return cls(name, tag, digest or None)

    @property
    def pinned(self) -> str:
        """``repository@digest``: the tag is dropped, so a tag moved onto the same digest changes nothing."""
        if not self.digest:
            raise ContextError(f"{self.repository} has no digest yet")
        return f"{self.repository}@{self.digest}"


def pin_reference(reference: str, registry_for: Callable[[str], ContainerRegistry]) -> str:
    """``reference`` as ``repository@sha256:...``: as given when it carries a digest, else its tag's digest as the
    registry holds it now (``registry_for(repository)``). A reference with neither is refused: "latest" by default
    is exactly the moving base this pinning exists to avoid."""
    parsed = ImageReference.parse(reference)
    if parsed.digest:
        return parsed.pinned
    if not parsed.tag:
        raise ContextError(f"base image {reference!r} names no tag or digest; pin it (repository@sha256:...)")
    digest = registry_for(parsed.repository).lookup(parsed.tag)
    if not digest:
        raise ContainerRegistryError(f"base image {reference!r} is not in its registry; build or push it first")
    return f"{parsed.repository}@{digest}"


@dataclass(frozen=True)
class _Stage:
    base: str
    alias: str | None
    instructions: list[tuple[str, str]]


def _stages(text: str) -> list[_Stage]:
    stages: list[_Stage] = []
    for instruction, rest in logical_lines(text):
        if instruction == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            alias = words[2].lower() if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(_Stage(words[0] if words else "", alias, []))
        elif stages:
            stages[-1].instructions.append((instruction, rest))
    return stages


def built_chain(text: str, target: str | None = None) -> list[_Stage]:
    """The built stage (``target``, else the last) and the stages it starts ``FROM``, the first ancestor first:
    what the image inherits."""
    stages = _stages(text)
    if not stages:
        return []
    chosen = next((s for s in stages if target and s.alias == target.lower()), stages[-1])
    chain = [chosen]
    by_alias = {s.alias: s for s in stages if s.alias}
    while (parent := by_alias.get(chain[0].base.lower())) is not None and parent not in chain:
        chain.insert(0, parent)
    return chain


def _env_values(rest: str, name: str) -> list[str]:
    pairs = _ENV_PAIR.findall(rest)
    if not pairs:  # the legacy form: ENV NAME value
        key, _, value = rest.partition(" ")
        pairs = [(key, value.strip())]
    return [value.strip("\"'") for key, value in pairs if key == name]


def contract_problems(text: str, target: str | None = None) -> list[str]:
    """Why the image built from ``text`` would not keep the container contract its base carries; empty when it
    does. Only the built stage and the stages it inherits from count (a builder stage may do as it likes)."""
    problems: list[str] = []
    launcher = " ".join(IMAGE_ENTRYPOINT)
    for stage in built_chain(text, target):
        for instruction, rest in stage.instructions:
            if instruction == "ENTRYPOINT" and _json_list(rest) != list(IMAGE_ENTRYPOINT):
                problems.append(
                    f"ENTRYPOINT {rest} replaces the launcher ({launcher}): ECS and Batch send only the launcher's "
                    "arguments as the command, so this ENTRYPOINT would get them; drop it and name what runs in the "
                    "job task's command= or script="
                )
            elif instruction == "CMD" and _json_list(rest) != []:
                problems.append(
                    f"CMD {rest} never runs (every job sends the launcher's arguments as the command, and a container "
                    "started without one must fail, not run a default); drop it and name what runs in the job "
                    "task's command= or script="
                )
            elif instruction == "ENV":
                for value in _env_values(rest, "PYTHONPATH"):
                    if LAUNCHER_PATH not in value and "$PYTHONPATH" not in value and "${PYTHONPATH}" not in value:
                        problems.append(
                            f"ENV PYTHONPATH={value} drops {LAUNCHER_PATH}, where the launcher lives; append to it "
                            f"(PYTHONPATH=/opt/user:{LAUNCHER_PATH}) or ship code with the job's code_dir="
                        )
    return problems


def _json_list(rest: str) -> list[str] | None:
    """The exec form's words; None for the shell form (never the launcher's exec form)."""
    try:
        words = json.loads(rest)
    except json.JSONDecodeError:
        return None
    return [str(w) for w in words] if isinstance(words, list) else None


def check_user_dockerfile(text: str, dockerfile: str, target: str | None = None) -> None:
    """ContextError naming every contract problem of a user's Dockerfile, before anything is resolved or built."""
    problems = contract_problems(text, target)
    if problems:
        raise ContextError(f"{dockerfile} does not keep the container contract: " + "; ".join(problems))


def check_starts_from(text: str, dockerfile: str, build_args: dict[str, str], target: str | None, pinned: str) -> None:
    """The built stage must start from the pinned base, i.e. ``FROM ${TRAINIUM_BASE_IMAGE}`` (directly or through a
    stage); a Dockerfile that ignores the arg would build on something else under the training image's name."""
    found = base_image(text, build_args, target)
    if found != pinned:
        raise ContextError(
            f"{dockerfile} builds FROM {found or 'scratch'}, not the training image: declare `ARG {BASE_ARG}` before "
            f"the first FROM and start the built stage `FROM ${{{BASE_ARG}}}`"
        )
