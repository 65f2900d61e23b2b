"""Data prep: determinism per interval, packing boundaries, malformed records, empty input."""

import json

import numpy as np
import pytest

from tests.unit.trainium_trainer.llama.conftest import trained_tokenizer
from trainium_trainer.common.errors import BadInputError
from trainium_trainer.llama.corpus import synthetic_jsonl
from trainium_trainer.llama.data import load_blocks, pack, prepare, read_index, record_text
from trainium_trainer.llama.tokenizer import BOS, EOS, load_tokenizer


def files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tokenizer_uri(tmp_path_factory):
    return trained_tokenizer(tmp_path_factory.mktemp("tok"), records=300)


def test_same_interval_gives_identical_bytes_and_another_day_differs(tmp_path, tokenizer_uri):
    a = prepare(str(tmp_path / "a"), synthetic_date="2026-01-02", tokenizer_uri=tokenizer_uri)
    b = prepare(str(tmp_path / "b"), synthetic_date="2026-01-02", tokenizer_uri=tokenizer_uri)
    c = prepare(str(tmp_path / "c"), synthetic_date="2026-01-03", tokenizer_uri=tokenizer_uri)
    fa, fb = files(tmp_path / "a"), files(tmp_path / "b")
    assert fa.keys() == fb.keys() and all(fa[k] == fb[k] for k in fa if k != "index.json")
    assert a["train"] == b["train"] and a["input_sha256"] == b["input_sha256"]
    assert c["input_sha256"] != a["input_sha256"]
    mtime = (tmp_path / "a" / "train" / "shard-00000.npy").stat().st_mtime_ns
    prepare(str(tmp_path / "a"), synthetic_date="2026-01-02", tokenizer_uri=tokenizer_uri)  # rerun: kept as is
    assert (tmp_path / "a" / "train" / "shard-00000.npy").stat().st_mtime_ns == mtime


def test_tokenizer_training_is_deterministic(tmp_path):
    for name in ("x", "y"):
        prepare(str(tmp_path / name), synthetic_date="2026-02-01", tokenizer_uri=str(tmp_path / f"{name}.json"),
                train_new_tokenizer=True, synthetic_records=200)  # fmt: skip
    assert (tmp_path / "x.json").read_bytes() == (tmp_path / "y.json").read_bytes()


def test_packing_cuts_full_blocks_and_keeps_record_boundaries():
    blocks, dropped = pack([[5, 6, 7], [8], [9, 10, 11, 12]], block_size=4, bos=1, eos=2)
    stream = [1, 5, 6, 7, 2, 1, 8, 2, 1, 9, 10, 11, 12, 2]
    assert blocks.shape == (3, 4) and dropped == len(stream) - 12
    assert blocks.reshape(-1).tolist() == stream[:12]


