"""``make pin-base-digest``: resolve the digest of the base image's tag and pin it where the build reads it.

The tag in docker/neuron-versions.toml ``[base]`` can be moved by its publisher; the digest cannot. This asks
the registry (anonymous token flow for public.ecr.aws) which manifest the tag names now, the digest
``crane digest`` prints (an index's own digest for a multi-platform tag), and writes it into ``[base].digest``
with where and when it came from, and into the Dockerfile's ``ARG BASE_IMAGE=<image>:<tag>@<digest>``, so
tests/integration/image/test_pins.py sees both agree.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_trainium.image.container_registry import OciRegistry
from airflow_provider_trainium.image.errors import ContainerRegistryError, ImageError

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ARG = re.compile(r"^ARG BASE_IMAGE=\S+[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Pinned:
    image: str
    tag: str
    digest: str
    source: str

    @property
    def reference(self) -> str:
        return f"{self.image}:{self.tag}@{self.digest}"


def read_base(versions: Path) -> tuple[str, str]:
    """``[base].image`` and ``[base].tag`` of the versions file."""
    base = tomllib.loads(versions.read_text(encoding="utf-8")).get("base") or {}
    if not base.get("image") or not base.get("tag"):
        raise ImageError(f"{versions} has no [base] image and tag")
    return str(base["image"]), str(base["tag"])


def resolve(image: str, tag: str, *, insecure: bool = False, today: dt.date | None = None) -> Pinned:
    """The digest the registry stores under ``image:tag``, and a ``digest_source`` saying where and when."""
    digest = OciRegistry(image, insecure=insecure).lookup(tag)
    if digest is None:
        raise ContainerRegistryError(f"{image}:{tag} does not exist in its registry")
    if not _DIGEST.match(digest):
        raise ContainerRegistryError(f"registry answered {digest!r} for {image}:{tag}, not a sha256 digest")
    day = (today or dt.datetime.now(dt.UTC).date()).isoformat()
    source = f"resolved from {image.partition('/')[0]} on {day} by make pin-base-digest"
    return Pinned(image, tag, digest, source)


def _set_in_base(text: str, key: str, value: str) -> str:
    """Replace ``key = "..."`` inside the ``[base]`` table, leaving every comment and other table as it is."""
    start = re.search(r"^\[base\][ \t]*$", text, re.MULTILINE)
    if start is None:
        raise ImageError("the versions file has no [base] table")
    end = re.compile(r"^\[", re.MULTILINE).search(text, start.end())
    stop = end.start() if end else len(text)
    table = text[start.end() : stop]
    line = re.compile(rf"^{re.escape(key)}[ \t]*=.*$", re.MULTILINE)
    if not line.search(table):
        raise ImageError(f"the [base] table has no {key} line")
    quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    table = line.sub(lambda _: f"{key} = {quoted}", table, count=1)
    return text[: start.end()] + table + text[stop:]


def write(pinned: Pinned, versions: Path, dockerfile: Path) -> None:
    """Write the digest into both files; both are checked before either is written."""
    text = _set_in_base(versions.read_text(encoding="utf-8"), "digest", pinned.digest)
    text = _set_in_base(text, "digest_source", pinned.source)
    docker = dockerfile.read_text(encoding="utf-8")
    if len(_ARG.findall(docker)) != 1:
        raise ImageError(f"{dockerfile} must have exactly one `ARG BASE_IMAGE=<default>` line")
    docker = _ARG.sub(lambda _: f"ARG BASE_IMAGE={pinned.reference}", docker, count=1)
    if tomllib.loads(text)["base"]["digest"] != pinned.digest:
        raise ImageError("the rewritten versions file does not read back the digest")
    versions.write_text(text, encoding="utf-8")
    dockerfile.write_text(docker, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_trainium.image.pin_base", description=__doc__)
    parser.add_argument("--versions", type=Path, default=Path("docker/neuron-versions.toml"))
    parser.add_argument("--dockerfile", type=Path, default=Path("docker/Dockerfile"))
    parser.add_argument("--insecure", action="store_true", help="plain HTTP (a local registry)")
    args = parser.parse_args(argv)
    try:
        image, tag = read_base(args.versions)
        pinned = resolve(image, tag, insecure=args.insecure)
        write(pinned, args.versions, args.dockerfile)
    except (ImageError, OSError) as exc:
        print(f"pin-base-digest: {exc}", file=sys.stderr)
        return 1
    print(f"{pinned.reference}\n{pinned.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
