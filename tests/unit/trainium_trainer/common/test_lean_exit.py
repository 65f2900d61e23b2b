"""``lean_exit.run``: the exit status of ``main``, and every side effect of a normal shutdown kept."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ENTRY = textwrap.dedent(
    """
    import atexit, concurrent.futures, queue, sys, threading, weakref
    from pathlib import Path
    from trainium_trainer.common import lean_exit

    out = Path(sys.argv[1])
    unclosed = (out / "unclosed.txt").open("w")  # never flushed nor closed by the program
    handoff = queue.Queue()
    class Gone: pass
    dead = weakref.proxy(Gone())  # a dead weak proxy among the objects, as torch leaves some
    pool = concurrent.futures.ThreadPoolExecutor(1)  # left running, as torch's async compile leaves its pool

    def late_writer():
        (out / "thread.txt").write_text(handoff.get())

    def main():
        threading.Thread(target=late_writer).start()  # not a daemon: shutdown waits for it
        pool.submit(print, end="")
        atexit.register(lambda: (out / "atexit.txt").write_text("ran"))
        unclosed.write("kept")
        print("printed", end="")
        handoff.put("joined")
        return {result}

    lean_exit.run(main)
    """
)


def run_entry(tmp_path: Path, result: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "entry.py"
    script.write_text(ENTRY.format(result=result))
    return subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(("result", "status"), [("None", 0), ("65", 65)])
def test_a_normal_end_keeps_what_shutdown_would_have_kept(tmp_path, result, status):
    done = run_entry(tmp_path, result)
    assert done.returncode == status, done.stderr
    assert done.stdout == "printed"
    assert (tmp_path / "unclosed.txt").read_text() == "kept"
    assert (tmp_path / "thread.txt").read_text() == "joined"
    assert (tmp_path / "atexit.txt").read_text() == "ran"


def test_a_message_exits_as_python_does(tmp_path):
    done = run_entry(tmp_path, "'bad things'")
    assert done.returncode == 1 and done.stderr.strip().endswith("bad things")
