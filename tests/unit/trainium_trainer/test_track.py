"""``trainium_trainer.track``: a user's script's steps land in the live stream as the view reads them, only on rank
0 and only under an output URI, with throughput measured between calls and no torch needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainium_trainer import boundary, track

ROOT = Path(__file__).resolve().parents[3]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def stream_records(output: Path) -> list[dict]:
    """Every record of the train source, chunk by chunk, through the format's own reader."""
    folder = output / boundary.STREAM_DIR / boundary.TRAIN_SOURCE
    names = boundary.chunk_order([p.name for p in folder.iterdir()]) if folder.exists() else []
    return [r for name in names for r in boundary.parse_chunk((folder / name).read_bytes(), name)]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No tracker made yet, none of the launcher's variables set, the working directory empty."""
    monkeypatch.setattr(track, "_current", None)
    for name in (track.RANK_ENV, boundary.ENV_OUTPUT_URI, boundary.ENV_STREAM_EVERY_S, boundary.ENV_PROGRESS_EVERY_S):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_steps_land_in_the_stream_with_rates_measured_between_calls(tmp_path: Path) -> None:
    clock, lines = Clock(), []
    tracker = track.Tracker(tmp_path.as_uri(), every_s=60, clock=clock, emit=lines.append, env={})
    tracker.log(step=1, loss=2.5, tokens=4096, samples=8, total_steps=3, lr=1e-3, epoch=0)
    clock.now += 2.0
    tracker.log(step=2, loss=2.25, tokens=4096, samples=8, lr=5e-4, epoch=0.5)
    clock.now += 4.0
    tracker.log(step=3, loss=float("nan"), tokens=2048)
    tracker.log_eval(step=3, loss=2.0, accuracy=0.75)
    assert stream_records(tmp_path) == []  # buffered until the interval or close
    tracker.close()

    first, second, third, evaluation = stream_records(tmp_path)
    assert all(r["v"] == boundary.STREAM_VERSION and isinstance(r["time"], float) for r in (first, evaluation))
    assert [r["kind"] for r in (first, second, third, evaluation)] == ["train"] * 3 + ["eval"]
    assert set(first) == {boundary.KEY_VERSION, boundary.KEY_TIME, boundary.KEY_KIND, *boundary.RECORD_FIELDS["train"]}
    # the first call only starts the clock; the others divide what they were given by the time since the last
    assert first["tokens_per_s"] is None and first["samples_per_s"] is None
    assert second["tokens_per_s"] == 2048.0 and second["samples_per_s"] == 4.0
    assert third["tokens_per_s"] == 512.0 and third["samples_per_s"] is None
    assert [r["step"] for r in (first, second, third)] == [1, 2, 3]
    assert (first["loss"], second["loss"], third["loss"]) == (2.5, 2.25, None)  # NaN: null, as JSON has no NaN
    assert [r["total_steps"] for r in (first, second, third)] == [3, 3, 3]  # given once, kept
    assert (second["lr"], second["epoch"], first["epoch"], third["lr"]) == (5e-4, 0.5, 0, None)
    assert first["mfu"] is None and first["xla_graphs"] is None
    assert evaluation["step"] == 3 and evaluation["loss"] == 2.0 and evaluation["accuracy"] == 0.75

    # the progress line: the first record and the last step (the others fall inside the 30 s interval)
    assert len(lines) == 2
    assert lines[0].startswith("step 1/3 (33%) loss 2.5 | ETA ?")
    assert lines[1].startswith("step 3/3 (100%) loss nan | 512 tokens/s | ETA 0s")


def test_no_total_steps_means_curves_without_a_progress_line(tmp_path: Path) -> None:
    lines: list[str] = []
    tracker = track.Tracker(str(tmp_path), every_s=0, emit=lines.append, env={})
    tracker.log(step=1, loss=1.0)
    assert [r["total_steps"] for r in stream_records(tmp_path)] == [None]  # every_s=0: written at once
    assert lines == []


