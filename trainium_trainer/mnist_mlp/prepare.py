"""Data prep for the demo: scikit-learn's bundled handwritten digits (8x8) written as MNIST IDX files.

The real MNIST cannot be downloaded here; the digits set is real handwriting and small enough for CI.
Deterministic: the same seed gives byte-identical files, and an existing identical data set is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os

import numpy as np

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit
from trainium_trainer.common import uri as uris
from trainium_trainer.common.errors import BadInputError, job_main
from trainium_trainer.mnist_mlp.idx import encode_idx

log = logging.getLogger("trainer")


def digits_as_idx(seed: int = 0, test_fraction: float = 0.2) -> dict[str, bytes]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.clip(np.rint(digits.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(round(len(labels) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return {
        "train-images-idx3-ubyte.gz": encode_idx(images[train]),
        "train-labels-idx1-ubyte.gz": encode_idx(labels[train]),
        "t10k-images-idx3-ubyte.gz": encode_idx(images[test]),
        "t10k-labels-idx1-ubyte.gz": encode_idx(labels[test]),
    }


def prepare(output_uri: str, seed: int = 0) -> dict[str, object]:
    files = digits_as_idx(seed)
    manifest = {
        "source": "sklearn.datasets.load_digits",
        "seed": seed,
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())},
    }
    manifest_uri = uris.join(output_uri, "dataset.json")
    if uris.exists(manifest_uri) and uris.read_json(manifest_uri) == manifest:
        log.info("data set already at %s, unchanged", output_uri)
        return manifest
    for name, data in files.items():
        uris.write_bytes(uris.join(output_uri, name), data)
    uris.write_json(manifest_uri, manifest)  # last: readers trust a data set with a manifest
    log.info("wrote %d files to %s", len(files), output_uri)
    return manifest


@job_main
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output-uri", default=os.environ.get(boundary.ENV_OUTPUT_URI))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.output_uri:
        raise BadInputError(f"--output-uri (or {boundary.ENV_OUTPUT_URI}) is required")
    prepare(args.output_uri, args.seed)


if __name__ == "__main__":
    lean_exit.run(main)
