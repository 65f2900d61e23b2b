"""Evaluate a fine-tuned model against its base on the held-out blocks of the same data set.

Writes ``evaluation.json`` to ``--output-uri``: both losses and perplexities and ``improved`` (the
fine-tuned loss beats the base's by more than ``--min-improvement``). Without a base model the
reference is the seeded random initialization of the same architecture. Then the verdict record
(``trainium_trainer.common.verdict``) next to it: promotion reads that record, whatever Airflow's task states say.

A hold-out set with a manifest (``data --holdout-manifest``) is read once, every file checked against the manifest
(``trainium_trainer.common.holdout``; a file that differs is refused by name, exit ``EXIT_BAD_INPUT``), and both
models are judged on those very bytes; the verdict names the manifest's fingerprint (``holdout_fingerprint``), which
the provider compares with the one the set's data job sealed. A set without a manifest is judged as before and the
verdict names none.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from typing import TYPE_CHECKING, Any

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit
from trainium_trainer.common import uri as uris
from trainium_trainer.common.device import Runtime, init_runtime
from trainium_trainer.common.errors import BadInputError, job_main
from trainium_trainer.common.holdout import read_holdout
from trainium_trainer.common.inputs import check_input
from trainium_trainer.common.verdict import write_verdict
from trainium_trainer.llama.data import load_blocks, read_index
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint
from trainium_trainer.llama.model import base_model, build_config
from trainium_trainer.llama.train import evaluate_loss

if TYPE_CHECKING:
    import numpy.typing as npt

log = logging.getLogger("trainer")


def holdout_blocks(data_uri: str) -> tuple[dict[str, Any], npt.NDArray[Any], str | None]:
    """The set's index, its held-out blocks (its train blocks when it holds none out) and its manifest's fingerprint
    (None: the set has no manifest); with a manifest, every file is read once and checked against it."""
    files, fingerprint = None, None
    if uris.exists(uris.join(data_uri, boundary.HOLDOUT_MANIFEST_FILE)):
        files, fingerprint = read_holdout(data_uri)
    index = read_index(data_uri, files)
    blocks = load_blocks(data_uri, "eval", files)
    if len(blocks) == 0:
        blocks = load_blocks(data_uri, "train", files)
    return index, blocks, fingerprint


def model_loss(
    model_uri: str | None, like_uri: str, blocks: npt.NDArray[Any], runtime: Runtime, batch_size: int, vocab: int
) -> float:
    checkpoint = HFCheckpoint(model_uri) if model_uri else None
    config = build_config("tiny", vocab, checkpoint or HFCheckpoint(like_uri))
    model = base_model(config, 0, checkpoint)
    return evaluate_loss(model.to(runtime.device), blocks, runtime, batch_size)


@job_main
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model-uri", required=True)
    p.add_argument("--base-model-uri", default=None)
    p.add_argument("--data-uri", required=True)
    p.add_argument("--output-uri", default=os.environ.get(boundary.ENV_OUTPUT_URI))
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--min-improvement", type=float, default=0.0, help="required drop in eval loss")
    p.add_argument("--compile-cache-uri", default=None)
    args = p.parse_args(argv)
    if not args.output_uri:
        raise BadInputError(f"--output-uri (or {boundary.ENV_OUTPUT_URI}) is required")
    check_input("--base-model-uri", args.base_model_uri)
    runtime = init_runtime(args.compile_cache_uri)
    index, blocks, holdout = holdout_blocks(args.data_uri)
    vocab = int(index["vocab_size"])
    loss = model_loss(args.model_uri, args.model_uri, blocks, runtime, args.batch_size, vocab)
    base_loss = model_loss(args.base_model_uri, args.model_uri, blocks, runtime, args.batch_size, vocab)
    result = {
        "model_uri": args.model_uri,
        "base_model_uri": args.base_model_uri,
        "data_uri": args.data_uri,
        "holdout_fingerprint": holdout,
        "eval_loss": round(loss, 6),
        "base_eval_loss": round(base_loss, 6),
        "perplexity": round(math.exp(min(loss, 50)), 4),
        "base_perplexity": round(math.exp(min(base_loss, 50)), 4),
        "min_improvement": args.min_improvement,
        "improved": bool(loss < base_loss - args.min_improvement),
    }
    uris.write_json(uris.join(args.output_uri, boundary.EVALUATION_FILE), result)
    log.info("evaluation %s", json.dumps(result, sort_keys=True))
    verdict = write_verdict(
        args.output_uri,
        model_uri=args.model_uri,
        metric="eval_loss",
        value=result["eval_loss"],
        threshold=round(base_loss - args.min_improvement, 6),
        comparison="<",
        details=result,
        holdout_fingerprint=holdout,
    )
    log.info(
        "verdict: %s for model files %s", "passed" if verdict["passed"] else "failed", verdict["model_fingerprint"][:12]
    )


if __name__ == "__main__":
    lean_exit.run(main)
