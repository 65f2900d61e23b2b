"""``torch.profiler`` over the training steps the operator's ``profile_steps`` names (``boundary.ENV_PROFILE_STEPS``):
each rank writes its Chrome trace to ``<output_uri>/profile/trace-rank<R>.json``, which the Trainium view links.

Off Trainium this is the whole profile (CPU operators, and the XLA graph executions where torch-xla runs on the
CPU). On Trainium it is the host side only: the device profile is the Neuron profiler's, which this module does
not capture yet (docs/monitoring.md, "Profiles").
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from trainium_trainer import boundary
from trainium_trainer.common import uri as uris

log = logging.getLogger("trainer")


class StepProfiler:
    """Call ``before_step(n)`` before training step ``n`` (1-based) and ``after_step(n)`` after it; ``close()``
    at the end writes what a run that stopped early captured. Does nothing without the variable."""

    def __init__(self, steps: tuple[int, int] | None, output_uri: str | None, rank: int) -> None:
        self.steps = steps if output_uri else None
        self.output_uri = output_uri
        self.rank = rank
        self._profile: Any = None
        self.written: str | None = None

    @classmethod
    def from_env(cls, output_uri: str | None, rank: int, env: Mapping[str, str] = os.environ) -> StepProfiler:
        raw = env.get(boundary.ENV_PROFILE_STEPS, "").strip()
        return cls(boundary.parse_profile_steps(raw) if raw else None, output_uri, rank)

    def before_step(self, step: int) -> None:
        if self.steps is not None and self._profile is None and self.written is None and step >= self.steps[0]:
            # Kineto logs "gpuGetDeviceCount failed" at ERROR on a host without a GPU, a successful run's only
            # ERROR line; a level set by the job's own environment wins.
            os.environ.setdefault("KINETO_LOG_LEVEL", "5")
            from torch.profiler import ProfilerActivity, profile

            self._profile = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
            self._profile.__enter__()

    def after_step(self, step: int) -> None:
        if self._profile is not None and self.steps is not None and step >= self.steps[1]:
            self.close()

    def close(self) -> None:
        if self._profile is None:
            return
        profile, self._profile = self._profile, None
        profile.__exit__(None, None, None)
        assert self.output_uri is not None  # no profile starts without one
        target = uris.join(self.output_uri, boundary.PROFILE_DIR, boundary.profile_trace_name(self.rank))
        with tempfile.TemporaryDirectory(prefix="trainium-profile-") as folder:
            local = os.path.join(folder, "trace.json")
            profile.export_chrome_trace(local)
            with open(local, "rb") as trace:
                uris.write_bytes(target, trace.read())
        self.written = target
        log.info("profile of steps %s-%s: %s", *(self.steps or (0, 0)), target)