def test_a_restarted_script_continues_the_stream_after_the_last_chunk(tmp_path: Path) -> None:
    for loss in (3.0, 2.0):
        tracker = track.Tracker(str(tmp_path), env={})
        tracker.log(step=1, loss=loss)
        tracker.close()
    assert [r["loss"] for r in stream_records(tmp_path)] == [3.0, 2.0]


def test_the_module_functions_write_on_rank_0_under_the_output_uri(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = fresh / "out"
    monkeypatch.setenv(boundary.ENV_OUTPUT_URI, out.as_uri())
    monkeypatch.setenv(track.RANK_ENV, "0")
    track.log(step=5, loss=1.5, total_steps=5, lr=0.1)
    track.log_eval(step=5, accuracy=0.9)
    track.close()
    train, evaluation = stream_records(out)
    assert (train["step"], train["loss"], train["total_steps"], train["lr"]) == (5, 1.5, 5, 0.1)
    assert (evaluation["step"], evaluation["accuracy"], evaluation["loss"]) == (5, 0.9, None)
    assert "progress step 5/5 (100%) loss 1.5" in capsys.readouterr().out


@pytest.mark.parametrize("rank", ["1", "7", "not-a-rank"])
def test_any_other_rank_writes_nothing(fresh: Path, monkeypatch: pytest.MonkeyPatch, rank: str, capsys) -> None:
    out = fresh / "out"
    monkeypatch.setenv(boundary.ENV_OUTPUT_URI, out.as_uri())
    monkeypatch.setenv(track.RANK_ENV, rank)
    track.log(step=1, loss=1.0, total_steps=1)
    track.log_eval(step=1, loss=1.0)
    track.close()
    assert not track.current().active
    assert not out.exists() and capsys.readouterr().out == ""


def test_without_an_output_uri_every_call_is_a_no_op(fresh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert track.current().log(step=1, loss=1.0, tokens=10, total_steps=1) is None
    track.log(step=2, loss=1.0, total_steps=2)
    track.log_eval(step=2, loss=1.0)
    track.close()
    assert not track.current().active
    assert list(fresh.iterdir()) == [] and capsys.readouterr().out == ""


def test_the_environment_sets_the_intervals() -> None:
    env = {boundary.ENV_OUTPUT_URI: "s3://bucket/run", boundary.ENV_STREAM_EVERY_S: "2.5",
           boundary.ENV_PROGRESS_EVERY_S: "0"}  # fmt: skip
    tracker = track.Tracker.from_env(env)
    assert (tracker.output_uri, tracker.every_s, tracker.progress_every_s) == ("s3://bucket/run", 2.5, 0.0)
    typo = track.Tracker.from_env({**env, boundary.ENV_STREAM_EVERY_S: "ten", boundary.ENV_PROGRESS_EVERY_S: "-1"})
    assert typo.every_s is None and typo.progress_every_s == 30.0  # the defaults, with a warning


def test_a_stream_that_cannot_be_written_never_stops_training(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    tracker = track.Tracker(str(blocker), every_s=0, env={})
    tracker.log(step=1, loss=1.0)
    tracker.log_eval(step=1, loss=1.0)
    tracker.close()
    assert "could not write" in caplog.text


@pytest.mark.process
def test_the_user_path_needs_no_torch(tmp_path: Path) -> None:
    """A script without torch (torch made unimportable) records steps; importing ``track`` alone loads only the
    standard library, and fsspec only once there is something to write."""
    out = tmp_path / "out"
    code = (
        "import json, sys\n"
        "sys.modules['torch'] = None\n"
        "before = set(sys.modules)\n"
        "from trainium_trainer import track\n"
        "imported = sorted({m.split('.')[0] for m in set(sys.modules) - before})\n"
        "track.log(step=1, loss=0.5, total_steps=1)\n"
        "print(json.dumps({'imported': imported, 'heavy': sorted(m for m in ('torch', 'transformers', 'airflow')\n"
        "                  if sys.modules.get(m) is not None)}))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), boundary.ENV_OUTPUT_URI: str(out)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert set(result["imported"]) - set(sys.stdlib_module_names) == {"trainium_trainer"}
    assert result["heavy"] == []
    assert [r["loss"] for r in stream_records(out)] == [0.5]  # written at interpreter exit
