"""Hugging Face checkpoints in: a tiny Llama saved by ``save_pretrained`` in several shards is read shard by
shard, each tensor once per process, from ``file://`` and from S3 (a moto server); what the trainer cannot
represent is refused with BAD INPUT."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from tests.hf_fixtures import ReadSpy, save_tiny_llama
from trainium_trainer.common.errors import BadInputError
from trainium_trainer.llama.hf_checkpoint import INDEX, HFCheckpoint
from trainium_trainer.llama.model import base_model, build_config


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf-llama")
    weights = save_tiny_llama(folder)
    return folder, weights


def test_sharded_directory_is_read_once_per_tensor_and_fills_the_model(hf_dir, monkeypatch):
    folder, saved = hf_dir
    shards = sorted(p.name for p in folder.glob("*.safetensors"))
    assert len(shards) >= 3, shards
    spy = ReadSpy().install(monkeypatch)
    checkpoint = HFCheckpoint(folder.as_uri())
    config = build_config("tiny", 400, checkpoint)
    model = base_model(config, seed=0, checkpoint=checkpoint)

    weight_map = json.loads((folder / INDEX).read_text())["weight_map"]
    assert spy.opened == dict.fromkeys(shards, 1)  # each shard file opened once
    assert spy.tensors == dict.fromkeys(weight_map, 1)  # each tensor read once
    state = model.state_dict()
    for name, tensor in saved.items():
        torch.testing.assert_close(state[name], tensor, rtol=0, atol=0)


def test_s3_directory_reads_like_a_local_one_and_is_downloaded_once_per_node(hf_dir, aws_conn_id, monkeypatch,
                                                                           tmp_path):  # fmt: skip
    """The trainer reaches S3 through the AWS_* environment local compute gives it (endpoint included)."""
    import boto3

    from tests.conftest import MOTO_REGION

    folder, saved = hf_dir
    endpoint = json.loads(__import__("os").environ["AIRFLOW_CONN_AWS_MOTO"])["extra"]["endpoint_url"]
    for key, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": MOTO_REGION}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=MOTO_REGION)
    s3.create_bucket(Bucket="base-models")
    for path in folder.iterdir():
        s3.upload_file(str(path), "base-models", f"tiny/{path.name}")
    import fsspec

    fsspec.filesystem("s3").clear_instance_cache()  # a fresh client that sees this test's environment

    spy = ReadSpy().install(monkeypatch)
    cache = tmp_path / "cache"
    checkpoint = HFCheckpoint("s3://base-models/tiny", cache_dir=str(cache))
    model = base_model(build_config("tiny", 400, checkpoint), seed=0, checkpoint=checkpoint)
    for name, tensor in saved.items():
        torch.testing.assert_close(model.state_dict()[name], tensor, rtol=0, atol=0)
    assert set(spy.tensors.values()) == {1}
    cached = sorted(p.name for p in cache.rglob("*.safetensors"))
    assert cached == sorted(p.name for p in folder.glob("*.safetensors"))
    stamps = {p: p.stat().st_mtime_ns for p in cache.rglob("*.safetensors")}
    HFCheckpoint("s3://base-models/tiny", cache_dir=str(cache)).fingerprint()  # another rank: no new download
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*.safetensors")} == stamps

    local = HFCheckpoint(folder.as_uri()).fingerprint()
    assert checkpoint.fingerprint()["fingerprint"] == local["fingerprint"]


def test_fingerprint_is_the_registry_fingerprint_of_the_same_files(hf_dir):
    from airflow.sdk import ObjectStoragePath

    from airflow_provider_trainium.registry.hashing import fingerprint, hash_tree

    folder, _ = hf_dir
    found = HFCheckpoint(folder.as_uri()).fingerprint()
    assert found["fingerprint"] == fingerprint(hash_tree(ObjectStoragePath(folder.as_uri())))
    assert found["files"] == len(list(folder.iterdir()))


def copy_with_config(src, dst, **changes):
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config.update(changes)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_type": "mistral", "architectures": ["MistralForCausalLM"]}, "model_type 'mistral' is not supported"),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope scaling 'dynamic' is not supported"),
        ({"mlp_bias": True}, "mlp_bias=true is not supported"),
        ({"quantization_config": {"quant_method": "bitsandbytes"}}, "quantized checkpoints"),
        ({"vocab_size": 100}, "vocabulary \\(100\\) is smaller"),
    ],
)
def test_unsupported_checkpoints_are_refused_clearly(hf_dir, tmp_path, changes, message):
    folder, _ = hf_dir
    bad = copy_with_config(folder, tmp_path / "bad", **changes)
    with pytest.raises(BadInputError, match=message):
        build_config("tiny", 400, HFCheckpoint(bad.as_uri()))


def test_incomplete_directories_are_refused_before_any_tensor_is_read(hf_dir, tmp_path):
    folder, _ = hf_dir
    config = build_config("tiny", 400, HFCheckpoint(folder.as_uri()))
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    next(broken.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(BadInputError, match="shards listed in model.safetensors.index.json are missing"):
        base_model(config, 0, HFCheckpoint(broken.as_uri()))
    (broken / INDEX).unlink()
    with pytest.raises(BadInputError, match="neither model.safetensors.index.json nor model.safetensors"):
        base_model(config, 0, HFCheckpoint(broken.as_uri()))
    with pytest.raises(BadInputError, match="has no config.json"):
        HFCheckpoint((tmp_path / "nothing").as_uri()).config()
    other = build_config("tiny", 400, HFCheckpoint(folder.as_uri()))
    other.num_hidden_layers = 3
    with pytest.raises(BadInputError, match="missing \\['model.layers.2"):
        base_model(other, 0, HFCheckpoint(folder.as_uri()))


def test_tied_embeddings_load_without_an_lm_head_tensor(tmp_path):
    saved = save_tiny_llama(tmp_path, tie_word_embeddings=True)
    checkpoint = HFCheckpoint(tmp_path.as_uri())
    assert "lm_head.weight" not in checkpoint.weight_map
    model = base_model(build_config("tiny", 400, checkpoint), 0, checkpoint)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    torch.testing.assert_close(model.lm_head.weight, saved["model.embed_tokens.weight"], rtol=0, atol=0)


def test_a_single_model_safetensors_is_listed_from_its_header_and_read_once(hf_dir, tmp_path, monkeypatch):
    from trainium_trainer.llama.hf_export import save_model

    folder, saved = hf_dir
    config = build_config("tiny", 400, HFCheckpoint(folder.as_uri()))
    save_model(saved, config, str(tmp_path))  # a plain path works as well as a URI
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    spy = ReadSpy().install(monkeypatch)
    checkpoint = HFCheckpoint(str(tmp_path))
    assert set(checkpoint.weight_map) == set(saved) and spy.opened == {}  # the header alone, not safetensors
    model = base_model(build_config("tiny", 400, checkpoint), 0, checkpoint)
    assert spy.opened == {"model.safetensors": 1} and set(spy.tensors.values()) == {1}
    torch.testing.assert_close(model.state_dict()["lm_head.weight"], saved["lm_head.weight"], rtol=0, atol=0)
