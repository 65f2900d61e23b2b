"""The real training image definition: lint-clean, pinned like the tested environment, minimal context."""

from __future__ import annotations

from pathlib import Path

from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.dockerfile import logical_lines
from tests.integration.image.conftest import assert_hadolint_clean

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "docker" / "Dockerfile"


def test_hadolint_is_clean() -> None:
    assert_hadolint_clean(DOCKERFILE)


def test_base_image_labels_and_entry_point() -> None:
    instructions = logical_lines(DOCKERFILE.read_text())
    args = {rest.split("=", 1)[0]: rest.split("=", 1)[1] for ins, rest in instructions if ins == "ARG" and "=" in rest}
    # The versions themselves are checked against docker/neuron-versions.toml in test_pins.py.
    assert {"BASE_IMAGE", "NEURON_SDK_VERSION", "TORCH_VERSION", "NEURONX_CC_VERSION"} <= set(args)
    labels = " ".join(rest for ins, rest in instructions if ins == "LABEL")
    for key in (
        "org.opencontainers.image.revision",
        "trainium.neuron.sdk.version",
        "trainium.neuron.compiler.version",
        "trainium.neuron.torch.version",
        "trainium.neuron.runtime.version",
    ):
        assert key in labels
    # The DLC's serving probe (curl localhost:8080/ping) would report every training container unhealthy.
    assert ("HEALTHCHECK", "NONE") in instructions
    # ENTRYPOINT and CMD: tests/unit/neuron/test_container_contract.py
    kinds = [ins for ins, _ in instructions]
    # Dependencies are installed before the code is copied, so code edits reuse the dependency layer.
    assert kinds.index("RUN") < max(i for i, k in enumerate(kinds) if k == "COPY")


def test_real_context_is_the_dockerfile_requirements_and_trainer_only(tmp_path: Path) -> None:
    context = BuildContext.load(REPO, "docker/Dockerfile")
    paths = {e.path for e in context.entries}
    assert {"docker/Dockerfile", "docker/requirements.txt", "trainium_trainer/__init__.py"} <= paths
    assert all(p.startswith(("docker/", "trainium_trainer")) for p in paths)
    assert not any("__pycache__" in p or p.endswith(".pyc") for p in paths)
    # Bytecode next to the sources (as a test run leaves it) never changes the tag.
    pycache = REPO / "trainium_trainer" / "__pycache__"
    created = not pycache.exists()
    pycache.mkdir(exist_ok=True)
    probe = pycache / "image_test_probe.cpython-311.pyc"
    try:
        probe.write_bytes(b"\0")
        assert BuildContext.load(REPO, "docker/Dockerfile").tag() == context.tag()
    finally:
        probe.unlink()
        if created:
            pycache.rmdir()
