"""``dags install`` copies exactly the shipped DAGs, idempotently, to a folder or an S3 prefix (moto)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3

from airflow_provider_trainium.cli import main
from airflow_provider_trainium.deployment_files import dags_folder
from tests.conftest import MOTO_REGION

SHIPPED = sorted(path.name for path in dags_folder().glob("*.py"))


def install(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["dags", "install", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_empty_folder_gets_every_shipped_dag_and_nothing_else(tmp_path, capsys):
    folder = tmp_path / "dags"
    code, out, _ = install(capsys, "--to", str(folder))
    assert code == 0
    assert sorted(p.name for p in folder.iterdir()) == SHIPPED and "trainium_mnist_mlp.py" in SHIPPED
    for name in SHIPPED:
        assert (folder / name).read_bytes() == (dags_folder() / name).read_bytes()
    assert out.count("copied ") == len(SHIPPED)


def test_a_rerun_copies_nothing_and_leaves_the_users_own_files(tmp_path, capsys):
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "my_dag.py").write_text("# the user's own\n")
    install(capsys, "--to", str(folder))
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    code, out, _ = install(capsys, "--to", str(folder))
    assert code == 0 and "copied" not in out and out.count("unchanged ") == len(SHIPPED)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_a_changed_file_is_refused_with_nothing_written_and_replaced_with_force(tmp_path, capsys):
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "trainium_mnist_mlp.py").write_text("# edited in place\n")
    code, _, err = install(capsys, "--to", str(folder))
    assert code == 1
    assert "trainium_mnist_mlp.py" in err and "--force" in err and "nothing was copied" in err
    assert [p.name for p in folder.iterdir()] == ["trainium_mnist_mlp.py"]
    assert (folder / "trainium_mnist_mlp.py").read_text() == "# edited in place\n"

    code, out, _ = install(capsys, "--to", str(folder), "--force")
    assert code == 0 and f"replaced file://{folder / 'trainium_mnist_mlp.py'}" in out
    assert (folder / "trainium_mnist_mlp.py").read_bytes() == (dags_folder() / "trainium_mnist_mlp.py").read_bytes()


def test_a_symlink_named_like_a_shipped_dag_is_refused_even_with_force(tmp_path, capsys):
    folder, outside = tmp_path / "dags", tmp_path / "outside.py"
    folder.mkdir()
    (folder / "trainium_mnist_mlp.py").symlink_to(outside)  # dangling: a write would create the file outside
    for args in ((), ("--force",)):
        code, _, err = install(capsys, "--to", str(folder), *args)
        assert code == 1 and "trainium_mnist_mlp.py" in err and "symbolic link" in err
    assert not outside.exists() and [p.name for p in folder.iterdir()] == ["trainium_mnist_mlp.py"]


def test_an_s3_prefix_gets_the_dags_through_the_aws_connection(aws_conn_id, moto_reset, capsys):
    s3 = boto3.client(
        "s3", endpoint_url=moto_reset, region_name=MOTO_REGION, aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )  # fmt: skip
    s3.create_bucket(Bucket="mwaa-env")
    code, out, err = install(capsys, "--to", "s3://mwaa-env/dags", "--aws-conn-id", aws_conn_id)
    assert code == 0, err
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="mwaa-env")["Contents"])
    assert keys == [f"dags/{name}" for name in SHIPPED]
    body = s3.get_object(Bucket="mwaa-env", Key="dags/trainium_mnist_mlp.py")["Body"].read()
    assert body == (dags_folder() / "trainium_mnist_mlp.py").read_bytes()
    code, out, _ = install(capsys, "--to", "s3://mwaa-env/dags", "--aws-conn-id", aws_conn_id)
    assert code == 0 and "copied" not in out


def test_airflows_own_cli_has_the_command(tmp_path):
    env = {**os.environ, "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"}
    airflow = Path(sys.executable).parent / "airflow"
    done = subprocess.run(
        [str(airflow), "trainium", "dags", "install", "--to", str(tmp_path / "dags"), "--dry-run"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("would copy ") == len(SHIPPED)
    assert not (tmp_path / "dags").exists()
