"""The rooms a value passes through: the provider modules a submit enters, in order, as a profiler sees them.

A *stop* is a call from one provider module into another; a *return* is a stop at a module the walk has
already left once (not the caller going on after its callee returned: that is the same visit). The walk ends at
the first AWS submit call (``SubmitJob`` / ``RunTask``), which botocore's ``before-call`` event marks.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

PROVIDER = "airflow_provider_trainium"
#: Value objects every room reads (a property of the spec or a catalog row): reading one is not a step of the walk.
VALUE_MODULES = frozenset({f"{PROVIDER}.neuron.spec", f"{PROVIDER}.neuron.catalog"})


def _room(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    provider = name == PROVIDER or name.startswith(PROVIDER + ".")
    return name if provider and name not in VALUE_MODULES else None


def _calling_room(frame: FrameType) -> str | None:
    """The provider module that called ``frame``, through any library frames in between."""
    back = frame.f_back
    while back is not None:
        room = _room(back)
        if room is not None:
            return room
        back = back.f_back
    return None


@dataclass
class Walk:
    stops: list[str] = field(default_factory=list)
    done: bool = False
    _seen: set[str] = field(default_factory=set)
    returns: list[str] = field(default_factory=list)

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.done or event != "call":
            return
        callee = _room(frame)
        if callee is None or callee == _calling_room(frame) or (self.stops and self.stops[-1] == callee):
            return  # not a provider room, a call inside one, or the same room again straight after
        if callee in self._seen:
            self.returns.append(callee)
        self._seen.add(callee)
        self.stops.append(callee)

    def start(self) -> None:
        sys.setprofile(self._profile)

    def stop(self, *_: Any, **__: Any) -> None:
        self.done = True
        sys.setprofile(None)

    def report(self) -> str:
        short = [s.removeprefix(PROVIDER + ".") for s in self.stops]
        return f"{len(self.stops)} stops, {len(self.returns)} returns: " + " -> ".join(short)


ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR", Path(__file__).resolve().parents[2] / "test-artifacts"))


def walk_to(client: Any, operation: str, run: Any) -> Walk:
    walk = Walk()
    client.meta.events.register(f"before-call.*.{operation}", walk.stop)
    walk.start()
    try:
        run()
    except BaseException as err:  # noqa: BLE001 - the deferral (TaskDeferred) or anything after the submit
        if not walk.done:
            raise AssertionError(f"stopped before {operation}: {err!r}") from err
    finally:
        walk.stop()
    return walk


def record(name: str, walk: Walk) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"submit-walk-{name}.json").write_text(json.dumps({"stops": walk.stops, "returns": walk.returns}))
    print(f"{name}: {walk.report()}")


def walk_a_whole_try(name: str, op: Any, context: dict[str, Any], client: Callable[[Any], Any], operation: str) -> Walk:
    """``op``'s try walked from ``execute`` to ``operation`` and recorded as ``name``. One ``prepare`` first
    reaches the backend whose ``client(backend)`` the walk watches; what it kept (the prepared try, the backend's
    container plan per spec) is then dropped, so the walk covers the whole try, prepare included."""
    watched = client(op.backend_for(op.prepare(context).compute))
    op._prepared = None
    vars(op._backend).pop("_plans", None)
    walk = walk_to(watched, operation, lambda: op.execute(context))
    record(name, walk)
    assert walk.done and walk.stops[0].endswith("operators.job")
    return walk
