"""``trainium_trainer.boundary`` is the one owner of what the provider and the trainer share, read from the source
with ``ast``.

Both trees are scanned: every ``TRAINIUM_*`` variable either side names, every artifact file name both sides
name, every exit code the provider defines again and every record field the stream's readers ask for must be
defined in ``trainium_trainer/boundary.py``; the trainer names none of them as literals (it uses the constants); and
``boundary`` itself imports the standard library only.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.source_imports import parsed
from trainium_trainer import boundary

ROOT = Path(__file__).resolve().parents[3]
TRAINER = "trainium_trainer"
PROVIDER = "airflow_provider_trainium"
BOUNDARY = Path(TRAINER, "boundary.py")
ENV_NAME = re.compile(r"(?<![A-Za-z0-9_])TRAINIUM_[A-Z0-9_]*[A-Z0-9]")
FILE_NAME = re.compile(r"(?:^|/)([\w.-]+\.jsonl?|_SUCCESS)$")
#: Variables only the Airflow worker reads (never set in a container): the provider's own, not shared.
#: ``TRAINIUM_BASE_IMAGE`` is a build argument of a user's Dockerfile (``image/user_image.py``), never a job's variable.
WORKER_ONLY = frozenset({"TRAINIUM_PRICES_FILE", "TRAINIUM_TASK_LOG_ALL_RANKS", "TRAINIUM_BASE_IMAGE"})
#: Modules that read stream records: every field they ask a record for must be one the format defines.
STREAM_READERS = (Path(PROVIDER, "plugins", "stream.py"), Path(TRAINER, "common", "progress.py"))


def sources(folder: str, root: Path = ROOT) -> list[Path]:
    return sorted(p for p in (root / folder).rglob("*.py") if p.relative_to(root) != BOUNDARY)


def docstrings(tree: ast.AST) -> set[int]:
    """``id`` of every docstring node (module, class, function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


@cache
def literals(path: Path, *, with_docstrings: bool) -> tuple[tuple[str, int], ...]:
    """Every string literal of ``path`` (f-string parts included) with its line."""
    tree = parsed(path)
    skip = set() if with_docstrings else docstrings(tree)
    strings = (node for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str))
    return tuple((node.value, node.lineno) for node in strings if id(node) not in skip)


def env_names(folder: str, root: Path = ROOT, *, with_docstrings: bool = True) -> dict[str, list[str]]:
    """``TRAINIUM_*`` name -> ``file:line`` of every literal naming it."""
    found: dict[str, list[str]] = {}
    for path in sources(folder, root):
        for text, line in literals(path, with_docstrings=with_docstrings):
            for name in ENV_NAME.findall(text):
                found.setdefault(name, []).append(f"{path.relative_to(root)}:{line}")
    return found


def file_names(folder: str, root: Path = ROOT) -> dict[str, list[str]]:
    """Artifact file name (``*.json``, ``*.jsonl``, ``_SUCCESS``) -> where a literal names it (prose aside)."""
    found: dict[str, list[str]] = {}
    for path in sources(folder, root):
        for text, line in literals(path, with_docstrings=False):
            match = FILE_NAME.search(text)
            if match:
                found.setdefault(match.group(1), []).append(f"{path.relative_to(root)}:{line}")
    return found


def exit_code_definitions(folder: str, root: Path = ROOT) -> dict[str, list[tuple[int, str]]]:
    """Module-level ``EXIT_* = <int>``: name -> (value, file) for every definition."""
    found: dict[str, list[tuple[int, str]]] = {}
    for path in sources(folder, root):
        for node in parsed(path).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and type(node.value.value) is int:
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.startswith("EXIT_"):
                        found.setdefault(target.id, []).append((node.value.value, str(path.relative_to(root))))
    return found


def record_fields_read(path: Path) -> dict[str, list[int]]:
    """Literal keys ``path`` reads from a mapping (``x.get("k")``, ``x["k"]``) -> lines."""
    found: dict[str, list[int]] = {}
    for node in ast.walk(parsed(path)):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.setdefault(key.value, []).append(node.lineno)
    return found


