"""The suite's layout holds: unit tests mirror the source module by module and stay fast, the other folders carry
their markers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import conftest, xdist_order

TESTS = Path(conftest.__file__).resolve().parent
REPO = TESTS.parent
UNIT = TESTS / "unit"
#: Fixtures that make a test integration (tests/integration) rather than unit: the moto server and the worlds
#: built on it, the image registry and buildah.
SERVER_FIXTURES = {"aws_conn_id", "moto_server", "moto_reset", "batch_env", "ecs_world", "local_registry",
                   "buildah_options"}  # fmt: skip
#: Whole DAG runs.
DAG_RUN = re.compile(r"\bdag\.test\(|\brun_dag\(")
SIGNATURE = re.compile(r"\bdef \w+\(([^)]*)\)")


#: Unit test files that check a rule over many modules at once, so they name no one module: file -> why.
CROSS_CUTTING = {
    "test_error_hierarchies.py": "no error class name twice, over every module of the provider",
    "test_import_graph.py": "no import loop, over every module of the provider",
    "test_layering.py": "the import direction of every package",
    "test_layout.py": "the layout of the whole suite",
    "test_user_guide.py": "every Python block of the user guide (docs/), over many modules",
    "operators/test_conventions.py": "the naming and deferrable conventions of every operator, sensor and hook",
    "triggers/test_serialization.py": "the triggerer's round trip of every trigger the provider declares",
    "dags/test_dag_integrity.py": "every shipped DAG imports cleanly and without torch",
    "dags/test_parse_closure.py": "what parsing each shipped DAG imports",
    "dags/test_budget_ceiling.py": "the budget ceiling of every shipped DAG",
    "dags/test_stack_param.py": "the stack param of every training DAG",
}


def unit_files() -> list[Path]:
    return sorted(UNIT.rglob("test_*.py"))


def source_dirs(path: Path) -> list[Path]:
    """The source package(s) a unit test folder mirrors: at the top, the provider and the repository root."""
    package = path.parent.relative_to(UNIT)
    if package == Path("."):
        return [REPO / "airflow_provider_trainium", REPO]
    return [d for d in (REPO / "airflow_provider_trainium" / package, REPO / package) if d.is_dir()]


def module_names(directory: Path) -> set[str]:
    """The modules and subpackages of a source directory."""
    modules = {p.stem for p in directory.glob("*.py") if p.stem != "__init__"}
    return modules | {p.name for p in directory.iterdir() if (p / "__init__.py").is_file()}


def test_unit_tests_live_at_the_path_of_their_source_package() -> None:
    packages = {path.parent.relative_to(UNIT) for path in unit_files()} - {Path(".")}
    sources = {package: (REPO / "airflow_provider_trainium" / package, REPO / package) for package in packages}
    astray = [f"tests/unit/{package}" for package in sorted(packages) if not any(d.is_dir() for d in sources[package])]
    assert astray == [], "these folders mirror no source package"


def names_a_module(path: Path) -> bool:
    """``test_<module>.py``, or ``test_<module>_<aspect>.py`` (``operators/test_job_env_hash.py`` tests
    ``operators/job.py``), where ``<module>`` is a module or subpackage of the mirrored package."""
    name = path.stem.removeprefix("test_")
    modules = {m for d in source_dirs(path) for m in module_names(d)}
    return any(name == m or name.startswith(f"{m}_") for m in modules)


def test_unit_tests_name_a_module_of_their_source_package() -> None:
    unnamed = [str(p.relative_to(UNIT)) for p in unit_files()
               if str(p.relative_to(UNIT)) not in CROSS_CUTTING and not names_a_module(p)]  # fmt: skip
    assert unnamed == [], (
        "these name no module of the package their folder mirrors: move each to "
        "tests/unit/<package>/test_<module>[_<aspect>].py, or (a check over many modules) list it in CROSS_CUTTING"
    )


def test_every_cross_cutting_file_exists() -> None:
    assert sorted(rel for rel in CROSS_CUTTING if not (UNIT / rel).is_file()) == []


def server_dag_run_or_build(path: Path) -> list[str]:
    """The server fixtures a test file's functions take, and the whole DAG runs it starts."""
    text = path.read_text()
    params = {p.split(":")[0].split("=")[0].strip() for m in SIGNATURE.finditer(text) for p in m.group(1).split(",")}
    return sorted(params & SERVER_FIXTURES) + sorted({m.group(0) for m in DAG_RUN.finditer(text)})


def test_unit_tests_use_no_server_dag_run_or_build() -> None:
    found = {str(p.relative_to(TESTS)): uses for p in unit_files()
             if p != Path(__file__).resolve() and (uses := server_dag_run_or_build(p))}  # fmt: skip
    assert found == {}, "these belong in tests/integration/<area>/"


class _Item:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.markers: list[str] = []

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.markers.append(mark.name)

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None


def test_folders_mark_their_tests() -> None:
    items = [_Item(TESTS / rel) for rel in ("unit/a/test_x.py", "integration/a/test_y.py", "e2e/test_z.py")]
    conftest.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.markers for i in items] == [[], ["integration"], ["e2e"]]


def test_xdist_workers_take_slow_modules_first_then_integration_then_unit() -> None:
    names = ["unit/a.py", "integration/b.py", "integration/b.py", "unit/c.py", "integration/d.py"]
    items = [_Item(TESTS / rel) for rel in names]
    conftest.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    items[2].markers.append("slow")  # one slow test makes its whole module slow
    ordered = xdist_order.heaviest_modules_first(items)  # type: ignore[arg-type]
    assert [str(i.path.relative_to(TESTS)) for i in ordered] == [
        "integration/b.py", "integration/b.py", "integration/d.py", "unit/a.py", "unit/c.py"]  # fmt: skip


def test_every_type_ignore_names_its_code_and_why() -> None:
    """mypy's own rule (ignore-without-code) asks for the code; the reason is this project's."""
    bare = [
        f"{path.relative_to(TESTS.parent)}:{number}"
        for root in ("airflow_provider_trainium", "trainium_trainer")
        for path in sorted((TESTS.parent / root).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line and not re.search(r"type: ignore\[[^]]+\]  # \S", line)
    ]
    assert bare == []


#: The most lines a provider module may hold, and the job operator's own limit: it only sequences a try.
MAX_MODULE_LINES = 450
MAX_LINES = {"airflow_provider_trainium/operators/job.py": 300}


def test_no_provider_module_outgrows_one_job() -> None:
    """A module past its limit holds more than one job: split it by job, as ``operators/job_*.py`` are."""
    too_long = {
        name: lines
        for path in sorted((REPO / "airflow_provider_trainium").rglob("*.py"))
        if (lines := len(path.read_text().splitlines()))
        > MAX_LINES.get(name := str(path.relative_to(REPO)), MAX_MODULE_LINES)
    }
    assert too_long == {}
