"""buildah: daemonless builds for Kubernetes pods and CI workers that have no Docker engine.

Defaults (vfs storage, chroot isolation) work as an unprivileged-ish root in a container. Credentials go
through a 0600 auth file that is deleted afterwards, never through the command line.

The base image is pulled before the build with the policy ``bud`` itself uses (``missing``), so the image
whose manifest digest goes into the label is the one the build then starts from. That digest is read from
buildah's own record of the image (``FromImageDigest``): for a multi-platform tag it is the platform's
manifest, the image that shares its layers with ours. buildah's own ``org.opencontainers.image.base.digest``
annotation says the same but exists only in OCI-format images, and this builder writes Docker format by
default.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from airflow_provider_trainium.image.builders.base import (
    BASE_DIGEST_LABEL,
    BuildOutput,
    BuildRequest,
    LogTail,
    run_logged,
)
from airflow_provider_trainium.image.errors import BuilderUnavailable, BuildFailed


class BuildahBuilder:
    """``buildah bud`` then ``buildah push``; the push only runs after a successful build."""

    name = "buildah"

    def __init__(
        self,
        executable: str = "buildah",
        *,
        storage_driver: str | None = "vfs",
        isolation: str = "chroot",
        root: str | None = None,
        runroot: str | None = None,
        image_format: str = "docker",
        layers: bool = True,
        remove_after_push: bool = False,
    ) -> None:
        self.executable = executable
        self.storage_driver = storage_driver
        self.isolation = isolation
        self.root = root
        self.runroot = runroot
        self.image_format = image_format
        self.layers = layers
        self.remove_after_push = remove_after_push

    def _base(self) -> list[str]:
        path = shutil.which(self.executable)
        if path is None:
            raise BuilderUnavailable(
                f"buildah executable {self.executable!r} not found on PATH; install buildah "
                "(apt-get install buildah) or choose builder='docker' or 'codebuild'"
            )
        argv = [path]
        if self.storage_driver:
            argv += ["--storage-driver", self.storage_driver]
        if self.root:
            argv += ["--root", self.root]
        if self.runroot:
            argv += ["--runroot", self.runroot]
        return argv

    def base_digest(self, base: list[str], request: BuildRequest, authfile: Path, tls: str) -> str | None:
        """Pull the base as ``bud`` would (only if missing) and return its manifest digest."""
        assert request.base_image is not None
        pull = [*base, "pull", "--policy", "missing", "--authfile", str(authfile), tls, request.base_image]
        run_logged(pull, LogTail("buildah pull"), f"buildah pull of the base image {request.base_image}")
        inspect = [*base, "inspect", "--type", "image", "--format", "{{.FromImageDigest}}", request.base_image]
        done = subprocess.run(inspect, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
        digest = done.stdout.strip()
        if done.returncode != 0 or not digest.startswith("sha256:"):
            raise BuildFailed(f"buildah inspect of the base image {request.base_image} gave no digest: {done.stderr}")
        return digest

    def build(self, request: BuildRequest) -> BuildOutput:
        base = self._base()
        ctx = request.context
        tls = f"--tls-verify={'false' if request.insecure_registry else 'true'}"
        with tempfile.TemporaryDirectory(prefix="trainium-buildah-") as tmp:
            authfile = Path(tmp, "auth.json")
            fd = os.open(authfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump(
                    {
                        "auths": {
                            a.host: {"auth": base64.b64encode(f"{a.username}:{a.password}".encode()).decode()}
                            for a in request.auths
                        }
                    },
                    handle,
                )
            base_digest = self.base_digest(base, request, authfile, tls) if request.base_image else None
            bud = [*base, "bud", "--isolation", self.isolation, "--format", self.image_format]
            bud += [
                "--authfile",
                str(authfile),
                tls,
                "-f",
                str(ctx.directory / ctx.dockerfile),
                "-t",
                request.image,
            ]
            if base_digest:
                bud += ["--label", f"{BASE_DIGEST_LABEL}={base_digest}"]
            if self.layers:
                bud.append("--layers")
            for key, value in sorted(request.build_args.items()):
                bud += ["--build-arg", f"{key}={value}"]
            if request.target:
                bud += ["--target", request.target]
            bud.append(str(ctx.directory))
            run_logged(bud, LogTail("buildah bud"), f"buildah build of {request.image}")

            digestfile = Path(tmp, "digest")
            push = [*base, "push", "--authfile", str(authfile), tls, "--digestfile", str(digestfile)]
            push += [request.image, f"docker://{request.image}"]
            run_logged(push, LogTail("buildah push"), f"buildah push of {request.image}")
            if self.remove_after_push:
                run_logged([*base, "rmi", request.image], LogTail("buildah rmi"), "buildah rmi")
            try:
                return BuildOutput(digestfile.read_text().strip() or None, base_digest)
            except OSError:
                raise BuildFailed(f"buildah push of {request.image} wrote no digest") from None
