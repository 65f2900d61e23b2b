"""The real docker/native/Dockerfile, built with buildah over a stand-in base, runs what ECS and Batch would send.

The same build and run as test_real_image.py (the helpers are in conftest.py): a Debian stand-in with python3 as
``BASE_IMAGE``, ``INSTALL_NEURON_PACKAGES=0`` and ``INSTALL_PYPI_PACKAGES=0`` switch off the system, torch, Neuron
and PyPI layers, and every other instruction runs as written: the venv the launcher runs in, the code layer, the
labels, the ENTRYPOINT. The jobs are native-stack jobs on trn2.48xlarge, the family the stack trains on.

What the stand-in cannot show: TorchNeuron, the Neuron runtime, EFA and the `neuron` device, which exist only in
the real build on a Trainium host (docs/image.md, "Native image").
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_provider_trainium.neuron.releases import RUNTIME_LABEL, SDK_LABEL, image_stack, table
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.image.conftest import (
    Image,
    LocalRegistry,
    assert_batch_rendezvous,
    batch_node_run,
    ecs_task_run,
    flags_of,
    run_container,
    stand_in_build,
)

pytestmark = pytest.mark.slow

IMAGE_TAG = "localhost/trainium-trainer-native:contract-test"
MAIN_ADDRESS = "10.0.3.9"
VENV_PYTHON = "/opt/venv/bin/python"


@pytest.fixture(scope="module")
def native_image(tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry) -> Iterator[Image]:
    dockerfile, repository = "docker/native/Dockerfile", "trainium/trainer-native"
    with stand_in_build(tmp_path_factory, local_registry, dockerfile, repository) as image:
        yield image


def spec(nodes: int) -> JobSpec:
    return JobSpec(name="t", entry_point="trainium_trainer.llama.train", args=("--preset", "tiny"),
                   instance_type="trn2.48xlarge", nodes=nodes, output_uri="s3://b/runs/t", image=IMAGE_TAG,
                   stack="native").validate()  # fmt: skip


def test_the_image_config_is_the_contract_and_the_venv_runs_it(native_image: Image) -> None:
    config = native_image.config
    assert config["Entrypoint"] == ["python", "-m", "trainium_trainer.launch"]
    assert not config.get("Cmd")
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PYTHONPATH"] == "/opt/trainium" and env["PATH"].startswith("/opt/venv/bin:")
    assert config["WorkingDir"] == "/opt/trainium"
    done = native_image.buildah("run", "--isolation", "chroot", native_image.container, "--", "python", "-c",
                                "import sys, trainium_trainer.launch; print(sys.prefix)")  # fmt: skip
    assert done.stdout.strip() == "/opt/venv"


def test_the_provider_sees_the_built_image_as_native(native_image: Image) -> None:
    """What the registry holds: the labels name the native image release's runtime, which the table maps to native."""
    labels = native_image.registry.labels(native_image.result.tag) or {}
    release = table().image_for("native")
    assert (labels[RUNTIME_LABEL], labels[SDK_LABEL]) == (release.runtime, release.version)
    assert image_stack(native_image.result.reference, labels) == "native"
    assert labels["org.opencontainers.image.base.name"] == native_image.base


def test_an_ecs_task_runs_torchrun_on_one_trn2_node(native_image: Image) -> None:
    command, env = ecs_task_run(spec(1))
    assert env["TRAINIUM_STACK"] == "native"
    torchrun = run_container(native_image, command, env)
    assert torchrun[0] == VENV_PYTHON and torchrun[1:3] == ["-m", "trainium_trainer.loopback_torchrun"]
    f = flags_of(torchrun)
    assert (f["nnodes"], f["node_rank"], f["nproc_per_node"]) == ("1", "0", "64")
    assert torchrun[-4:] == ["--module", "trainium_trainer.llama.train", "--preset", "tiny"]


@pytest.mark.parametrize("node", [0, 1])
def test_each_node_of_a_batch_job_runs_torchrun_with_batchs_rendezvous(native_image: Image, node: int) -> None:
    command, env = batch_node_run(spec(2), node, MAIN_ADDRESS)
    assert env["TRAINIUM_STACK"] == "native"
    torchrun = run_container(native_image, command, env)
    assert torchrun[0] == VENV_PYTHON and torchrun[1:3] == ["-m", "torch.distributed.run"]
    f = flags_of(torchrun)
    assert (f["nnodes"], f["node_rank"], f["nproc_per_node"], f["master_port"]) == ("2", str(node), "64", "41000")
    assert_batch_rendezvous(f, node, MAIN_ADDRESS)
    assert torchrun[-4:] == ["--module", "trainium_trainer.llama.train", "--preset", "tiny"]
