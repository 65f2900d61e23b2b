"""A user's image from the training image: the base pinned by digest into the tag, the container contract kept."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.image.builders.base import BASE_DIGEST_LABEL, BuildOutput, BuildRequest
from airflow_provider_trainium.image.errors import ContainerRegistryError, ContextError
from airflow_provider_trainium.image.user_image import (
    BASE_ARG,
    ImageReference,
    check_starts_from,
    contract_problems,
    pin_reference,
)
from airflow_provider_trainium.operators.image import TrainiumImageBuildOperator
from tests.conftest import set_trainium_connection, write_tree

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
TRAINING = "127.0.0.1:5000/trainium/train"
RUNTIME = "trainium.neuron.runtime.version"
USER_DOCKERFILE = f"ARG {BASE_ARG}\nFROM ${{{BASE_ARG}}}\nCOPY train.py /opt/user/train.py\n"


@pytest.mark.parametrize(
    ("reference", "parts"),
    [(f"{TRAINING}:ctx-1", (TRAINING, "ctx-1", None)), (f"{TRAINING}@{D1}", (TRAINING, None, D1)),
     (f"{TRAINING}:ctx-1@{D1}", (TRAINING, "ctx-1", D1)),
     ("127.0.0.1:5000/train", ("127.0.0.1:5000/train", None, None))],
)  # fmt: skip
def test_references_split_a_port_from_a_tag(reference: str, parts: tuple[str | None, ...]) -> None:
    parsed = ImageReference.parse(reference)
    assert (parsed.repository, parsed.tag, parsed.digest) == parts


@dataclass
class FakeRegistry:
    """One repository's tags -> digest, and each digest's labels."""

    repository: str
    tags: dict[str, str] = field(default_factory=dict)
    label_sets: dict[str, dict[str, str]] = field(default_factory=dict)
    insecure: bool = True

    def lookup(self, tag: str) -> str | None:
        return self.tags.get(tag)

    def labels(self, tag: str) -> dict[str, str] | None:
        digest = self.tags.get(tag)
        return None if digest is None else dict(self.label_sets.get(digest, {}))

    def auths(self) -> list[Any]:
        return []


def test_a_tag_is_pinned_to_the_digest_its_registry_holds_and_a_digest_is_kept() -> None:
    registry = FakeRegistry(TRAINING, {"ctx-1": D1})
    assert pin_reference(f"{TRAINING}:ctx-1", lambda repo: registry) == f"{TRAINING}@{D1}"
    # a digest needs no registry; a tag next to it is dropped, so moving a tag onto it changes nothing
    assert pin_reference(f"{TRAINING}:old@{D2}", lambda repo: pytest.fail("asked the registry")) == f"{TRAINING}@{D2}"
    with pytest.raises(ContainerRegistryError, match="not in its registry"):
        pin_reference(f"{TRAINING}:ctx-9", lambda repo: registry)
    with pytest.raises(ContextError, match="no tag or digest"):
        pin_reference(TRAINING, lambda repo: registry)


@pytest.mark.parametrize(
    ("lines", "problem"),
    [('ENTRYPOINT ["python", "/opt/user/train.py"]', "ENTRYPOINT .* replaces the launcher"),
     # shell form: not the exec form
     ("ENTRYPOINT python -m trainium_trainer.launch", "ENTRYPOINT .* replaces the launcher"),
     ('CMD ["python", "/opt/user/train.py"]', "CMD .* never runs"),
     ("ENV PYTHONPATH=/opt/user", "drops /opt/trainium"),
     ("ENV PYTHONPATH /opt/user", "drops /opt/trainium")],
)  # fmt: skip
def test_a_dockerfile_that_breaks_the_container_contract_is_refused(lines: str, problem: str) -> None:
    (found,) = contract_problems(USER_DOCKERFILE + lines + "\n")
    assert re.search(problem, found), found


def test_what_keeps_the_contract_passes_and_a_builder_stage_may_do_as_it_likes() -> None:
    keeps = USER_DOCKERFILE + (
        'ENTRYPOINT ["python", "-m", "trainium_trainer.launch"]\nCMD []\n'
        "ENV PYTHONPATH=/opt/user:${PYTHONPATH} OTHER=1\nENV PYTHONPATH=/opt/trainium:/opt/x\n"
    )
    assert contract_problems(keeps) == []
    multi = f'ARG {BASE_ARG}\nFROM python:3.12 AS tools\nENTRYPOINT ["make"]\nFROM ${{{BASE_ARG}}}\nCOPY x /x\n'
    assert contract_problems(multi) == []
    # a stage the built one starts FROM passes its ENTRYPOINT on
    inherited = f'ARG {BASE_ARG}\nFROM ${{{BASE_ARG}}} AS deps\nCMD ["x"]\nFROM deps\nCOPY x /x\n'
    assert len(contract_problems(inherited)) == 1 and len(contract_problems(inherited, target="deps")) == 1


def test_the_built_stage_must_start_from_the_pinned_base() -> None:
    pinned = f"{TRAINING}@{D1}"
    check_starts_from(USER_DOCKERFILE, "Dockerfile", {BASE_ARG: pinned}, None, pinned)
    staged = f"ARG {BASE_ARG}\nFROM ${{{BASE_ARG}}} AS deps\nRUN true\nFROM deps\n"
    check_starts_from(staged, "Dockerfile", {BASE_ARG: pinned}, None, pinned)
    with pytest.raises(ContextError, match=r"builds FROM python:3.12, not the training image.*ARG TRAINIUM_BASE"):
        check_starts_from("FROM python:3.12\n", "Dockerfile", {BASE_ARG: pinned}, None, pinned)
    with pytest.raises(ContextError, match="declare `ARG TRAINIUM_BASE_IMAGE` before the first FROM"):
        check_starts_from(f"FROM scratch\nARG {BASE_ARG}\nFROM ${{{BASE_ARG}}}\n", "Dockerfile", {BASE_ARG: pinned},
                          None, pinned)  # fmt: skip


# -- the operator's path, with a registry and a builder that stand in for buildah and a real registry ----------------


@dataclass
class FakeBuilder:
    """Pushes a digest derived from the request into the registry and reports the base's digest from its reference."""

    registry: FakeRegistry
    requests: list[BuildRequest] = field(default_factory=list)
    name: str = "fake"

    def build(self, request: BuildRequest) -> BuildOutput:
        self.requests.append(request)
        tag = request.image.rpartition(":")[2]
        digest = "sha256:" + hashlib.sha256(request.context_digest.encode()).hexdigest()
        self.registry.tags[tag] = digest
        base_digest = (request.base_image or "").partition("@")[2] or None
        # labels come through FROM: the training image's, plus the base digest the builder adds
        self.registry.label_sets[digest] = {RUNTIME: "2.30.51.0-faafe26f0", BASE_DIGEST_LABEL: str(base_digest)}
        return BuildOutput(digest, base_digest)


