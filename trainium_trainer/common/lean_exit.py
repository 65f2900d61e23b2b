"""Leave a trainer process without the interpreter's module teardown.

A rank that imported torch (with torch-xla or transformers) spends about a CPU-second after its work is done
tearing that module graph down: a 2-rank all-reduce job took 9.6 CPU-s with the teardown and 7.1 without. On a
Trainium node that is a second per rank; on a laptop or a CI machine running hundreds of local jobs on two cores
it is minutes of nothing.

``run(main)`` does what interpreter shutdown does that a job's results can depend on, in the same order: it
stops thread pools and joins the threads that are not daemons, runs the ``atexit`` handlers (logging's flush,
multiprocessing's children, torch's), flushes every file still open, then leaves with ``main``'s status. Only a
normal end takes this path: an exception (a ``SystemExit`` whose code is not a number among them) takes Python's
own exit, traceback and all.
"""

from __future__ import annotations

import _io
import atexit
import contextlib
import gc
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


def run(main: Callable[[], object]) -> None:
    """Run ``main`` as a process's entry point (``if __name__ == "__main__": run(main)``).

    Its return value or ``SystemExit`` code is the exit status, as ``sys.exit`` reads it (``None``: 0).
    """
    try:
        result = main()
    except SystemExit as exit_:
        result = exit_.code
    if result is None or isinstance(result, int):
        leave(result or 0)
    sys.exit(str(result))  # a message: Python prints it and exits 1


def leave(status: int) -> NoReturn:
    """End the process with ``status`` after shutdown's side effects, without the module teardown."""
    # the interpreter's own first step: threading's exit hooks (concurrent.futures tells its pool workers to
    # stop there: torch's async compile leaves such a pool) and then the join of every thread not a daemon
    threading._shutdown()  # type: ignore[attr-defined]  # private, and what Py_FinalizeEx itself calls
    atexit._run_exitfuncs()
    for stream in gc.get_objects():  # what the teardown would have flushed when it freed the file objects
        # type(), not isinstance(): a weak proxy among the objects would be dereferenced, and may be dead. The C
        # base every file object derives from, not the io.IOBase ABC: asked of each of the ~10^5 types a rank
        # holds, the ABC's subclass hooks cost 0.37 s a process, the plain type check 0.05 s.
        if issubclass(type(stream), _io._IOBase):
            with contextlib.suppress(Exception):  # closed, detached or a broken pipe: nothing to keep
                if not stream.closed:
                    stream.flush()
    for std in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            std.flush()
    os._exit(status)
