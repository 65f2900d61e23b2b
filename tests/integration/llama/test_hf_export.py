"""Hugging Face checkpoints out: a fine-tune from a sharded directory writes shards + index that
``AutoModelForCausalLM`` / ``AutoTokenizer`` load, with the trainer's logits, and records its base's lineage."""

from __future__ import annotations

import json

import pytest
import torch

from tests.hf_fixtures import ReadSpy, save_tiny_llama
from trainium_trainer.llama.data import prepare
from trainium_trainer.llama.hf_checkpoint import INDEX, WEIGHTS, HFCheckpoint
from trainium_trainer.llama.hf_export import ShardWriter, save_model, shard_file_names, shard_plan, write_tokenizer
from trainium_trainer.llama.model import base_model, build_config
from trainium_trainer.llama.train import main, parse_args, train

#: transformers' default (sdpa) attention against the trainer's eager attention, both fp32, on the same
#: weights: the sums run in a different order, so they agree to float32 rounding over 2 layers, not bit for bit.
LOGITS_ATOL = 1e-4
SHARD_BYTES = 60_000  # ~0.9 MB of fp32 weights: a dozen output shards


def test_shard_plan_splits_like_save_pretrained():
    sizes = [("a", 40), ("b", 40), ("c", 30), ("d", 200), ("e", 10)]
    assert shard_plan(sizes, 100) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert shard_plan(sizes, 10_000) == [["a", "b", "c", "d", "e"]]
    assert shard_file_names(1) == [WEIGHTS]
    assert shard_file_names(3)[1] == "model-00002-of-00003.safetensors"


def test_writer_takes_tensors_in_any_order_and_writes_each_shard_when_complete(tmp_path):
    tensors = {f"t{i}": torch.full((25,), float(i)) for i in range(5)}  # 100 bytes each
    writer = ShardWriter(tmp_path.as_uri(), [(n, 100) for n in tensors], max_shard_bytes=250)
    written = lambda: sorted(p.name for p in tmp_path.iterdir())  # noqa: E731
    writer.add("t4", tensors["t4"])
    assert written() == ["model-00003-of-00003.safetensors"]  # its shard is complete
    writer.add("t1", tensors["t1"])
    assert written() == ["model-00003-of-00003.safetensors"] and set(writer.buffers[0]) == {"t1"}
    writer.add("t0", tensors["t0"])
    assert "model-00001-of-00003.safetensors" in written() and writer.buffers[0] == {}
    for name in ("t3", "t2"):
        writer.add(name, tensors[name])
    assert writer.finish() == shard_file_names(3)
    index = json.loads((tmp_path / INDEX).read_text())
    assert index["metadata"]["total_size"] == 500
    assert index["weight_map"]["t3"] == "model-00002-of-00003.safetensors"
    with pytest.raises(RuntimeError, match="never written"):
        ShardWriter(tmp_path.as_uri(), [("x", 4)]).finish()


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-finetune")
    base = root / "base"
    save_tiny_llama(base)
    data = root / "data"
    prepare(str(data), synthetic_date="2026-01-01", tokenizer_uri=str(base / "tokenizer.json"))
    out = root / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAINIUM_RUNTIME", "eager")
        spy = ReadSpy().install(mp)
        summary = train(parse_args(["--data-uri", str(data), "--output-uri", out.as_uri(), "--base-model-uri",
                                    base.as_uri(), "--max-steps", "4", "--log-every", "2", "--batch-size", "4",
                                    "--max-shard-bytes", str(SHARD_BYTES)]))  # fmt: skip
    return base, data, out, summary, spy


def test_the_trainer_reads_each_base_tensor_once(finetuned):
    base, *_, spy = finetuned
    weight_map = json.loads((base / INDEX).read_text())["weight_map"]
    assert spy.tensors == dict.fromkeys(weight_map, 1)
    assert spy.opened == dict.fromkeys(set(weight_map.values()), 1)


def test_finetune_output_is_sharded_and_loads_with_from_pretrained_with_the_trainers_logits(finetuned):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base, _, out, *_ = finetuned
    shards = sorted(p.name for p in out.glob("model-*.safetensors"))
    assert len(shards) > 2 and not (out / WEIGHTS).exists()
    assert sorted(set(json.loads((out / INDEX).read_text())["weight_map"].values())) == shards

    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    batch = tokenizer(["### Instruction:\nname a colour\n### Response:\nblue", "the cat sat"], return_tensors="pt",
                      padding=True)  # fmt: skip
    assert batch["input_ids"].shape[0] == 2 and batch["input_ids"].max() < hf.config.vocab_size
    checkpoint = HFCheckpoint(out.as_uri())
    ours = base_model(build_config("tiny", hf.config.vocab_size, checkpoint), 0, checkpoint).eval()
    with torch.no_grad():
        expected = ours(**batch).logits
        got = hf(**batch).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=LOGITS_ATOL)
    base_state = HFCheckpoint(base.as_uri())
    start = base_model(build_config("tiny", hf.config.vocab_size, base_state), 0, base_state)
    assert not torch.equal(start.model.layers[0].mlp.up_proj.weight, ours.model.layers[0].mlp.up_proj.weight)


