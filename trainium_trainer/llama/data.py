"""Data prep: text or instruction JSONL -> tokens -> fixed-length blocks in shards, plus an index.

``python -m trainium_trainer.llama.data --output-uri URI [--input-uri URI | --synthetic-date YYYY-MM-DD] ...``

- Input: a ``.jsonl`` file (records ``{"text": ...}`` or ``{"instruction", "response"[, "input"]}``), a
  ``.txt`` file (one record per non-empty line) or a directory of them, read in name order. Without
  ``--input-uri`` the interval's synthetic corpus is generated first (``raw/corpus.jsonl``).
- Malformed records are counted, reported with file and line number, and skipped.
- Each record becomes ``<s> text </s>``; records are concatenated and cut into blocks of ``--block-size``
  tokens (the tail that does not fill a block is dropped and counted). Every ``--eval-every``-th block is
  held out for evaluation.
- Output: ``train/shard-NNNNN.npy``, ``eval/shard-NNNNN.npy``, ``tokenizer.json`` and ``index.json``,
  written last. An interval with no usable records writes an index with ``"skipped": true`` and no shards.
- Deterministic: the same input, tokenizer and settings give byte-identical files; an existing identical
  data set is kept as it is.
- ``--holdout-manifest`` (an evaluation hold-out set, which every run that judges against it shares): every file is
  written unless it already holds these very bytes (a file swapped before this job is put back) and the job records
  the size and sha256 of each in ``holdout-manifest.json``, with a copy sealed by its evidence key
  (``trainium_trainer.common.holdout``): the evaluation refuses a file swapped after this job.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit
from trainium_trainer.common import uri as uris
from trainium_trainer.common.errors import BadInputError, job_main
from trainium_trainer.common.holdout import write_manifest
from trainium_trainer.common.inputs import check_input
from trainium_trainer.llama.corpus import synthetic_jsonl
from trainium_trainer.llama.tokenizer import BOS, EOS, load_tokenizer, save_tokenizer, special_id, train_tokenizer

log = logging.getLogger("trainer")
FORMAT_VERSION = 1
MAX_REPORTED = 100


@dataclass
class ParsedInput:
    texts: list[str] = field(default_factory=list)
    malformed: list[dict[str, Any]] = field(default_factory=list)
    malformed_count: int = 0
    sha256: str = ""

    def reject(self, where: str, reason: str) -> None:
        self.malformed_count += 1
        if len(self.malformed) < MAX_REPORTED:
            self.malformed.append({"where": where, "reason": reason})
        if self.malformed_count <= 20:
            log.warning("malformed record at %s: %s (skipped)", where, reason)


def record_text(record: Any) -> str:
    """The training text of one JSON record; ``ValueError`` says why a record is unusable."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    if "text" in record:
        text = record["text"]
        if not isinstance(text, str) or not text.strip():
            raise ValueError("'text' must be a non-empty string")
        return text
    missing = [k for k in ("instruction", "response") if k not in record]
    if missing:
        raise ValueError(f"needs 'text' or 'instruction' and 'response'; missing {', '.join(missing)}")
    parts = {k: record.get(k) for k in ("instruction", "input", "response")}
    for key, value in parts.items():
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{key!r} must be a string, got {type(value).__name__}")
    if not (parts["instruction"] or "").strip() or not (parts["response"] or "").strip():
        raise ValueError("'instruction' and 'response' must not be empty")
    context = f"### Input:\n{parts['input']}\n" if parts.get("input") else ""
    return f"### Instruction:\n{parts['instruction']}\n{context}### Response:\n{parts['response']}"


def input_files(input_uri: str) -> list[str]:
    if not uris.exists(input_uri):
        return []
    fs, path = uris.filesystem(input_uri)
    if not fs.isdir(path):
        return [input_uri]
    names = [n for n in uris.list_names(input_uri) if n.endswith((".jsonl", ".txt"))]
    return [uris.join(input_uri, n) for n in names]