@dataclass
class Ti:
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeRegistry, FakeRegistry, Path]:
    """The training image's repository (tag ctx-1 -> D1), the user image's, and a user's context."""
    import airflow_provider_trainium.image.container_registry as container_registry

    training = FakeRegistry(TRAINING, {"ctx-1": D1})
    user = FakeRegistry("127.0.0.1:5000/trainium/user")
    monkeypatch.setattr(container_registry, "parse_repository", lambda repo, **_: {TRAINING: training}[repo])
    set_trainium_connection(monkeypatch, image=f"{TRAINING}:ctx-1")
    context = write_tree(tmp_path / "user", {"Dockerfile": USER_DOCKERFILE, "train.py": "print('hi')\n"})
    return training, user, context


def build(user: FakeRegistry, builder: FakeBuilder, context: Path, **kwargs: Any) -> tuple[str, dict[str, Any]]:
    op = TrainiumImageBuildOperator(task_id="user_image", context_dir=str(context), builder=builder, **kwargs)
    op._registry = lambda config, aws, region: user  # type: ignore[method-assign]
    ti = Ti()
    return op.execute({"ti": ti}), ti.xcoms  # type: ignore[arg-type]


def test_the_users_image_builds_on_the_configured_training_image_pinned_by_digest(world) -> None:
    training, user, context = world
    builder = FakeBuilder(user)
    reference, xcoms = build(user, builder, context, base_image="trainium")
    (request,) = builder.requests
    assert request.build_args == {BASE_ARG: f"{TRAINING}@{D1}"} and request.base_image == f"{TRAINING}@{D1}"
    assert reference == f"{user.repository}@{xcoms['digest']}" and xcoms["built"] is True
    assert xcoms["base_digest"] == D1 and xcoms["stack"] == "xla" and xcoms["labels"][RUNTIME]

    # the same base by its XCom reference: the same tag, found, not built again
    again, xcoms_again = build(user, builder, context, base_image=f"{TRAINING}@{D1}")
    assert (again, xcoms_again["built"], len(builder.requests)) == (reference, False, 1)

    # a new training image (the tag now on another digest) is a new tag and a build
    training.tags["ctx-1"] = D2
    _, xcoms_new = build(user, builder, context, base_image="trainium")
    assert xcoms_new["tag"] != xcoms["tag"] and xcoms_new["built"] is True and xcoms_new["base_digest"] == D2


def test_a_native_base_makes_a_native_user_image(world) -> None:
    _, user, context = world

    class NativeBase(FakeBuilder):
        def build(self, request: BuildRequest) -> BuildOutput:
            out = super().build(request)
            self.registry.label_sets[str(out.digest)][RUNTIME] = "2.35.33.0"  # the native image's runtime
            return out

    _, xcoms = build(user, NativeBase(user), context, base_image="trainium")
    assert xcoms["stack"] == "native"


@pytest.mark.parametrize(
    ("dockerfile", "kwargs", "message"),
    [(USER_DOCKERFILE + 'ENTRYPOINT ["python", "train.py"]\n', {}, "does not keep the container contract"),
     ("FROM python:3.12\nCOPY train.py /t.py\n", {}, "not the training image"),
     (USER_DOCKERFILE, {"build_args": {BASE_ARG: "x:1"}}, "set base_image or build_args")],
)  # fmt: skip
def test_a_broken_user_build_fails_before_anything_is_built(world, dockerfile, kwargs, message) -> None:
    _, user, context = world
    (context / "Dockerfile").write_text(dockerfile)
    builder = FakeBuilder(user)
    with pytest.raises(ContextError, match=message):
        build(user, builder, context, base_image="trainium", **kwargs)
    assert builder.requests == []


def test_trainium_without_a_configured_image_says_what_to_set(world, monkeypatch) -> None:
    _, user, context = world
    set_trainium_connection(monkeypatch)
    with pytest.raises(ContextError, match="sets none: set `image` there"):
        build(user, FakeBuilder(user), context, base_image="trainium")
