"""What a worker must have installed before local compute runs the project's trainer there.

Local compute starts the trainer with the worker's own Python, so the ``trainer`` extra (XLA stack: torch,
torch-xla, numpy) or the ``native-trainer`` extra (native stack: torch 2.14) must be installed on every worker.
Without it the job would start and fail in its first import, after the run had already spent a try.
"""

from __future__ import annotations

import importlib.util
import sys

#: stack -> (the provider's extra, the modules the trainer imports from it first)
STACK_EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "xla": ("trainer", ("numpy", "torch", "torch_xla")),
    "native": ("native-trainer", ("torch",)),
}
#: The entry points that are the project's trainer (a user's own command brings its own environment).
TRAINER_PACKAGE = "trainer"


def missing_trainer_extra(entry_point: str, stack: str) -> str | None:
    """Why this worker cannot run ``entry_point`` on local compute, naming the extra to install; None when it can."""
    if entry_point.split(".", 1)[0] != TRAINER_PACKAGE or stack not in STACK_EXTRAS:
        return None
    extra, modules = STACK_EXTRAS[stack]
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (
        f"compute=local runs {entry_point} with this worker's Python ({sys.executable}), which lacks "
        f"{', '.join(missing)}: install the provider's {extra} extra on every worker "
        f"(pip install 'airflow-provider-trainium[{extra}]'), or run on ECS or Batch"
    )
