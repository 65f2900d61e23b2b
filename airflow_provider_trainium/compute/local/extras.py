"""What a worker must have installed before local compute runs the project's trainer there.

Local compute starts the trainer with the worker's own Python, so the ``trainer`` extra (XLA stack) or the
``native-trainer`` extra (native stack) must be installed on every worker. Without it the job would start and
fail in its first import, after the run had already spent a try. What is checked is what every trainer module
imports whichever extra brought it (numpy, torch): a data-prep job of a native DAG carries the default stack,
so a stack's own modules (torch-xla) would refuse a worker that runs it fine.
"""

from __future__ import annotations

import importlib.util
import sys

#: stack -> the provider's extra that brings its trainer
STACK_EXTRAS: dict[str, str] = {"xla": "trainer", "native": "native-trainer"}
#: What every trainer module needs, in both extras.
TRAINER_MODULES = ("numpy", "torch")
#: The entry points that are the project's trainer (a user's own command brings its own environment).
TRAINER_PACKAGE = "trainium_trainer"


def missing_trainer_extra(entry_point: str, stack: str) -> str | None:
    """Why this worker cannot run ``entry_point`` on local compute, naming the extra to install; None when it can."""
    if entry_point.split(".", 1)[0] != TRAINER_PACKAGE or stack not in STACK_EXTRAS:
        return None
    extra = STACK_EXTRAS[stack]
    missing = [name for name in TRAINER_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (
        f"compute=local runs {entry_point} with this worker's Python ({sys.executable}), which lacks "
        f"{', '.join(missing)}: install the provider's {extra} extra on every worker "
        f"(pip install 'airflow-provider-trainium[{extra}]'), or run on ECS or Batch"
    )
