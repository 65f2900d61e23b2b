"""The evaluation reads a hold-out set with a manifest once, every file checked, and names the manifest's
fingerprint; a file swapped after the data job is refused by name; a set without a manifest is read as before."""

import pytest

from tests.unit.trainium_trainer.llama.conftest import trained_tokenizer
from trainium_trainer import boundary
from trainium_trainer.common.errors import BadInputError
from trainium_trainer.common.holdout import read_holdout
from trainium_trainer.llama.data import load_blocks, prepare
from trainium_trainer.llama.evaluate import holdout_blocks


@pytest.fixture(scope="module")
def tokenizer_uri(tmp_path_factory):
    return trained_tokenizer(tmp_path_factory.mktemp("tok"), records=200)


def test_a_sealed_set_is_judged_on_checked_bytes_and_named_by_its_fingerprint(tmp_path, tokenizer_uri):
    out = str(tmp_path / "holdout")
    prepare(out, synthetic_date="2025-12-31", synthetic_records=60, tokenizer_uri=tokenizer_uri, holdout_manifest=True)
    index, blocks, fingerprint = holdout_blocks(out)
    assert fingerprint == read_holdout(out)[1] and index["vocab_size"] > 0
    assert blocks.tolist() == load_blocks(out, "eval").tolist() and len(blocks) > 0
    (tmp_path / "holdout" / "eval" / "shard-00000.npy").write_bytes(b"easy")
    with pytest.raises(BadInputError, match="hold-out file eval/shard-00000.npy does not match its manifest"):
        holdout_blocks(out)


def test_a_set_without_a_manifest_is_read_as_before_and_named_by_none(tmp_path, tokenizer_uri):
    out = str(tmp_path / "plain")
    prepare(out, synthetic_date="2025-12-31", synthetic_records=60, tokenizer_uri=tokenizer_uri)
    assert not (tmp_path / "plain" / boundary.HOLDOUT_MANIFEST_FILE).exists()
    _, blocks, fingerprint = holdout_blocks(out)
    assert fingerprint is None and blocks.tolist() == load_blocks(out, "eval").tolist()