def record_literals(folder: str, root: Path = ROOT) -> list[str]:
    """Dict literals with a record's ``kind`` or ``v`` key: a record built beside ``boundary.record``."""
    keys = {boundary.KEY_KIND, boundary.KEY_VERSION}
    return [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in sources(folder, root)
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value in keys for k in node.keys)
    ]


def test_the_boundary_lists_every_variable_it_names() -> None:
    named = {v for v in vars(boundary).values() if isinstance(v, str) and ENV_NAME.fullmatch(v)}
    assert named == boundary.ENVIRONMENT
    assert all(name.startswith(boundary.ENV_PREFIX) for name in named)
    assert set(boundary.RENDEZVOUS_ENV) <= boundary.ENVIRONMENT
    assert not WORKER_ONLY & boundary.ENVIRONMENT
    assert boundary.EXIT_CODES == {"EXIT_BAD_INPUT": 65, "EXIT_ALLREDUCE_MISMATCH": 2, "EXIT_BELOW_THRESHOLD": 3}


def test_the_trainer_names_only_boundary_variables_and_only_through_its_constants() -> None:
    mentioned = env_names(TRAINER)
    assert mentioned, "the scan found no variable in the trainer's docs: it would pass vacuously"
    assert {n: w for n, w in mentioned.items() if n not in boundary.ENVIRONMENT} == {}
    assert env_names(TRAINER, with_docstrings=False) == {}  # code uses boundary.ENV_*, prose may name them


def boundary_attributes(folder: str, root: Path = ROOT) -> set[str]:
    """Every ``boundary.<NAME>`` the modules under ``folder`` read."""
    return {
        node.attr
        for path in sources(folder, root)
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "boundary"
    }


def test_the_provider_names_only_boundary_variables_or_its_own_worker_settings() -> None:
    mentioned = env_names(PROVIDER)
    used = boundary_attributes(PROVIDER)
    assert {"ENV_OUTPUT_URI", "ENV_NUM_NODES", "ENV_PEAK_FLOPS", "EXIT_BAD_INPUT"} <= used  # the scan sees the code
    assert {n: w for n, w in mentioned.items() if n not in boundary.ENVIRONMENT | WORKER_ONLY} == {}
    assert not WORKER_ONLY & set(env_names(TRAINER)), "a worker-only name the trainer reads is shared"


def test_artifact_files_both_sides_name_are_the_boundarys() -> None:
    trainer, provider = file_names(TRAINER), file_names(PROVIDER)
    assert {boundary.METRICS_FILE, boundary.SUCCESS_MARKER} <= set(provider)
    assert {n: w for n, w in trainer.items() if n in boundary.FILES} == {}  # the trainer uses the constants
    assert {n: provider[n] + trainer[n] for n in set(provider) & set(trainer)} == {}
    assert stream_layout_literals(PROVIDER) == []


def stream_layout_literals(folder: str, root: Path = ROOT) -> list[str]:
    """Literals spelling out the stream's layout (a monitor source, a chunk file) instead of boundary's."""
    return [
        f"{path.relative_to(root)}:{line}"
        for path in sources(folder, root)
        for text, line in literals(path, with_docstrings=False)
        if boundary.MONITOR_SOURCE_PREFIX in text or text.endswith(boundary.CHUNK_SUFFIX)
    ]


def test_exit_codes_are_defined_by_the_boundary() -> None:
    assert exit_code_definitions(TRAINER) == {}, "the trainer takes its exit codes from trainium_trainer.boundary"
    redefined = {n: places for n, places in exit_code_definitions(PROVIDER).items() if n in boundary.EXIT_CODES}
    assert {n: places for n, places in redefined.items() if {v for v, _ in places} != {boundary.EXIT_CODES[n]}} == {}


@pytest.mark.parametrize("path", STREAM_READERS, ids=str)
def test_stream_readers_ask_records_only_for_fields_of_the_format(path: Path) -> None:
    read = record_fields_read(ROOT / path)
    assert read, f"{path} reads no record field: the check would pass vacuously"
    assert {k: lines for k, lines in read.items() if k not in boundary.RECORD_KEYS} == {}