def test_the_trainers_model_saved_and_loaded_by_transformers_gives_the_same_logits(finetuned, tmp_path):
    """In memory, never reloaded by the trainer: what transformers rebuilds from our files is the same model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base, data, *_ = finetuned
    checkpoint = HFCheckpoint(base.as_uri())
    config = build_config("tiny", 400, checkpoint)
    model = base_model(config, 0, checkpoint).eval()
    with torch.no_grad():  # move away from the base so nothing could come from its files
        generator = torch.Generator().manual_seed(1)
        for param in model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=generator))
    out = tmp_path / "saved"
    files = save_model(model.state_dict(), config, out.as_uri(), max_shard_bytes=SHARD_BYTES)
    write_tokenizer(out.as_uri(), str(data), base.as_uri(), config.max_position_embeddings)
    assert len(files) > 2
    tokenizer = AutoTokenizer.from_pretrained(out)
    batch = tokenizer(["### Response:\nblue sky", "the cat sat on the mat"], return_tensors="pt", padding=True)
    hf = AutoModelForCausalLM.from_pretrained(out).eval()
    with torch.no_grad():
        torch.testing.assert_close(hf(**batch).logits, model(**batch).logits, rtol=0, atol=LOGITS_ATOL)


def test_registered_finetune_records_its_base_and_loads_from_the_registry(finetuned, tmp_path):
    from transformers import AutoModelForCausalLM

    from airflow_provider_trainium.registry import ModelRegistry
    from trainium_trainer.common.uri import local_path

    base, data, out, summary, _ = finetuned
    expected = HFCheckpoint(base.as_uri()).fingerprint()
    assert summary["base_model"] == expected
    assert json.loads((out / "lineage.json").read_text())["base_model"] == expected
    registry = ModelRegistry((tmp_path / "registry").as_uri())
    version = registry.register("tiny-ft", out.as_uri(), base_model=base.as_uri()).version
    assert version.manifest["metrics"]["base_model"] == expected  # the manifest carries the base's content hash
    model = AutoModelForCausalLM.from_pretrained(local_path(version.uri))
    assert model.config.num_hidden_layers == 2


def test_a_base_the_trainer_cannot_represent_exits_65_before_training(finetuned, tmp_path, capsys, monkeypatch):
    base, data, *_ = finetuned
    config = json.loads((base / "config.json").read_text())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({**config, "model_type": "gemma"}))
    monkeypatch.setenv("TRAINIUM_RUNTIME", "eager")
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-uri", str(data), "--output-uri", (tmp_path / "o").as_uri(), "--base-model-uri", str(bad),
              "--max-steps", "1"])  # fmt: skip
    assert exit_info.value.code == 65
    err = capsys.readouterr().err
    assert "BAD INPUT: base model" in err and "model_type 'gemma' is not supported" in err
    assert not (tmp_path / "o").exists()


def test_finetune_from_a_base_on_s3(finetuned, aws_conn_id, monkeypatch, tmp_path):
    """The trainer reaches the moto server through the AWS_* environment local compute passes to jobs."""
    import os

    import boto3
    import fsspec

    from tests.conftest import MOTO_REGION

    base, data, *_ = finetuned
    endpoint = json.loads(os.environ["AIRFLOW_CONN_AWS_MOTO"])["extra"]["endpoint_url"]
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": MOTO_REGION, "TRAINIUM_RUNTIME": "eager",
           "TRAINIUM_WEIGHTS_CACHE": str(tmp_path / "cache")}  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=MOTO_REGION)
    s3.create_bucket(Bucket="models")
    for path in base.iterdir():
        s3.upload_file(str(path), "models", f"base/{path.name}")
    fsspec.filesystem("s3").clear_instance_cache()
    out = tmp_path / "out"
    args = ["--data-uri", str(data), "--output-uri", out.as_uri(), "--base-model-uri", "s3://models/base",
            "--max-steps", "2", "--log-every", "1", "--batch-size", "4"]  # fmt: skip
    summary = train(parse_args(args))
    assert summary["base_model"]["uri"] == "s3://models/base"
    assert summary["base_model"]["fingerprint"] == HFCheckpoint(base.as_uri()).fingerprint()["fingerprint"]
    assert (out / WEIGHTS).exists() and (out / "tokenizer_config.json").exists()
