"""Find or build the image from a shell or CI job, outside any DAG: prints the result as JSON.

python -m airflow_provider_trainium.image --repository HOST/NAME [--builder buildah] [--insecure]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_trainium.image", description=__doc__)
    parser.add_argument("--context", default=".", help="build context directory (default: .)")
    parser.add_argument("--dockerfile", default="docker/Dockerfile", help="relative to the context")
    parser.add_argument("--repository", required=True, help="ECR name/URI or HOST[:PORT]/NAME")
    parser.add_argument("--builder", default="buildah", choices=["buildah", "docker", "codebuild"])
    parser.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--insecure", action="store_true", help="plain-HTTP OCI registry")
    parser.add_argument("--aws-conn-id", default="aws_default")
    parser.add_argument("--buildah-root", help="buildah --root (storage location)")
    parser.add_argument("--buildah-runroot", help="buildah --runroot")
    parser.add_argument("--codebuild-source-uri", help="s3:// prefix for context uploads")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)

    from airflow_provider_trainium.image.builders import make_builder
    from airflow_provider_trainium.image.container_registry import parse_repository
    from airflow_provider_trainium.image.context import BuildContext
    from airflow_provider_trainium.image.ensure import ensure_image
    from airflow_provider_trainium.image.errors import ImageError

    build_args = dict(item.split("=", 1) for item in args.build_arg)
    options: dict[str, object] = {}
    if args.builder == "buildah":
        options = {"root": args.buildah_root, "runroot": args.buildah_runroot}
    elif args.builder == "codebuild":
        options = {"aws_conn_id": args.aws_conn_id, "source_uri": args.codebuild_source_uri}
    try:
        context = BuildContext.load(args.context, args.dockerfile, build_args)
        registry = parse_repository(
            args.repository, aws_conn_id=args.aws_conn_id, region_name=None, insecure=args.insecure
        )
        result = ensure_image(context, registry, make_builder(args.builder, **options))
    except ImageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "image": result.reference,
                "tag": result.tag,
                "digest": result.digest,
                "built": result.built,
                "seconds": round(result.seconds, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
