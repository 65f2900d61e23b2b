"""The context hash decides whether anything is built: it must move with content and nothing else."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from airflow_provider_trainium.image.context import BuildContext
from airflow_provider_trainium.image.dockerfile import context_sources
from airflow_provider_trainium.image.errors import ContextError
from airflow_provider_trainium.image.ignore import IgnoreRules
from tests.conftest import write_tree

DOCKERFILE = """\
FROM scratch
COPY app/ /app/
COPY config.json /etc/config.json
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "ctx",
        {
            "Dockerfile": DOCKERFILE,
            "app/main.py": "print('hi')\n",
            "app/lib/util.py": "X = 1\n",
            "config.json": "{}\n",
            "README.md": "not copied\n",
        },
    )


def tag_of(root: Path, **kwargs) -> str:
    return BuildContext.load(root, **kwargs).tag()


def test_tag_is_independent_of_mtime_and_creation_order(project: Path, tmp_path: Path) -> None:
    first = tag_of(project)
    os.utime(project / "app/main.py", (1, 1))
    os.utime(project / "config.json", (2_000_000_000, 2_000_000_000))
    assert tag_of(project) == first

    # The same files written in the opposite order, at another path, with other mtimes.
    other = tmp_path / "elsewhere"
    for rel in sorted((p.relative_to(project) for p in project.rglob("*") if p.is_file()), reverse=True):
        (other / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(project / rel, other / rel)
    assert tag_of(other) == first


def test_any_change_to_copied_content_or_dockerfile_makes_a_new_tag(project: Path) -> None:
    tags = {tag_of(project)}
    (project / "app/lib/util.py").write_text("X = 2\n")
    tags.add(tag_of(project))
    (project / "Dockerfile").write_text(DOCKERFILE + "LABEL a=b\n")
    tags.add(tag_of(project))
    (project / "app/new.py").write_text("")
    tags.add(tag_of(project))
    (project / "app/main.py").chmod(0o755)
    tags.add(tag_of(project))
    (project / "app/main.py").rename(project / "app/main2.py")
    tags.add(tag_of(project))
    assert len(tags) == 6


def test_build_args_and_target_are_part_of_the_tag(project: Path) -> None:
    base = tag_of(project)
    assert tag_of(project, build_args={"SOURCE_REVISION": "abc"}) != base
    assert tag_of(project, build_args={"SOURCE_REVISION": "abc"}) == tag_of(
        project, build_args={"SOURCE_REVISION": "abc"}
    )
    assert tag_of(project, target="final") != base


def test_files_the_dockerfile_does_not_copy_do_not_count(project: Path) -> None:
    first = tag_of(project)
    (project / "README.md").write_text("changed\n")
    (project / "notes").mkdir()
    (project / "notes/x.txt").write_text("x")
    assert tag_of(project) == first


def test_dockerignored_files_do_not_count(project: Path) -> None:
    (project / ".dockerignore").write_text("**/__pycache__\napp/*.log\n!app/keep.log\n")
    (project / "app/keep.log").write_text("kept")
    first = BuildContext.load(project)
    paths = {e.path for e in first.entries}
    assert "app/keep.log" in paths
    (project / "app/__pycache__").mkdir()
    (project / "app/__pycache__/main.cpython-311.pyc").write_bytes(b"\0")
    (project / "app/debug.log").write_text("noise")
    second = BuildContext.load(project)
    assert second.tag() == first.tag()
    assert not {e.path for e in second.entries} - paths


def test_only_permission_class_counts_not_umask(project: Path) -> None:
    (project / "app/main.py").chmod(0o644)
    first = tag_of(project)
    (project / "app/main.py").chmod(0o664)  # another umask: same image content after normalisation
    assert tag_of(project) == first
    (project / "app/main.py").chmod(0o744)  # executable: a different image
    assert tag_of(project) != first


def test_staged_context_holds_exactly_the_hashed_files(project: Path, tmp_path: Path) -> None:
    context = BuildContext.load(project)
    staged = context.stage(tmp_path / "staged")
    found = sorted(p.relative_to(staged.directory).as_posix() for p in staged.directory.rglob("*"))
    assert found == [e.path for e in context.entries]
    assert "README.md" not in found
    assert (staged.directory / "app/lib/util.py").read_text() == "X = 1\n"


def test_archives_are_byte_identical_across_runs(project: Path, tmp_path: Path) -> None:
    context = BuildContext.load(project)
    one = context.stage(tmp_path / "one")
    os.utime(project / "config.json", (5, 5))
    two = BuildContext.load(project).stage(tmp_path / "two")
    tars = []
    for staged in (one, two):
        buffer = io.BytesIO()
        staged.write_tar(buffer)
        tars.append(buffer.getvalue())
    assert tars[0] == tars[1]
    one.write_zip(tmp_path / "a.zip")
    two.write_zip(tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with tarfile.open(fileobj=io.BytesIO(tars[0])) as tar:
        assert "app/main.py" in tar.getnames()
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        assert archive.read("config.json") == b"{}\n"


def test_dockerfile_parser_finds_every_context_source() -> None:
    text = """\
# escape=\\
ARG SRC=src
FROM python:3.12 AS build
ARG SRC
COPY --chown=1000:1000 ${SRC}/a.txt \\
     b.txt /dst/
COPY ["c d.txt", "/dst/"]
COPY --from=build /out /out
ADD https://example.com/file.tgz /tmp/
RUN --mount=type=bind,source=req.txt,target=/r.txt --mount=type=cache,target=/root/.cache true
RUN <<EOF
COPY not/a/source.txt /x
EOF
ADD *.toml /cfg/
"""
    assert context_sources(text) == ["src/a.txt", "b.txt", "c d.txt", "req.txt", "*.toml"]
    assert context_sources(text, {"SRC": "other"})[0] == "other/a.txt"


def test_glob_sources_and_ignore_semantics(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "Dockerfile": "FROM scratch\nCOPY *.toml conf/**/*.yml /x/\n",
            "a.toml": "",
            "b.toml": "",
            "sub/c.toml": "",
            "conf/one.yml": "",
            "conf/deep/two.yml": "",
            "conf/deep/three.txt": "",
        },
    )
    paths = {e.path for e in BuildContext.load(root).entries}
    assert paths == {"Dockerfile", "a.toml", "b.toml", "conf/one.yml", "conf/deep/two.yml"}
    rules = IgnoreRules(["*", "!docker/", "**/__pycache__"])
    assert rules.excluded("README.md")
    assert not rules.excluded("docker/Dockerfile")
    assert rules.excluded("docker/__pycache__/x.pyc")


# --- bad input: every one of these fails before anything is built ---------------------------------


def test_missing_dockerfile(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="Dockerfile not found"):
        BuildContext.load(tmp_path, "docker/Dockerfile")


def test_context_that_is_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="is not a directory"):
        BuildContext.load(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(ContextError, match="is not a directory"):
        BuildContext.load(tmp_path / "file")


def test_dockerfile_outside_the_context(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Dockerfile": "FROM scratch\n", "ctx/a": ""})
    with pytest.raises(ContextError, match="inside the build context"):
        BuildContext.load(tmp_path / "ctx", str(tmp_path / "Dockerfile"))


def test_unreadable_context_entry_is_named(project: Path) -> None:
    os.mkfifo(project / "app/pipe")
    with pytest.raises(ContextError, match=r"'app/pipe' is a fifo"):
        BuildContext.load(project)


@pytest.mark.parametrize(
    ("dockerfile", "message"),
    [
        ("FROM scratch\nCOPY missing.txt /\n", "'missing.txt' not found"),
        ("FROM scratch\nCOPY ../secret /\n", "outside the build context"),
        ("FROM scratch\nCOPY *.nothing /\n", "matches no file"),
        ("FROM scratch\nCOPY README.md /\n", "excluded by .dockerignore"),
    ],
)
def test_bad_copy_sources(project: Path, dockerfile: str, message: str) -> None:
    (project / ".dockerignore").write_text("README.md\n")
    (project / "Dockerfile").write_text(dockerfile)
    with pytest.raises(ContextError, match=message):
        BuildContext.load(project)


def test_file_changed_between_hash_and_stage_is_refused(project: Path, tmp_path: Path) -> None:
    context = BuildContext.load(project)
    (project / "config.json").write_text('{"changed": true}\n')
    with pytest.raises(ContextError, match="changed while the image was being prepared"):
        context.stage(tmp_path / "staged")


def test_symlinked_directories_are_never_followed_out_of_the_context(tmp_path: Path) -> None:
    """A symlink to a directory outside the context is copied as a link at most: nothing behind it is
    hashed, staged or uploaded, and a COPY source that passes through it is refused."""
    outside = write_tree(tmp_path / "outside", {"secret/credentials": "aws_secret_access_key=x\n"})
    ctx = write_tree(tmp_path / "ctx", {"Dockerfile": "FROM scratch\nCOPY app/ /app/\n", "app/main.py": "x\n"})
    os.symlink(outside, ctx / "app" / "home")
    context = BuildContext.load(ctx, "Dockerfile")
    assert {e.path: e.kind for e in context.entries}["app/home"] == "link"
    assert not any("credentials" in e.path for e in context.entries)
    staged = context.stage(tmp_path / "staged")
    with zipfile.ZipFile(_zip(staged, tmp_path)) as archive:
        assert not any("credentials" in n for n in archive.namelist())

    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY app/home/secret/credentials /c\n")
    with pytest.raises(ContextError, match="symlinked directory 'app/home'"):
        BuildContext.load(ctx, "Dockerfile")
    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY app/home/secret /s\n")
    with pytest.raises(ContextError, match="never follows symlinked directories"):
        BuildContext.load(ctx, "Dockerfile")


def _zip(staged, tmp_path: Path) -> Path:
    path = tmp_path / "ctx.zip"
    staged.write_zip(path)
    return path
