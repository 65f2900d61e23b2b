"""Evaluate a trained MLP on the test split; fail the job when accuracy is below ``--min-accuracy``.

Writes ``evaluation.json`` next to the model (it is registered with it) and then the verdict record
(``trainium_trainer.common.verdict``) to ``--output-uri`` (the job's own output): promotion reads that record, whatever
Airflow's task states say.

On the native stack (``TRAINIUM_STACK=native``) it runs on the native device in plain PyTorch: the native image
has no torch-xla to run the XLA path's runtime on.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import numpy as np
import torch

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit
from trainium_trainer.common import uri as uris
from trainium_trainer.common.device import Runtime, init_runtime
from trainium_trainer.common.errors import job_main
from trainium_trainer.common.stack import selected_stack
from trainium_trainer.common.verdict import write_verdict
from trainium_trainer.mnist_mlp.idx import load_split
from trainium_trainer.mnist_mlp.model import MLP
from trainium_trainer.mnist_mlp.train import evaluate, to_features

log = logging.getLogger("trainer")
EXIT_BELOW_THRESHOLD = boundary.EXIT_BELOW_THRESHOLD


def load_model(model_uri: str) -> MLP:
    from safetensors.torch import load

    config = uris.read_json(uris.join(model_uri, "model_config.json"))
    model = MLP(in_features=config["in_features"], hidden=tuple(config["hidden"]), classes=config["classes"])
    model.load_state_dict(load(uris.read_bytes(uris.join(model_uri, "model.safetensors"))))
    return model


def native_runtime() -> Runtime:
    """The native device as the XLA path's ``Runtime`` shape: a non-XLA one, so ``evaluate`` makes no XLA call."""
    from trainium_trainer.native.device import init_device

    device = init_device()
    return Runtime(f"native-{device.type}", device.device)


@job_main
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model-uri", required=True)
    p.add_argument("--data-uri", required=True)
    p.add_argument("--min-accuracy", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--compile-cache-uri", default=None)
    p.add_argument("--output-uri", default=os.environ.get(boundary.ENV_OUTPUT_URI), help="where the verdict goes")
    args = p.parse_args(argv)

    runtime = native_runtime() if selected_stack() == boundary.STACK_NATIVE else init_runtime(args.compile_cache_uri)
    images, labels = load_split(args.data_uri, "t10k")
    model = load_model(args.model_uri).to(runtime.device)
    accuracy = evaluate(model, to_features(images), torch.from_numpy(labels.astype(np.int64)), runtime, args.batch_size)
    result = {"accuracy": round(accuracy, 5), "samples": len(labels), "min_accuracy": args.min_accuracy}
    uris.write_json(uris.join(args.model_uri, boundary.EVALUATION_FILE), result)
    log.info("evaluation %s", result)
    if args.output_uri:
        verdict = write_verdict(
            args.output_uri,
            model_uri=args.model_uri,
            metric="accuracy",
            value=result["accuracy"],
            threshold=args.min_accuracy,
            comparison=">=",
            details=result,
        )
        state = "passed" if verdict["passed"] else "failed"
        log.info("verdict: %s for model files %s", state, verdict["model_fingerprint"][:12])
    if accuracy < args.min_accuracy:
        print(f"accuracy {accuracy:.4f} is below --min-accuracy {args.min_accuracy}", file=sys.stderr)
        sys.exit(EXIT_BELOW_THRESHOLD)


if __name__ == "__main__":
    lean_exit.run(main)