def test_the_trainer_builds_records_only_through_the_boundary() -> None:
    assert record_literals(TRAINER) == []


def test_the_boundary_imports_the_standard_library_only() -> None:
    tree = ast.parse((ROOT / BOUNDARY).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        (n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
    }
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    package = ast.parse((ROOT / TRAINER / "__init__.py").read_text()).body
    assert len(package) == 1 and isinstance(package[0], ast.Expr), "trainium_trainer/__init__.py must stay a docstring"


@pytest.mark.process
def test_importing_the_boundary_loads_nothing_but_the_standard_library() -> None:
    code = (
        "import json, sys; before = set(sys.modules); import trainium_trainer.boundary; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in json.loads(out.stdout)}
    assert "trainium_trainer" in loaded and loaded - set(sys.stdlib_module_names) == {"trainium_trainer"}, loaded


def test_the_scans_see_an_offender(tmp_path: Path) -> None:
    """A planted offender on each side is reported, so the tests above cannot pass by missing them."""
    (tmp_path / TRAINER).mkdir()
    (tmp_path / PROVIDER / "plugins").mkdir(parents=True)
    (tmp_path / TRAINER / "train.py").write_text(
        '"""Reads ``TRAINIUM_OUTPUT_URI``."""\nimport os\nEXIT_OOPS = 4\n'
        'out = os.environ.get("TRAINIUM_OUTPUT_URI")\npath = f"{out}/metrics.json"\n'
        'record = {"kind": "train", "step": 1}\n'
    )
    (tmp_path / PROVIDER / "plugins" / "stream.py").write_text(
        'import os\nEXIT_BAD_INPUT = 64\nos.getenv("TRAINIUM_OUTPUT_URL")\nr = {}\nr.get("tokens_per_sec")\n'
        'name = "monitor-node0"\n'
    )
    assert env_names(TRAINER, tmp_path) == {
        "TRAINIUM_OUTPUT_URI": ["trainium_trainer/train.py:1", "trainium_trainer/train.py:4"]
    }
    assert env_names(TRAINER, tmp_path, with_docstrings=False) == {
        "TRAINIUM_OUTPUT_URI": ["trainium_trainer/train.py:4"]
    }
    assert set(env_names(PROVIDER, tmp_path)) - boundary.ENVIRONMENT == {"TRAINIUM_OUTPUT_URL"}
    assert file_names(TRAINER, tmp_path) == {"metrics.json": ["trainium_trainer/train.py:5"]}
    assert exit_code_definitions(TRAINER, tmp_path) == {"EXIT_OOPS": [(4, "trainium_trainer/train.py")]}
    assert exit_code_definitions(PROVIDER, tmp_path)["EXIT_BAD_INPUT"][0][0] != boundary.EXIT_BAD_INPUT
    assert record_literals(TRAINER, tmp_path) == ["trainium_trainer/train.py:6"]
    assert stream_layout_literals(PROVIDER, tmp_path) == ["airflow_provider_trainium/plugins/stream.py:6"]
    fields = record_fields_read(tmp_path / PROVIDER / "plugins" / "stream.py")
    assert set(fields) - boundary.RECORD_KEYS == {"tokens_per_sec"}


def test_metric_patterns_must_fill_known_fields_with_one_group_and_make_a_record() -> None:
    assert boundary.metric_pattern_problems(boundary.HUGGING_FACE_PATTERNS) == []
    problems = boundary.metric_pattern_problems({"loss": r"loss=\S+", "accuracy": r"(\d)", "lr": "("})
    assert len(problems) == 3
    assert "needs exactly one group" in problems[0] + problems[1] + problems[2]
    assert any("no such field" in p for p in problems) and any("not a regular expression" in p for p in problems)
    assert "no record would be made" in boundary.metric_pattern_problems({"lr": r"lr=(\S+)"})[0]