def parse_inputs(files: list[str]) -> ParsedInput:
    parsed = ParsedInput()
    digest = hashlib.sha256()
    for file_uri in files:
        data = uris.read_bytes(file_uri)
        digest.update(file_uri.rsplit("/", 1)[-1].encode() + b"\0" + data)
        name = file_uri.rsplit("/", 1)[-1]
        for number, raw in enumerate(data.split(b"\n"), start=1):
            where = f"{name}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                parsed.reject(where, f"not UTF-8 ({err.reason})")
                continue
            if not line.strip():
                continue
            if name.endswith(".txt"):
                parsed.texts.append(line.strip())
                continue
            try:
                parsed.texts.append(record_text(json.loads(line)))
            except json.JSONDecodeError as err:
                parsed.reject(where, f"invalid JSON: {err.msg} at column {err.colno}")
            except ValueError as err:
                parsed.reject(where, str(err))
    parsed.sha256 = digest.hexdigest()
    return parsed


def pack(token_lists: list[list[int]], block_size: int, bos: int, eos: int) -> tuple[npt.NDArray[Any], int]:
    """Concatenate ``<s> tokens </s>`` per record and cut into full blocks; returns blocks and dropped tokens."""
    stream: list[int] = []
    for ids in token_lists:
        stream.append(bos)
        stream.extend(ids)
        stream.append(eos)
    n_blocks = len(stream) // block_size
    blocks = np.asarray(stream[: n_blocks * block_size], dtype=np.int64).reshape(n_blocks, block_size)
    return blocks, len(stream) - n_blocks * block_size


