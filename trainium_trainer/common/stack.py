"""Which training stack this container runs (``TRAINIUM_STACK``), read once by each entry point."""

from __future__ import annotations

import os
from collections.abc import Mapping

from trainium_trainer import boundary
from trainium_trainer.common.errors import BadInputError


def selected_stack(env: Mapping[str, str] = os.environ) -> str:
    """``xla`` or ``native``; absent or empty is ``xla`` (every job before the native stack existed)."""
    value = env.get(boundary.ENV_STACK, "").strip().lower() or boundary.STACK_XLA
    if value not in boundary.STACKS:
        raise BadInputError(f"{boundary.ENV_STACK}={value!r}; allowed: {', '.join(boundary.STACKS)}")
    return value
