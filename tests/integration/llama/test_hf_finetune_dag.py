"""``trainium_llama_finetune`` from a sharded Hugging Face directory on S3, end to end on local compute (2 ranks,
eager): data prep with the base's tokenizer, fine-tune, evaluation against the base, registration with the
base's content hash; the registered version loads with ``from_pretrained``. Reading a sharded directory from a
``file://`` URI is tests/integration/llama/test_hf_checkpoint.py's; a fine-tune from a local base is
tests/integration/llama/test_dags.py's."""

from __future__ import annotations

import pytest

from tests.hf_fixtures import save_tiny_llama
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint


@pytest.mark.slow
def test_finetune_dag_starts_from_a_sharded_hugging_face_directory_on_s3(tmp_path, monkeypatch, aws_conn_id):
    """The base on S3 (a moto server, reached through the trainium connection's AWS connection)."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from airflow_provider_trainium.registry import ModelRegistry
    from tests.conftest import set_trainium_connection
    from tests.integration.llama.test_dags import DAGS, states
    from trainium_trainer.common.uri import local_path

    root = tmp_path / "artifacts"
    base = tmp_path / "base"
    save_tiny_llama(base)
    assert len(list(base.glob("model-*.safetensors"))) > 2
    s3 = S3Hook(aws_conn_id=aws_conn_id)
    s3.create_bucket("base-models")
    for path in base.iterdir():
        s3.load_file(str(path), f"tiny/{path.name}", "base-models")
    set_trainium_connection(monkeypatch, artifact_root=root.as_uri(), aws_conn_id=aws_conn_id,
                            allowed_input_prefixes=["s3://base-models/"])  # fmt: skip
    dag = DagBag(dag_folder=str(DAGS)).get_dag("trainium_llama_finetune")
    conf = {"compute": "local", "runtime": "eager", "max_steps": 6, "log_every": 3, "checkpoint_every": 0,
            "base_model": "s3://base-models/tiny"}  # fmt: skip
    run = dag.test(run_conf=conf)
    assert str(run.state) == "success", states(run.dag_id, run.run_id)

    version = ModelRegistry(root.as_uri()).get_version("llama-finetune", 1)
    assert version.manifest["base_model"]["ref"] == "s3://base-models/tiny"
    # the same files, so the same content hash as the local copy they were uploaded from
    fingerprint = version.manifest["metrics"]["base_model"]["fingerprint"]
    assert fingerprint == HFCheckpoint(base.as_uri()).fingerprint()["fingerprint"]
    assert version.metrics["world_size"] == 2
    files = local_path(version.uri)
    model = AutoModelForCausalLM.from_pretrained(files)
    tokenizer = AutoTokenizer.from_pretrained(files)
    assert model.config.vocab_size >= len(tokenizer)
