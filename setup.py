"""Build step that pyproject.toml cannot declare: the deployment files travel inside the wheel.

The DAGs, the training images' build context (``.dockerignore``, ``docker/``, ``trainium_trainer/``) and the
CloudFormation templates live at the repository root, where the tests, linters and ``make`` use them. A wheel
copies them under ``airflow_provider_trainium/bundled/`` (``airflow_provider_trainium.bundled`` finds them in
either place), so a deployment that installs the provider with pip has everything a checkout has.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: (source relative to the repository root, glob of the files taken from it)
BUNDLED = (
    (".dockerignore", ""),
    ("dags", "*.py"),
    ("docker", "**/*"),
    ("trainium_trainer", "**/*.py"),
    ("cloudformation", "*.yaml"),
)


def bundled_files() -> list[Path]:
    """Every file the wheel bundles, relative to the repository root; bytecode and caches never."""
    files: list[Path] = []
    for source, pattern in BUNDLED:
        path = ROOT / source
        candidates = [path] if not pattern else sorted(path.glob(pattern))
        files += [
            candidate.relative_to(ROOT)
            for candidate in candidates
            if candidate.is_file() and "__pycache__" not in candidate.parts and candidate.suffix != ".pyc"
        ]
    return files


class BuildWithBundledFiles(build_py):
    """``build_py`` that also copies :func:`bundled_files` into the package (editable installs read the checkout)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "airflow_provider_trainium" / "bundled"
        for relative in bundled_files():
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, destination)


setup(cmdclass={"build_py": BuildWithBundledFiles})