def test_packed_shards_decode_back_to_the_records(tmp_path, tokenizer_uri):
    index = prepare(str(tmp_path / "d"), synthetic_date="2026-01-05", synthetic_records=50,
                    tokenizer_uri=tokenizer_uri, block_size=32, eval_every=4, blocks_per_shard=5)  # fmt: skip
    train, held = load_blocks(str(tmp_path / "d"), "train"), load_blocks(str(tmp_path / "d"), "eval")
    assert train.shape[1] == held.shape[1] == 32
    assert len(index["train"]) == -(-len(train) // 5)  # ceil: shards of at most 5 blocks
    assert index["tokens"] == (len(train) + len(held)) * 32 + index["dropped_tokens"]
    tok = load_tokenizer(tokenizer_uri)
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    first = train[0].tolist()
    assert first[0] == bos and eos in first
    text = tok.decode(first[1 : first.index(eos)])
    record = json.loads(synthetic_jsonl("2026-01-05", 1).decode())
    assert text == f"### Instruction:\n{record['instruction']}\n### Response:\n{record['response']}"


def test_malformed_records_are_counted_with_line_numbers_and_skipped(tmp_path, tokenizer_uri):
    good = synthetic_jsonl("2026-01-06", 30).splitlines()
    bad = [b"{not json", b"[1, 2]", b'{"instruction": "x"}', b"", b'{"text": 7}', b"\xff\xfe"]
    src = tmp_path / "in.jsonl"
    # line 1 good, 2-7 the bad ones (line 5 blank: ignored), then the rest of the good ones
    src.write_bytes(b"\n".join([good[0], *bad, *good[1:]]) + b"\n")
    index = prepare(str(tmp_path / "out"), input_uri=str(src), tokenizer_uri=tokenizer_uri)
    where = [m["where"] for m in index["malformed"]]
    assert where == ["in.jsonl:2", "in.jsonl:3", "in.jsonl:4", "in.jsonl:6", "in.jsonl:7"]
    assert index["malformed_count"] == 5 and index["records"] == 30
    assert "invalid JSON" in index["malformed"][0]["reason"] and "UTF-8" in index["malformed"][4]["reason"]


@pytest.mark.parametrize("content", [b"", b"\n\n", b"{oops\n"])
def test_empty_interval_is_a_clear_skip(tmp_path, tokenizer_uri, content):
    src = tmp_path / "day.jsonl"
    src.write_bytes(content)
    index = prepare(str(tmp_path / "out"), input_uri=str(src), tokenizer_uri=tokenizer_uri)
    assert index["skipped"] is True and "no usable records" in index["reason"]
    assert not (tmp_path / "out" / "train").exists()
    with pytest.raises(BadInputError, match="empty"):
        read_index(str(tmp_path / "out"))


def test_missing_input_is_also_an_empty_interval(tmp_path, tokenizer_uri):
    index = prepare(str(tmp_path / "out"), input_uri=str(tmp_path / "absent.jsonl"), tokenizer_uri=tokenizer_uri)
    assert index["skipped"] is True and index["input_files"] == []


def test_blocks_are_int64_token_ids_below_the_vocabulary(tmp_path, tokenizer_uri):
    index = prepare(str(tmp_path / "v"), synthetic_date="2026-01-07", tokenizer_uri=tokenizer_uri)
    blocks = load_blocks(str(tmp_path / "v"))
    assert blocks.dtype == np.int64 and blocks.max() < index["vocab_size"]


def test_a_holdout_set_is_recorded_alike_by_every_run_and_put_back_when_swapped(tmp_path, tokenizer_uri, monkeypatch):
    from trainium_trainer import boundary
    from trainium_trainer.common.holdout import read_holdout, seal_uri

    out = str(tmp_path / "holdout")
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, "aa" * 32)
    prepare(out, synthetic_date="2025-12-31", synthetic_records=60, tokenizer_uri=tokenizer_uri, holdout_manifest=True)
    first = (tmp_path / "holdout" / boundary.HOLDOUT_MANIFEST_FILE).read_bytes()
    manifest = json.loads(first)
    assert {"index.json", "tokenizer.json", "raw/corpus.jsonl", "eval/shard-00000.npy"} <= set(manifest["files"])
    files, fingerprint = read_holdout(out)
    assert len(load_blocks(out, "eval", files)) == len(load_blocks(out, "eval")) > 0
    shard = tmp_path / "holdout" / "eval" / "shard-00000.npy"
    shard.write_bytes(b"easy")  # swapped before the next run's data job
    mtime = (tmp_path / "holdout" / "train" / "shard-00000.npy").stat().st_mtime_ns
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, "bb" * 32)  # another run (a backfill): another job, its own key
    prepare(out, synthetic_date="2025-12-31", synthetic_records=60, tokenizer_uri=tokenizer_uri, holdout_manifest=True)
    assert (tmp_path / "holdout" / boundary.HOLDOUT_MANIFEST_FILE).read_bytes() == first  # the same record
    assert read_holdout(out)[1] == fingerprint  # the swapped shard is put back, the others left as they were
    assert (tmp_path / "holdout" / "train" / "shard-00000.npy").stat().st_mtime_ns == mtime
    for key in ("aa" * 32, "bb" * 32):  # each run's data job sealed the same record with its own key
        sealed = json.loads((tmp_path / "holdout" / seal_uri("", key).lstrip("/")).read_text())
        assert boundary.record_fingerprint(sealed) == fingerprint
        assert sealed[boundary.SEAL_FIELD] == boundary.seal(sealed, key)
    assert not (tmp_path / "plain" / boundary.HOLDOUT_MANIFEST_FILE).exists()
    prepare(str(tmp_path / "plain"), synthetic_date="2025-12-31", synthetic_records=60, tokenizer_uri=tokenizer_uri)
    assert not (tmp_path / "plain" / boundary.HOLDOUT_MANIFEST_FILE).exists()  # a training set has none


@pytest.mark.parametrize("field", ["instruction", "response"])
def test_a_null_instruction_or_response_is_a_malformed_record_not_a_crash(field):
    record = {"instruction": "say hi", "response": "hi", field: None}
    with pytest.raises(ValueError, match="must not be empty"):
        record_text(record)
