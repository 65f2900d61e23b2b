"""Every Python block of the user guide runs as written: it imports what it names and declares its tasks.

The user guide (docs/index.md, "User guide") is what a DAG author copies; a renamed module, a removed argument or an
example the parse-time checks refuse fails here, not in a reader's DAG. docs/byo.md's job examples go further in
tests/unit/operators/test_job_spec.py: they pass every pre-submit check on local compute.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
from airflow.sdk import DAG
from airflow.sdk.definitions._internal.contextmanager import DagContext

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: The user guide's pages on the provider's Python faces (operators, decorator, connection, DAG kit, registry).
PAGES = ("operators.md", "byo.md", "byo-compile.md", "connection.md", "dag-kit.md", "registry.md")
BLOCK = re.compile(r"```python\n(.*?)```", flags=re.S)


def blocks() -> list[tuple[str, int, str]]:
    return [(page, i, code) for page in PAGES for i, code in enumerate(BLOCK.findall((DOCS / page).read_text()))]


def test_the_guide_pages_are_the_index_s_user_guide_and_hold_examples() -> None:
    index = (DOCS / "index.md").read_text()
    user_guide = index[index.index("## User guide") : index.index("## Platform")]
    assert all(f"]({page}" in user_guide for page in PAGES)
    assert {page for page, _, _ in blocks()} == set(PAGES) - {"connection.md"}  # the connection page has a table


@pytest.mark.parametrize(("page", "index", "code"), blocks(), ids=lambda v: v if isinstance(v, str) else str(v))
def test_each_block_declares_its_tasks_as_written(page: str, index: int, code: str, tmp_path, monkeypatch) -> None:
    dags: list[DAG] = []
    push = DagContext.push
    monkeypatch.setattr(DagContext, "push", classmethod(lambda cls, dag: (dags.append(dag), push(dag))))
    example = tmp_path / f"{page.removesuffix('.md')}_{index}.py"
    example.write_text(code)
    with DAG("guide_example", schedule=None):  # a block without a DAG of its own declares its tasks here
        runpy.run_path(str(example))
    tasks = [task for dag in dags if dag is not None for task in dag.tasks]
    assert tasks, f"docs/{page} block {index} declared no task"
