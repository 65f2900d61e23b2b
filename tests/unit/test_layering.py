"""The import direction of every package (DESIGN.md section 2), read from the source with ``ast``.

Every import counts, also one inside a function: a lazy import is still a dependency.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.source_imports import imported_names

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = "airflow_provider_trainium"
AIRFLOW_FACES = tuple(f"{PROVIDER}.{p}" for p in ("operators", "sensors", "triggers", "links", "hooks"))
AIRFLOW_EXCEPTION_MODULES = ("airflow.exceptions", "airflow.sdk.exceptions")


def imports(path: Path, root: Path = ROOT) -> set[str]:
    """Every module (and ``module.name`` for from-imports) that ``path`` imports when it runs."""
    return {name for name, _ in imported_names(path, root)}


def sources(folder: str, root: Path = ROOT) -> list[Path]:
    return sorted((root / folder).rglob("*.py"))


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _allowed(name: str, allowed: tuple[str, ...]) -> bool:
    """At or under an allowed module, or a package above one (``from trainium_trainer import boundary`` names both)."""
    return _under(name, allowed) or any(a.startswith(name + ".") for a in allowed)


def offending(folder: str, forbidden: tuple[str, ...], root: Path = ROOT, allowed: tuple[str, ...] = ()) -> list[str]:
    """``file: module`` for every import under ``folder`` of a module at or under a ``forbidden`` prefix,
    except an ``allowed`` one."""
    return sorted(
        f"{path.relative_to(root)}: {name}"
        for path in sources(folder, root)
        for name in imports(path, root)
        if _under(name, forbidden) and not _allowed(name, allowed)
    )


def airflow_exceptions(folder: str) -> list[str]:
    """Imports of Airflow's exception classes, whichever module re-exports them."""
    return sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in sources(folder)
        for name in imports(path)
        if name.startswith(AIRFLOW_EXCEPTION_MODULES)
        or (
            name.startswith("airflow.") and name.rsplit(".", 1)[-1].startswith("Airflow") and name.endswith("Exception")
        )
    )


#: The one module of the trainer the provider imports: the names both share (stdlib only, see its docstring).
TRAINER_BOUNDARY = "trainium_trainer.boundary"

#: rule -> (folder, forbidden prefixes, allowed prefixes among them)
RULES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "neuron/ is pure: no backend, hook, Airflow face or Airflow": (
        f"{PROVIDER}/neuron",
        (f"{PROVIDER}.compute", *AIRFLOW_FACES, "airflow", "boto3", "botocore"),
        (),
    ),
    "compute/ knows no operator": (f"{PROVIDER}/compute", (f"{PROVIDER}.operators", f"{PROVIDER}.sensors"), ()),
    "hooks/ knows no backend (hooks ↛ compute)": (f"{PROVIDER}/hooks", (f"{PROVIDER}.compute",), ()),
    "image/ knows no operator (image ↛ operators)": (f"{PROVIDER}/image", (f"{PROVIDER}.operators",), ()),
    "the provider never imports the trainer (but trainium_trainer.boundary) or torch": (
        PROVIDER,
        ("trainium_trainer", "torch", "torch_xla"),
        (TRAINER_BOUNDARY,),
    ),
    "the trainer never imports Airflow or the provider": ("trainium_trainer", ("airflow", PROVIDER), ()),
    "DAG files never import the trainer or torch": ("dags", ("trainium_trainer", "torch", "torch_xla"), ()),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_import_direction(rule):
    folder, forbidden, allowed = RULES[rule]
    assert sources(folder), f"{folder} has no sources: the rule would pass vacuously"
    assert offending(folder, forbidden, allowed=allowed) == []


def test_the_provider_reaches_the_trainer_only_through_its_boundary(tmp_path):
    """Every spelling of ``trainium_trainer.boundary`` passes (the ``trainium_trainer`` package above it is a
    docstring); any other module of the trainer does not, however it is imported."""
    probe = tmp_path / PROVIDER / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "import trainium_trainer.boundary\nfrom trainium_trainer.boundary import METRICS_FILE\n"
        "from trainium_trainer import boundary\n"
        "def f():\n    from trainium_trainer.common import stream\n    from trainium_trainer import llama\n"
    )
    assert offending(PROVIDER, ("trainium_trainer",), tmp_path, allowed=(TRAINER_BOUNDARY,)) == [
        f"{PROVIDER}/probe.py: trainium_trainer.common.stream",
        f"{PROVIDER}/probe.py: trainium_trainer.llama",
    ]
    assert any(TRAINER_BOUNDARY in imports(p) for p in sources(PROVIDER)), "no provider module uses the boundary"


def test_compute_does_not_import_triggers():
    assert offending(f"{PROVIDER}/compute", (f"{PROVIDER}.triggers",)) == []


def test_compute_raises_no_airflow_exceptions():
    """Backends raise their own errors (``JobInputError``); the operator maps them."""
    assert airflow_exceptions(f"{PROVIDER}/compute") == []


def test_the_rules_see_an_offending_import(tmp_path):
    """The parser resolves relative and lazy imports, so a rule cannot pass by missing them."""
    probe = tmp_path / PROVIDER / "neuron" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("def f():\n    from ..compute import backends\n    from airflow.sdk import Param\n")
    assert offending(f"{PROVIDER}/neuron", (f"{PROVIDER}.compute", "airflow"), tmp_path) == [
        f"{PROVIDER}/neuron/probe.py: airflow.sdk.Param",
        f"{PROVIDER}/neuron/probe.py: {PROVIDER}.compute.backends",
    ]
