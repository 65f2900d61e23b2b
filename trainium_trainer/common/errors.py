"""Bad input ends a job with ``EXIT_BAD_INPUT`` (``trainium_trainer.boundary``): the scheduler knows a retry cannot
help."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from trainium_trainer.boundary import EXIT_BAD_INPUT

log = logging.getLogger("trainer")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class BadInputError(Exception):
    """The job's input is wrong: the run fails once, clearly, and is not retried."""


def exits_on_bad_input(main: Callable[_P, _R]) -> Callable[_P, _R]:
    """Turn :class:`BadInputError` into a one-line message and :data:`EXIT_BAD_INPUT`."""

    @functools.wraps(main)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return main(*args, **kwargs)
        except BadInputError as err:
            print(f"BAD INPUT: {err}", file=sys.stderr, flush=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper
