"""One broken thing at a time: its check is the error (naming the cause), the exit status is 1, and a
check that only warns does not fail the command."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.neuron.releases import table, version_key
from tests.integration.preflight.conftest import ACCOUNT, REPOSITORY
from tests.integration.preflight.helpers import BATCH, ECS, preflight

ABSENT_DIGEST = "sha256:" + "0" * 64


def failed(capsys, monkeypatch, extra, *args: str) -> dict[str, dict[str, str]]:
    code, results = preflight(capsys, monkeypatch, extra, *args)
    assert code == 1, results
    return results


def outside(oldest: str, newest: str | None) -> str:
    """A driver version the range does not admit, built from the table's own bounds."""
    if newest:
        *head, last = version_key(newest)
        return ".".join(map(str, [*head, last + 1]))
    *head, last = version_key(oldest)
    return ".".join(map(str, [*head, last - 1] if last else [*head[:-1], head[-1] - 1]))


def test_layout_the_instance_type_cannot_hold(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(), "--instance-type", "trn1.2xlarge", "--nodes", "2")
    assert results["layout"]["status"] == "error" and "trn1.2xlarge" in results["layout"]["reason"]


def test_compute_ecs_for_two_nodes(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(), *BATCH, "--compute", "ecs")
    assert results["compute"]["status"] == "error" and "use batch" in results["compute"]["reason"]


def test_connection_without_the_job_role(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(job_role_arn=None, batch_job_queues={}))
    assert results["connection"]["status"] == "error"
    assert "job_role_arn" in results["connection"]["reason"]
    assert "batch_job_queues[trn1.32xlarge]" in results["connection"]["reason"]
    assert results["batch queue"]["status"] == "warning"  # not checked: the connection already says why


def test_stack_outputs_missing_only_warn(capsys, monkeypatch, deployment):
    code, results = preflight(capsys, monkeypatch, deployment.extra(neuron_driver_version=None))
    assert code == 0
    assert results["stack outputs"]["status"] == "warning" and "not checked" in results["stack outputs"]["reason"]
    assert results["neuron driver"]["status"] == "warning"


def test_artifact_bucket_that_does_not_exist(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(artifact_root="s3://no-such-bucket/runs"))
    assert results["artifact bucket"] == {
        "name": "artifact bucket",
        "status": "error",
        "reason": "bucket no-such-bucket of s3://no-such-bucket/runs not found",
    }


def test_ecs_cluster_missing(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(ecs_cluster="gone"), *ECS)
    assert results["ecs cluster"]["status"] == "error" and "gone is MISSING" in results["ecs cluster"]["reason"]


def test_ecs_cluster_without_capacity_warns(capsys, monkeypatch, deployment):
    code, results = preflight(
        capsys, monkeypatch, deployment.extra(ecs_cluster="empty", ecs_capacity_provider=None), *ECS
    )
    assert code == 0
    assert (
        results["ecs cluster"]["status"] == "warning" and "no container instances" in results["ecs cluster"]["reason"]
    )


def test_batch_queue_disabled(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(batch_job_queues={"trn1.32xlarge": "trn-disabled"}))
    assert results["batch queue"]["status"] == "error" and "DISABLED" in results["batch queue"]["reason"]


def test_compute_environment_on_spot_for_two_nodes(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(batch_job_queues={"trn1.32xlarge": "trn-spot"}))
    reason = results["compute environment"]["reason"]
    assert results["compute environment"]["status"] == "error" and "trn-spot is SPOT" in reason


def test_compute_environment_too_small(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(batch_job_queues={"trn1.32xlarge": "trn-small"}))
    reason = results["compute environment"]["reason"]
    assert results["compute environment"]["status"] == "error"
    assert "trn-small has maxvCpus 128, fewer than the 256 vCPUs of 2 x trn1.32xlarge" in reason


def test_efa_security_group_without_self_rules(capsys, monkeypatch, deployment):
    results = failed(capsys, monkeypatch, deployment.extra(security_groups=[deployment.open_group]))
    reason = results["efa security group"]["reason"]
    assert results["efa security group"]["status"] == "error"
    assert f"{deployment.open_group} allows no inbound from itself" in reason
    assert f"{deployment.open_group} allows no outbound to itself" in reason


def test_image_digest_not_in_the_repository(capsys, monkeypatch, deployment):
    absent = deployment.image.replace(deployment.digest, ABSENT_DIGEST)
    results = failed(capsys, monkeypatch, deployment.extra(), *BATCH, "--image", absent)
    assert results["image"]["status"] == "error"
    assert f"digest {ABSENT_DIGEST} not found in ECR repository {REPOSITORY}" in results["image"]["reason"]


def test_image_outside_the_configured_repository(capsys, monkeypatch, deployment):
    other = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/someone/else@{deployment.digest}"
    results = failed(capsys, monkeypatch, deployment.extra(), *BATCH, "--image", other)
    reason = results["image"]["reason"]
    assert results["image"]["status"] == "error" and "not in the configured repository" in reason
    assert "someone/else" in reason  # and ECR was asked too: that repository does not exist


def test_neuron_driver_outside_the_accepted_range(capsys, monkeypatch, deployment):
    release = table().image
    driver = outside(release.driver_oldest, release.driver_newest)
    results = failed(capsys, monkeypatch, deployment.extra(neuron_driver_version=driver))
    reason = results["neuron driver"]["reason"]
    assert results["neuron driver"]["status"] == "error"
    assert f"driver {driver} rejects the image's Neuron runtime {release.runtime}" in reason


def test_instance_family_warns_on_a_release_aws_no_longer_supports_for_training(capsys, monkeypatch, deployment):
    """No release in the table refuses a catalog family, so the family error cannot be built here; the
    support warning can, from a DLC image of an unsupported release."""
    unsupported = [r for r in table().releases.values() if not r.supported_for_training]
    if not unsupported:
        pytest.skip("every release in releases.toml is supported for training")
    release = unsupported[0]
    results = failed(capsys, monkeypatch, deployment.extra(), *BATCH, "--image", release.dlc)
    assert results["instance family"] == {
        "name": "instance family",
        "status": "warning",
        "reason": f"Neuron {release.version} is {release.training_support} for training by AWS: {release.support_note}",
    }
    assert results["image"]["status"] == "error"  # a DLC by tag is not a trusted image