def split_blocks(blocks: npt.NDArray[Any], eval_every: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Every ``eval_every``-th block (counting from the last) is held out; at least one block trains."""
    n = len(blocks)
    if n < 2 or eval_every <= 0:
        return blocks, blocks[:0]
    held = np.zeros(n, dtype=bool)
    held[n - 1 :: -eval_every] = True
    return blocks[~held], blocks[held]


def npy_bytes(array: npt.NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def shard_files(
    files: dict[str, bytes], split: str, blocks: npt.NDArray[Any], blocks_per_shard: int
) -> list[dict[str, Any]]:
    """The index entries of ``split``'s shards; their bytes go into ``files`` (name -> bytes)."""
    shards = []
    for i, start in enumerate(range(0, len(blocks), blocks_per_shard)):
        data = npy_bytes(blocks[start : start + blocks_per_shard])
        name = f"{split}/shard-{i:05d}.npy"
        files[name] = data
        shards.append(
            {
                "file": name,
                "blocks": int(min(blocks_per_shard, len(blocks) - start)),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    return shards


def resolve_tokenizer(tokenizer_uri: str | None, train_new: bool, texts: list[str], vocab_size: int) -> Any:
    if tokenizer_uri and uris.exists(
        tokenizer_uri if tokenizer_uri.endswith(".json") else uris.join(tokenizer_uri, "tokenizer.json")
    ):
        return load_tokenizer(tokenizer_uri)
    if not train_new:
        raise BadInputError(f"no tokenizer.json at {tokenizer_uri!r} (pass --train-tokenizer to train one)")
    if not texts:
        raise BadInputError("cannot train a tokenizer on an empty corpus")
    tokenizer = train_tokenizer(texts, vocab_size)
    if tokenizer_uri:
        save_tokenizer(tokenizer, tokenizer_uri)
    return tokenizer


def prepare(
    output_uri: str,
    input_uri: str | None = None,
    synthetic_date: str | None = None,
    synthetic_records: int = 400,
    tokenizer_uri: str | None = None,
    train_new_tokenizer: bool = False,
    vocab_size: int = 512,
    block_size: int = 64,
    eval_every: int = 10,
    blocks_per_shard: int = 1024,
    interval: dict[str, str] | None = None,
    holdout_manifest: bool = False,
) -> dict[str, Any]:
    if block_size < 2:
        raise BadInputError(f"--block-size must be >= 2, got {block_size}")
    written: dict[str, bytes] = {}  # what this job wrote under output_uri, relative name -> bytes
    if input_uri is None:
        if not synthetic_date:
            raise BadInputError("give --input-uri or --synthetic-date")
        input_uri = uris.join(output_uri, "raw", "corpus.jsonl")
        corpus = synthetic_jsonl(synthetic_date, synthetic_records)
        uris.write_if_changed(input_uri, corpus)
        written["raw/corpus.jsonl"] = corpus
    files = input_files(input_uri)
    parsed = parse_inputs(files)
    base = {
        "format_version": FORMAT_VERSION,
        "input_uri": input_uri,
        "input_files": [f.rsplit("/", 1)[-1] for f in files],
        "input_sha256": parsed.sha256,
        "interval": interval or ({"date": synthetic_date} if synthetic_date else {}),
        "records": len(parsed.texts),
        "malformed_count": parsed.malformed_count,
        "malformed": parsed.malformed,
        "block_size": block_size,
    }
    index_uri = uris.join(output_uri, boundary.DATA_INDEX_FILE)

    def skip(reason: str) -> dict[str, Any]:
        """An index that says why there is nothing to train on: the DAG's training task skips on it."""
        index = {**base, "skipped": True, "reason": reason}
        finish(output_uri, index, written, holdout_manifest)
        log.warning("SKIP: %s", reason)
        return index

    if not parsed.texts:
        return skip(f"no usable records in {input_uri} ({len(files)} file(s), {parsed.malformed_count} malformed)")

    tokenizer = resolve_tokenizer(tokenizer_uri, train_new_tokenizer, parsed.texts, vocab_size)
    tokenizer_json = tokenizer.to_str().encode()
    token_lists = [enc.ids for enc in tokenizer.encode_batch(parsed.texts, add_special_tokens=False)]
    blocks, dropped = pack(token_lists, block_size, special_id(tokenizer, BOS), special_id(tokenizer, EOS))
    if len(blocks) == 0:
        return skip(f"{len(parsed.texts)} record(s) hold fewer tokens than one block of {block_size}")
    train, held = split_blocks(blocks, eval_every)
    settings = {
        **base,
        "skipped": False,
        "vocab_size": tokenizer.get_vocab_size(),
        "tokenizer_sha256": hashlib.sha256(tokenizer_json).hexdigest(),
        "eval_every": eval_every,
        "tokens": int(blocks.size + dropped),
        "dropped_tokens": int(dropped),
    }
    if uris.exists(index_uri) and not holdout_manifest:  # a hold-out set's files are checked, not trusted
        existing: dict[str, Any] = uris.read_json(index_uri)
        if {k: v for k, v in existing.items() if k not in ("train", "eval")} == settings:
            log.info("data set already at %s, unchanged", output_uri)
            return existing
    written["tokenizer.json"] = tokenizer_json
    index = {
        **settings,
        "train": shard_files(written, "train", train, blocks_per_shard),
        "eval": shard_files(written, "eval", held, blocks_per_shard),
    }
    for name in [n for n in written if n != "raw/corpus.jsonl"]:
        uris.write_if_changed(uris.join(output_uri, name), written[name])
    finish(output_uri, index, written, holdout_manifest)
    log.info(
        "prepared %d records -> %d train + %d eval blocks of %d tokens (%d malformed, %d tokens dropped) at %s",
        len(parsed.texts),
        len(train),
        len(held),
        block_size,
        parsed.malformed_count,
        dropped,
        output_uri,
    )
    return index


def finish(output_uri: str, index: dict[str, Any], written: dict[str, bytes], holdout_manifest: bool) -> None:
    """Write the index last (readers trust a data set with an index); then, for a hold-out set, the manifest of
    every file this job wrote."""
    index_bytes = uris.json_bytes(index)
    uris.write_if_changed(uris.join(output_uri, boundary.DATA_INDEX_FILE), index_bytes)
    if holdout_manifest:
        write_manifest(output_uri, {**written, boundary.DATA_INDEX_FILE: index_bytes})


# -- reading a prepared data set (the trainer and evaluator) ------------------------------------------
def read_index(data_uri: str, files: dict[str, bytes] | None = None) -> dict[str, Any]:
    """The data set's index; from ``files`` (name -> bytes already read and checked, ``common.holdout``) when given."""
    index_uri = uris.join(data_uri, boundary.DATA_INDEX_FILE)
    index: dict[str, Any]
    if files is not None:
        if boundary.DATA_INDEX_FILE not in files:
            raise BadInputError(f"the hold-out manifest of {data_uri} lists no {boundary.DATA_INDEX_FILE}")
        index = json.loads(files[boundary.DATA_INDEX_FILE])
    elif not uris.exists(index_uri):
        raise BadInputError(f"no prepared data set at {data_uri} ({boundary.DATA_INDEX_FILE} missing)")
    else:
        index = uris.read_json(index_uri)
    if index.get("skipped"):
        raise BadInputError(f"the data set at {data_uri} is empty: {index.get('reason')}")
    return index


def load_blocks(data_uri: str, split: str = "train", files: dict[str, bytes] | None = None) -> npt.NDArray[Any]:
    """The blocks of ``split``; from ``files`` (checked bytes, ``read_index``) when given, never read again."""
    index = read_index(data_uri, files)
    arrays: list[npt.NDArray[Any]] = []
    for shard in index[split]:
        if files is not None and shard["file"] not in files:
            raise BadInputError(f"{shard['file']} is not in the hold-out manifest of {data_uri}")
        data = files[shard["file"]] if files is not None else uris.read_bytes(uris.join(data_uri, shard["file"]))
        if hashlib.sha256(data).hexdigest() != shard["sha256"]:
            raise BadInputError(f"{shard['file']} does not match its checksum in {boundary.DATA_INDEX_FILE}")
        arrays.append(np.load(io.BytesIO(data), allow_pickle=False))
    if not arrays:
        block_size: int = index["block_size"]
        return np.zeros((0, block_size), dtype=np.int64)
    blocks: npt.NDArray[np.int64] = np.concatenate(arrays).astype(np.int64)
    return blocks


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-uri", default=os.environ.get(boundary.ENV_OUTPUT_URI))
    p.add_argument("--input-uri", default=None)
    p.add_argument("--synthetic-date", default=None, help="generate this day's synthetic corpus as the input")
    p.add_argument("--synthetic-records", type=int, default=400)
    p.add_argument("--tokenizer-uri", default=None, help="tokenizer.json (or a directory holding one)")
    p.add_argument("--train-tokenizer", action="store_true", help="train and save one when it does not exist")
    p.add_argument("--vocab-size", type=int, default=512)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--blocks-per-shard", type=int, default=1024)
    p.add_argument("--interval-start", default=None)
    p.add_argument("--interval-end", default=None)
    p.add_argument("--holdout-manifest", action="store_true",
                   help="an evaluation hold-out set: check every file and record (and seal) their sha256")  # fmt: skip
    args = p.parse_args(argv)
    if not args.output_uri:
        raise BadInputError(f"--output-uri (or {boundary.ENV_OUTPUT_URI}) is required")
    for name in ("synthetic_records", "vocab_size", "blocks_per_shard"):
        if getattr(args, name) < 1:
            raise BadInputError(f"--{name.replace('_', '-')} must be >= 1")
    return args


@job_main
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    check_input("--input-uri", args.input_uri)
    check_input("--tokenizer-uri", args.tokenizer_uri)
    interval = {k: v for k, v in (("start", args.interval_start), ("end", args.interval_end)) if v}
    if args.synthetic_date:
        interval.setdefault("date", args.synthetic_date)
    prepare(
        args.output_uri,
        input_uri=args.input_uri,
        synthetic_date=args.synthetic_date,
        synthetic_records=args.synthetic_records,
        tokenizer_uri=args.tokenizer_uri,
        train_new_tokenizer=args.train_tokenizer,
        vocab_size=args.vocab_size,
        block_size=args.block_size,
        eval_every=args.eval_every,
        blocks_per_shard=args.blocks_per_shard,
        interval=interval,
        holdout_manifest=args.holdout_manifest,
    )


if __name__ == "__main__":
    lean_exit.run(main)
