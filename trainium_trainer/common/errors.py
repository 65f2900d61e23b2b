"""Bad input ends a job with ``EXIT_BAD_INPUT`` (``trainium_trainer.boundary``): the scheduler knows a retry cannot
help."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import TypeVar

from trainium_trainer.boundary import EXIT_BAD_INPUT

log = logging.getLogger("trainer")
F = TypeVar("F", bound=Callable[..., object])


class BadInputError(Exception):
    """The job's input is wrong: the run fails once, clearly, and is not retried."""


def exits_on_bad_input(main: F) -> F:
    """Turn :class:`BadInputError` into a one-line message and :data:`EXIT_BAD_INPUT`."""

    @functools.wraps(main)
    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return main(*args, **kwargs)
        except BadInputError as err:
            print(f"BAD INPUT: {err}", file=sys.stderr, flush=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]
