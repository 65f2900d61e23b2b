"""Credentials for child processes that reach S3 themselves (local compute with an ``s3://`` root)."""

from __future__ import annotations


def aws_process_environment(aws_conn_id: str | None) -> dict[str, str]:
    """AWS_* variables taken from an Airflow AWS connection, endpoint_url included (moto, VPC endpoints)."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    hook = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="sts")
    env: dict[str, str] = {}
    credentials = hook.get_credentials()
    if credentials.access_key:
        env["AWS_ACCESS_KEY_ID"] = credentials.access_key
        env["AWS_SECRET_ACCESS_KEY"] = credentials.secret_key
        if credentials.token:
            env["AWS_SESSION_TOKEN"] = credentials.token
    if hook.region_name:
        env["AWS_DEFAULT_REGION"] = env["AWS_REGION"] = hook.region_name
    endpoint = hook.conn_config.endpoint_url
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env
