"""Bad input ends a job with ``EXIT_BAD_INPUT`` (``trainium_trainer.boundary``): the scheduler knows a retry cannot
help. :func:`job_main` wraps a job's entry point with that and the trainer's log format."""

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


def configure_logging() -> None:
    """INFO and up to stderr, timestamped: the lines every job's log (CloudWatch, the task log) shows."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")


def job_main(main: Callable[_P, _R]) -> Callable[_P, _R]:
    """A job's ``main``: logging configured before it runs, bad input turned into :data:`EXIT_BAD_INPUT`."""
    checked = exits_on_bad_input(main)

    @functools.wraps(main)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        configure_logging()
        return checked(*args, **kwargs)

    return wrapper
