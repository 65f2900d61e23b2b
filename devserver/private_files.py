"""Secret files readable by their owner only from their first byte.

Writing a file and then ``chmod``-ing it leaves a window in which another local user can open it with the
default (umask) mode; a descriptor opened then keeps reading after the ``chmod``. Creating the file with
``O_EXCL`` and mode 0600 closes that window, and ``os.replace`` swaps the new content in atomically.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

PRIVATE = 0o600


def write_private(path: Path, text: str) -> None:
    """Create or replace ``path`` with ``text``, mode 0600 from its creation (never more open than that)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
