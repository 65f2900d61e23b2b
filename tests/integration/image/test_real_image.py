"""The real docker/Dockerfile, built with buildah over a stand-in base, runs what ECS and Batch would send.

The base is a Debian root file system made here with debootstrap (python3 only), imported into buildah as
``BASE_IMAGE``; ``INSTALL_NEURON_PACKAGES=0`` and ``INSTALL_PYPI_PACKAGES=0`` switch off the two pip layers
(the Neuron packages, and the PyPI pins the launcher does not need; the stand-in has no pip). Every other
instruction of the Dockerfile runs as written. The container is then started the way ECS and Batch start
it: the image config's Entrypoint with the request's command appended (Docker's rule), the image's Env, the
definition's environment and the request's overrides, plus the AWS_BATCH_JOB_* variables on Batch nodes;
the launcher runs in dry-run mode and prints the torchrun command it would exec.

The build goes through the project's own pipeline (``ensure_image`` with the buildah builder) into the local
registry, with the stand-in pushed there first as the base, so the base-digest label is checked on a real pull.

The root file system is cached (``TRAINIUM_TEST_BASE_CACHE``, default /var/cache/trainium-test-base), so
only the first run on a machine pays for debootstrap (about 3.5 minutes); later runs take about 30 s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_provider_trainium.image.builders.base import BASE_DIGEST_LABEL
from airflow_provider_trainium.image.builders.buildah import BuildahBuilder
from airflow_provider_trainium.image.ensure import ensure_image
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

IMAGE_TAG = "localhost/trainium-trainer:contract-test"
MAIN_ADDRESS = "10.0.3.7"


@pytest.fixture(scope="module")
def built_image(tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry) -> Iterator[Image]:
    """The real Dockerfile built over the stand-in base, its config, and a working container of it."""
    with stand_in_build(tmp_path_factory, local_registry, "docker/Dockerfile", "trainium/trainer") as image:
        yield image


def spec(nodes: int) -> JobSpec:
    return JobSpec(name="t", entry_point="trainium_trainer.mnist_mlp.train", args=("--epochs", "1"),
                   instance_type="trn1.32xlarge", nodes=nodes, output_uri="s3://b/runs/t", image=IMAGE_TAG)  # fmt: skip


def test_the_image_config_is_the_contract(built_image: Image) -> None:
    config = built_image.config
    assert config["Entrypoint"] == ["python", "-m", "trainium_trainer.launch"]
    assert not config.get("Cmd")
    assert "PYTHONPATH=/opt/trainium" in config["Env"]


def test_the_image_records_the_digest_of_the_base_it_was_built_from(
    built_image: Image, local_registry: LocalRegistry
) -> None:
    import requests

    name, _, tag = built_image.base.partition("/")[2].rpartition(":")
    accept = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
    head = requests.head(f"http://{local_registry.host}/v2/{name}/manifests/{tag}", headers={"Accept": accept},
                         timeout=10)  # fmt: skip
    assert head.status_code == 200, head.status_code
    base_digest = head.headers["Docker-Content-Digest"]
    # Built here or by an earlier module on this worker (same context, same tag): either way the digest is the base's.
    assert built_image.result.base_digest == base_digest
    # What the registry holds under the image's tag carries both base labels.
    labels = built_image.registry.labels(built_image.result.tag) or {}
    assert labels[BASE_DIGEST_LABEL] == base_digest
    assert labels["org.opencontainers.image.base.name"] == built_image.base
    # Found, not built, the image still says which base it came from: read back from its config.
    again = ensure_image(built_image.context, built_image.registry, BuildahBuilder(storage_driver=None))
    assert not again.built and (again.digest, again.base_digest) == (built_image.result.digest, base_digest)


def test_an_ecs_task_runs_torchrun_on_one_node(built_image: Image) -> None:
    command, env = ecs_task_run(spec(1))
    torchrun = run_container(built_image, command, env)
    assert torchrun[0].endswith("python") and torchrun[1:3] == ["-m", "trainium_trainer.loopback_torchrun"]
    f = flags_of(torchrun)
    assert (f["nnodes"], f["node_rank"], f["nproc_per_node"]) == ("1", "0", "32")
    assert (f["master_addr"], f["master_port"]) == ("127.0.0.1", "41000")
    assert torchrun[-4:] == ["--module", "trainium_trainer.mnist_mlp.train", "--epochs", "1"]


@pytest.mark.parametrize("node", [0, 1])
def test_each_node_of_a_batch_job_runs_torchrun_with_batchs_rendezvous(built_image: Image, node: int) -> None:
    command, env = batch_node_run(spec(2), node, MAIN_ADDRESS)
    torchrun = run_container(built_image, command, env)
    assert torchrun[1:3] == ["-m", "torch.distributed.run"]
    f = flags_of(torchrun)
    assert (f["nnodes"], f["node_rank"], f["nproc_per_node"], f["master_port"]) == ("2", str(node), "32", "41000")
    assert_batch_rendezvous(f, node, MAIN_ADDRESS)
    assert torchrun[-4:] == ["--module", "trainium_trainer.mnist_mlp.train", "--epochs", "1"]
