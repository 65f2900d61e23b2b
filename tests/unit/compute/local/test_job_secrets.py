"""Local compute reads a job's secret references itself, the way the ECS agent would."""

from __future__ import annotations

from airflow.providers.amazon.aws.hooks.secrets_manager import SecretsManagerHook

from airflow_provider_trainium.compute.local.job_secrets import read_reference

SM_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token-AbCdEf"


class FakeSecretsManager:
    """GetSecretValue: the previous version's value under AWSPREVIOUS, the current one otherwise."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []

    def get_secret_value(self, **request: str) -> dict[str, str]:
        self.calls.append(request)
        token = "old" if request.get("VersionStage") == "AWSPREVIOUS" else "new"
        return {"SecretString": f'{{"token": "{token}"}}'}


def test_a_version_stage_in_the_reference_is_the_version_read(monkeypatch):
    client = FakeSecretsManager()
    monkeypatch.setattr(SecretsManagerHook, "get_conn", lambda self: client)
    assert read_reference(f"{SM_ARN}:token:AWSPREVIOUS:", None) == "old"
    assert read_reference(f"{SM_ARN}:token::v-1", None) == "new"
    assert client.calls == [
        {"SecretId": SM_ARN, "VersionStage": "AWSPREVIOUS"},
        {"SecretId": SM_ARN, "VersionId": "v-1"},
    ]


def test_a_masked_value_is_hidden_by_cores_masker_too():
    """In-process runs (a DAG tested in this process, a worker with core) log through core's own masker."""
    from airflow._shared.secrets_masker import redact

    from airflow_provider_trainium.compute.local.job_secrets import mask

    mask("tr41n1um-s3cret-value")
    assert "tr41n1um-s3cret-value" not in str(redact("token=tr41n1um-s3cret-value"))
